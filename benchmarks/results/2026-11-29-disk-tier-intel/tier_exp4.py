import time, threading
from pathlib import Path
import tensorflow as tf
from plumbkit.bench import examples as ex
from plumbkit.tfdata import disk_tier
from plumbkit.tfdata.disk import evict_from_page_cache
from plumbkit.tfdata.disk_probe import read_back
from plumbkit.model.disk_measurement import DiskMeasurement
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
    n = 0; w, c, t = time.perf_counter(), time.process_time(), time.thread_time()
    while time.perf_counter() - w < seconds:
        next(it); n += 1
    w, c, t = time.perf_counter() - w, time.process_time() - c, time.thread_time() - t
    stop.set()
    return n / w, c / n * 1e3, t / n * 1e3
forms = {
 "tier.batch": lambda: disk_tier.open_tier(tier).repeat().batch(32).prefetch(6),
 "tier.norm3.batch": lambda: disk_tier.open_tier(tier).repeat().map(ex.normalize, 3).batch(32).prefetch(6),
}
probed = DiskMeasurement(str(tier), 27648, 1e9, 1e9, 1e-5, 1e10, 0, 0)
for r in range(3):
    rb = read_back(tier, probed)
    print(f"read_back {rb.read_cpu_per_element*32e3:.2f} ms per 32 elements, thread {rb.read_thread_cpu_per_element*32e3:.2f}", flush=True)
    for k, f in forms.items():
        rate, cpu, th = run(f); print(f"{k:30s} {rate:7.0f}/s {cpu:.2f} ms/minibatch (main thread {th:.2f})", flush=True)
