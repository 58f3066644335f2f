import time, threading, statistics, sys
from pathlib import Path
import tensorflow as tf
import plumbkit
import plumbkit.tfdata.calibrate as cal
from plumbkit.bench import examples as ex
from plumbkit.tfdata import disk_tier
from plumbkit.tfdata.disk import evict_from_page_cache
tier = Path("/tmp/w/tier")
files = [str(p) for p in tier.rglob("*") if p.is_file()]
def run(make, every=0.25, seconds=3.0):
    stop = threading.Event()
    def keep():
        while not stop.wait(every): evict_from_page_cache(files)
    evict_from_page_cache(files)
    it = iter(make())
    for _ in range(20): next(it)
    th = threading.Thread(target=keep, daemon=True); th.start()
    n = 0; w, c = time.perf_counter(), time.process_time()
    while time.perf_counter() - w < seconds:
        next(it); n += 1
    w, c = time.perf_counter() - w, time.process_time() - c
    stop.set(); th.join()
    return c / n * 1e3
P = lambda: disk_tier.open_tier(tier).repeat().map(ex.normalize, 3).batch(32).prefetch(6)
B = lambda: disk_tier.open_tier(tier).repeat().batch(32).prefetch(6)
res = {}
for r in range(int(sys.argv[1])):
    real = run(P) - run(B)
    res.setdefault("real", []).append(real)
    for n in (32, 256, 1024):
        cal.SAMPLE_ELEMENTS = n
        evict_from_page_cache(files)
        t = plumbkit.trace(P, seconds=2)
        o = next(o for o in t.ops if "normalize" in o.label)
        v = o.cpu_per_element * o.visit_ratio * 1e3
        res.setdefault(n, []).append(v)
    print(r, {k: round(v[-1], 2) for k, v in res.items()}, flush=True)
print({k: round(statistics.median(v), 2) for k, v in res.items()})
