"""The measuring loop of the by-difference scripts: each variant's iterator (cache filled) timed in
interleaved rounds of 1 s (the order turned every round), process CPU per minibatch."""
import statistics, time


def cpu_per_minibatch(variants: dict, rounds: int, fill: int) -> dict:
    """variant -> [(ms of process CPU per minibatch, minibatches) per round]."""
    its = {}
    for k, ds in variants.items():
        it = iter(ds)
        for _ in range(fill):  # fills the cache
            next(it)
        its[k] = it
    res = {k: [] for k in variants}
    for r in range(rounds):
        for k in (list(variants) if r % 2 == 0 else reversed(list(variants))):
            it = its[k]
            for _ in range(20):
                next(it)
            c0, w0, n = time.process_time(), time.perf_counter(), 0
            while time.perf_counter() - w0 < 1.0:
                next(it)
                n += 1
            res[k].append(((time.process_time() - c0) / n * 1e3, n))
    for k, v in res.items():
        print(f"{k:22s} median {statistics.median(x for x, _ in v):.3f} ms/minibatch "
              f"(range {min(x for x, _ in v):.3f}-{max(x for x, _ in v):.3f}), {statistics.median(n for _, n in v)} minibatches/s")
    return {k: statistics.median(x for x, _ in v) for k, v in res.items()}
