import sys, time, os
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
sys.argv += []
import tensorflow as tf
from plumbkit.bench import pipelines as P, examples
auto = tf.data.AUTOTUNE
paths = P.image_records("/tmp/busy-cores-data", files=16, per_file=256)
exec(open(__import__("os").path.join(__import__("os").path.dirname(__file__), "boundary.py")).read().split("def run(")[0].split("auto = tf.data.AUTOTUNE")[1])
def switches():
    v = nv = 0
    for t in os.listdir("/proc/self/task"):
        try:
            for line in open(f"/proc/self/task/{t}/status"):
                if line.startswith("voluntary_ctxt_switches"): v += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"): nv += int(line.split()[1])
        except OSError: pass
    return v, nv
def measure(ds, seconds=3.0, label=""):
    it = iter(ds.repeat())
    for _ in range(300): next(it)
    v0, n0 = switches(); c0 = time.process_time(); t0 = time.perf_counter(); n = 0
    while time.perf_counter() - t0 < seconds:
        next(it); n += 1
    wall = time.perf_counter() - t0; v1, n1 = switches()
    busy = (time.process_time() - c0) / wall
    print(f"{label}: {n/wall:.0f}/s busy {busy:.2f} voluntary {(v1-v0)/wall:.0f}/s ({(v1-v0)/n:.1f} per minibatch), involuntary {(n1-n0)/wall:.0f}/s; idle {2-busy:.2f} cores -> {(2-busy)/max(1,(v1-v0)/wall)*1e6:.1f} us idle per switch", flush=True)
for spec in sys.argv[1:]:
    k, inside, sh = (int(x) for x in spec.split(","))
    measure(expert(k, bool(inside), sh), label=spec)
