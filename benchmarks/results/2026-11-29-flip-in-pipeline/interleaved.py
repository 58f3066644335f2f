"""The measuring loops of this folder's scripts: iterators timed in rounds, one window each per
round, by the process CPU clock. ``cpu_per_minibatch``: the by-difference scripts (1 s windows,
the order turned every round); ``cpu_per_element``: the maps-alone scripts (the same order every
round)."""
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


def cpu_per_element(iterators: dict, per_next: int, *, rounds: int = 5, window: float) -> dict:
    """iterator key -> median µs of process CPU per element (``per_next`` elements a ``next()``)."""
    res = {k: [] for k in iterators}
    for _ in range(rounds):
        for k, it in iterators.items():
            c0, w0, m = time.process_time(), time.perf_counter(), 0
            while time.perf_counter() - w0 < window:
                next(it)
                m += 1
            res[k].append((time.process_time() - c0) / m / per_next * 1e6)
    return {k: statistics.median(v) for k, v in res.items()}
