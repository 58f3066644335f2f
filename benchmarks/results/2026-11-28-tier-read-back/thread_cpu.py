import time
import tensorflow as tf
from pathlib import Path
from plumbkit.tfdata import disk_tier
from plumbkit.tfdata.disk import evict_from_page_cache
path = Path("/tmp/exp/tier")
files = sorted(str(p) for p in path.rglob("*") if p.is_file())
for rep in range(3):
    for batch in (9, 1):
        evict_from_page_cache(files)
        n = int(256e6 / 27648)
        r = disk_tier.open_tier(path).take(n)
        if batch > 1: r = r.batch(batch)
        it = iter(r); next(it)
        w0, c0, t0 = time.perf_counter(), time.process_time(), time.thread_time()
        k = 0
        for b in it: k += batch
        w, c, t = time.perf_counter() - w0, time.process_time() - c0, time.thread_time() - t0
        print(f"batch {batch}: {k} elements, {k/w:.0f}/s, process {c/k*1e6:.1f} us/el, this thread {t/k*1e6:.1f} us/el", flush=True)
