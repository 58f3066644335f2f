"""Read-back's CPU per element against what the plan's form of the tier read pays."""
import os, sys, time, shutil, statistics
from pathlib import Path
import tensorflow as tf
from plumbkit.bench import pipelines as bp, examples as ex
from plumbkit.tfdata import disk_tier
from plumbkit.tfdata.disk_probe import read_back
from plumbkit.tfdata.disk import evict_from_page_cache
from plumbkit.model.disk_measurement import DiskMeasurement

data = Path("/tmp/w/img"); data.mkdir(exist_ok=True)
paths = bp.image_records(str(data), files=24, per_file=512)
tier = Path("/tmp/w/tier")
if not (tier / "meta.json").exists() and not tier.exists():
    ds = tf.data.Dataset.from_tensor_slices(paths).interleave(tf.data.TFRecordDataset, cycle_length=1)
    ds = ds.map(ex.parse_example, 2).map(ex.decode_image, 2).map(ex.resize_image, 2)
    t0 = time.time(); n = disk_tier.write_tier(ds, tier); print("wrote", n, time.time() - t0, flush=True)
files = [str(p) for p in tier.rglob("*") if p.is_file()]
probed = DiskMeasurement(str(tier), 27648, 1e9, 1e9, 1e-5, 1e10, 0, 0)

def idle(s=0.5):
    c = time.process_time(); time.sleep(s); return (time.process_time() - c) / s

def plan_form(normalize=True, batch=32, prefetch=True, limit=None):
    ds = disk_tier.open_tier(tier)
    if limit: ds = ds.take(limit)
    if normalize: ds = ds.map(ex.normalize)
    ds = ds.batch(batch)
    if prefetch: ds = ds.prefetch(2)
    evict_from_page_cache(files)
    it = iter(ds); next(it)
    n = 0; w, c, t = time.perf_counter(), time.process_time(), time.thread_time()
    for b in it: n += int(b[0].shape[0])
    w, c, t = time.perf_counter() - w, time.process_time() - c, time.thread_time() - t
    return dict(n=n, cpu_us=c / n * 1e6, thread_us=t / n * 1e6, mb_s=n / w / batch, GBs=n * 27648 / w / 1e9)

wanted = int(256 * 2**20 // 27648)
for r in range(3):
    print("idle cpu share", round(idle(), 3))
    rb = read_back(tier, probed)
    print(f"read_back: cpu {rb.read_cpu_per_element*1e6:.1f} us thread {rb.read_thread_cpu_per_element*1e6:.1f} us {rb.read_bandwidth/1e9:.2f} GB/s", flush=True)
    print("same stretch plan form (norm, 32, prefetch)", plan_form(limit=wanted), flush=True)
    print("same stretch no norm b32 prefetch", plan_form(normalize=False, limit=wanted), flush=True)
    print("same stretch no norm b151 no prefetch", plan_form(normalize=False, batch=151, prefetch=False, limit=wanted), flush=True)
    print("whole tier plan form", plan_form(), flush=True)
