"""Per-minibatch timestamps over repeated epochs: where does the epoch time go?"""
import sys, time, statistics, os
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import tensorflow as tf
from plumbkit.bench import pipelines as P, examples

data = "/tmp/busy-cores-data"
paths = P.image_records(data, files=16, per_file=256)
auto = tf.data.AUTOTUNE

def expert(k=2, inside=False, shuffle=1024, pf=auto):
    ds = tf.data.Dataset.from_tensor_slices(paths)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=2)
    ds = ds.map(examples.parse_example, num_parallel_calls=2)
    ds = ds.map(P.decode_and_resize, num_parallel_calls=2).cache()
    ds = ds.repeat() if inside else ds
    ds = ds.shuffle(shuffle) if shuffle else ds
    ds = ds.map(examples.random_flip, num_parallel_calls=k)
    ds = ds.map(P.to_unit_range, num_parallel_calls=k)
    return ds.batch(32).prefetch(pf)

def run(ds, epochs=12, n=128, label=""):
    ds = ds.repeat()
    it = iter(ds)
    for _ in range(n * 2):  # fill the cache, warm
        next(it)
    ts = []
    c0 = time.process_time()
    for _ in range(n * epochs):
        next(it); ts.append(time.perf_counter())
    busy = (time.process_time() - c0) / (ts[-1] - ts[0])
    total = (ts[-1] - ts[0]) / (len(ts) - 1)
    iv = [b - a for a, b in zip(ts, ts[1:])]
    # boundary i: interval from batch e*n-1 to e*n (first of a new epoch), e>=1 (index e*n-1 in iv)
    bnd = [iv[e * n - 1] for e in range(1, epochs)]
    mids = []
    for e in range(epochs):
        a, b = e * n + n // 5, e * n + 4 * n // 5
        mids.append((ts[b] - ts[a]) / (b - a))
    mid = statistics.median(mids)
    first = [sum(iv[e * n - 1:e * n + 4]) for e in range(1, epochs)]
    epoch = [(ts[min(len(ts)-1,(e + 1) * n)] - ts[e * n]) for e in range(epochs - 1)]
    print(f"{label}: overall {1/total:.0f}/s, mid-epoch {1/mid:.0f}/s, busy {busy:.2f}; epoch {statistics.median(epoch)*1e3:.0f} ms "
          f"vs n/mid {n*mid*1e3:.0f} ms -> excess {1e3*(statistics.median(epoch)-n*mid):.1f} ms; boundary gap median {1e3*statistics.median(bnd):.1f} ms "
          f"(mid interval {mid*1e3:.2f} ms); first 5 after boundary {1e3*statistics.median(first):.1f} ms", flush=True)

for spec in sys.argv[1:]:
    k, inside, sh = (int(v) for v in spec.split(","))
    run(expert(k, bool(inside), sh), n=4096 // 32 if not inside else 128, label=f"k={k} inside={inside} shuffle={sh}")
