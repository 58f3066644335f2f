"""Does keeping the data evicted every 0.25 s (the bench's comparison) cost yours more CPU per
minibatch than evicting once before the run (the trace's condition)? Interleaved rounds."""
import time, statistics, sys
from pathlib import Path
from plumbkit.bench.disk_tier import evaluation_records, evaluation, kept_evicted, evictor
from plumbkit.tfdata.run import Runner
d = Path("/tmp/w/drift/eval")  # 1 GB of the evaluation row's records, written once
paths = sorted(str(p) for p in d.glob("eval-*.tfrecord")) or evaluation_records(d, gigabytes=1.0)
make = evaluation(paths)
evict = evictor(paths, Path("/tmp/w/drift/nocache"))
def run(kept):
    evict("before")
    r = Runner(make())
    r.consume(20, limit=60)
    import contextlib
    ctx = kept_evicted(evict) if kept else contextlib.nullcontext()
    with ctx:
        c0, n0, t0 = time.process_time(), r.batches, time.perf_counter()
        while time.perf_counter() - t0 < 4.0:
            r.window(0.5)
        c, n, w = time.process_time() - c0, r.batches - n0, time.perf_counter() - t0
    r.close()
    return n / w, c / n * 1e3
res = {False: [], True: []}
for i in range(int(sys.argv[1])):
    for kept in ((False, True) if i % 2 == 0 else (True, False)):
        res[kept].append(run(kept))
        print(f"kept_evicted={kept}: {res[kept][-1][0]:.1f}/s, {res[kept][-1][1]:.2f} ms CPU per minibatch", flush=True)
for kept, v in res.items():
    print(f"kept_evicted={kept}: median {statistics.median(x[0] for x in v):.1f}/s, {statistics.median(x[1] for x in v):.2f} ms CPU/minibatch")
