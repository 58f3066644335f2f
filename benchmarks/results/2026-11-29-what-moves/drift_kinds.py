"""Which work flips with tf.data's speed on this VM? One process, 0.4 s slices of each kind in turn."""
import time, statistics, json, sys
import numpy as np, tensorflow as tf
from plumbkit.bench.examples import planted_work
from plumbkit.tfdata.options import sequential_options
SLICE = 0.4
def steal():
    f = open("/proc/stat").readline().split()
    return int(f[8])
a = np.random.rand(48, 48).astype(np.float32) / 48
big = np.random.rand(16 * 2**20 // 8); big2 = np.empty_like(big)
x48 = tf.constant(a)
@tf.function
def chain(m):
    for _ in range(20):
        m = tf.matmul(m, m)
    return tf.reduce_sum(m)
ds = tf.data.Dataset.range(10**9).map(lambda x: planted_work(x, 20)).batch(16).with_options(sequential_options())
it = iter(ds)
def k_python():
    s = 0
    for i in range(20000): s += i * i
def k_numpy48():
    m = a
    for _ in range(20): m = m @ m
def k_numpy_stream():
    np.copyto(big2, big)
def k_tf_eager():
    m = x48
    for _ in range(20): m = tf.matmul(m, m)
def k_tf_function():
    chain(x48)
def k_tfdata():
    next(it)
kinds = {k: f for k, f in globals().items() if k.startswith("k_")}
for f in kinds.values(): f()
out = {k: [] for k in kinds}; steals = []
end = time.time() + float(sys.argv[1])
while time.time() < end:
    s0 = steal()
    for k, f in kinds.items():
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < SLICE:
            f(); n += 1
        out[k].append(n / (time.perf_counter() - t0))
    steals.append(steal() - s0)
json.dump({"rates": out, "steal": steals}, open("/tmp/w/drift/drift_kinds.json", "w"))
ref = [r / statistics.median(out["k_tfdata"]) for r in out["k_tfdata"]]
print("rounds", len(ref), "steal ticks total", sum(steals))
for k, v in out.items():
    med = statistics.median(v); norm = [r / med for r in v]
    c = np.corrcoef(norm, ref)[0, 1]
    lo, hi = np.percentile(norm, [5, 95])
    print(f"{k:16s} median {med:10.1f}/s  p5-p95 {lo:.2f}-{hi:.2f}  min {min(norm):.2f}  corr with tf.data {c:+.2f}")
