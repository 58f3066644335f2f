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
