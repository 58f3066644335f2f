import time
from pathlib import Path
import tensorflow as tf
from plumbkit.bench import examples as ex
from plumbkit.tfdata import disk_tier
tier = Path("/tmp/w/tier")
def run(make, seconds=1.5):
    it = iter(make())
    for _ in range(30): next(it)
    n = 0; w, c = time.perf_counter(), time.process_time()
    while time.perf_counter() - w < seconds:
        next(it); n += 1
    w, c = time.perf_counter() - w, time.process_time() - c
    return n / w, c / n * 1e3
def form(k, norm, calls=3):
    def make():
        ds = disk_tier.open_tier(tier).take(k).cache().repeat()
        if norm: ds = ds.map(ex.normalize, calls)
        return ds.batch(32)
    return make
import statistics
res = {}
for r in range(4):
    for k in (32, 2048):
        for norm in (False, True):
            rate, cpu = run(form(k, norm)); res.setdefault((k, norm), []).append(cpu)
for k in (32, 2048):
    base, withn = statistics.median(res[(k, False)]), statistics.median(res[(k, True)])
    print(f"sample {k}: batch alone {base:.2f} ms, with normalize {withn:.2f} -> normalize {withn-base:.2f} ms/minibatch  {[round(x,2) for x in res[(k,True)]]}")
