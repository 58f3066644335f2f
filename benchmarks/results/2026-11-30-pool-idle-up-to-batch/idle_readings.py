"""Idle per element of a plan's pool: the probe, the pool's segment over a sample, and the plan itself."""
import statistics, sys, tempfile
import tensorflow as tf
from plumbkit.bench import pipelines as P, examples as E
from plumbkit.tfdata.runtime_costs import idle_per_element, IDLE_PROBE_BATCH
from plumbkit.tfdata import runtime_costs as rc
d = tempfile.mkdtemp()
paths = P.image_records(d, files=8, per_file=128)
def head():
    return tf.data.Dataset.from_tensor_slices(paths).interleave(tf.data.TFRecordDataset, cycle_length=1).map(E.parse_example).map(E.decode_image)
def flip_plan():
    ds = head().map(E.resize_image).cache()
    ds = ds.map(E.random_flip, num_parallel_calls=3).map(E.normalize).batch(32).repeat().prefetch(6)
    return ds
def flip_segment():
    ds = head().map(E.resize_image).take(512).cache().repeat()
    return ds.map(E.random_flip, num_parallel_calls=3).map(E.normalize).batch(32).prefetch(2)
def flip_fused_only():
    ds = head().map(E.resize_image).take(512).cache().repeat()
    return ds.map(E.random_flip, num_parallel_calls=3).batch(32).prefetch(2)
def det_plan():
    ds = head().cache().map(P.box_crop, num_parallel_calls=3).filter(P.has_boxes)
    return ds.padded_batch(16, padded_shapes=([96, 96, 3], [None, 4], [])).repeat().prefetch(6)
def det_segment():
    ds = head().take(512).cache().repeat().map(P.box_crop, num_parallel_calls=3).filter(P.has_boxes)
    return ds.padded_batch(16, padded_shapes=([96, 96, 3], [None, 4], [])).prefetch(2)
def det_plain_batch():
    ds = head().take(512).cache().repeat().map(P.box_crop, num_parallel_calls=3)
    return ds.batch(16).prefetch(2)
cases = {"probe": (lambda: rc.idle_probe(2), IDLE_PROBE_BATCH),
         "flip plan": (flip_plan, 32), "flip segment": (flip_segment, 32), "flip fused": (flip_fused_only, 32),
         "det plan": (det_plan, 24), "det segment": (det_segment, 24), "det plain batch": (det_plain_batch, 16)}
for k, (f, b) in cases.items():  # fill caches
    for _ in f().take(60): pass
res = {k: [] for k in cases}
for r in range(5):
    for k, (f, b) in (cases.items() if r % 2 == 0 else reversed(list(cases.items()))):
        res[k].append(idle_per_element(f(), 2, b) * 1e6)
for k, v in res.items():
    print(f"{k:18s} median {statistics.median(v):6.1f} us/element  runs {[round(x,1) for x in v]}")
