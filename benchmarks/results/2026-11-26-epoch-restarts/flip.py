import sys, time, statistics
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import tensorflow as tf
from plumbkit.bench import pipelines as P, examples
from plumbkit.tfdata.runtime_costs import epoch_restart
paths = P.image_records("/tmp/busy-cores-data", files=8, per_file=128)

def plan(kf=3, kn=2, inner=True):
    ds = tf.data.Dataset.from_tensor_slices(paths)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=1)
    ds = ds.map(examples.parse_example).map(examples.decode_image).map(examples.resize_image).cache()
    if not inner: ds = ds.repeat()
    ds = ds.map(examples.random_flip, num_parallel_calls=kf).map(examples.normalize, num_parallel_calls=kn).batch(32)
    return ds

def rate(ds, seconds=3.0):
    it = iter(ds)
    for _ in range(100): next(it)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        next(it); n += 1
    return n / (time.perf_counter() - t0)

for rep in range(2):
    print("restart T (plan, inner epoch 32):", [round(1e3 * epoch_restart(plan(), 32, epochs=12), 2) for _ in range(3)], "ms", flush=True)
    print("user pipeline T:", [round(1e3 * (epoch_restart(P.image_random("/tmp/busy-cores-data")().take(32), 32, epochs=6) or -1), 2) for _ in range(2)], flush=True)
    r_in = rate(plan().repeat().prefetch(6)); r_out = rate(plan(inner=False).prefetch(6))
    print(f"plan with restarts every 32: {r_in:.0f}/s; repeat above the cache (no restart): {r_out:.0f}/s; implied T {1e3*(32/r_in-32/r_out):.1f} ms", flush=True)
