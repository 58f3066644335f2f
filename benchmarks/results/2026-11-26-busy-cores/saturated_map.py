import sys, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import tensorflow as tf
from plumbkit.tfdata.run import Runner
from plumbkit.host.machine import read_machine, neighbour_cores

def work(n):
    x = tf.random.stateless_uniform((n, n), seed=(1, 2))
    def f(i):
        return tf.reduce_sum(tf.linalg.matmul(x, x) + tf.cast(i, tf.float32))
    return f

def probe(n, k, batch=32, seconds=2.0):
    opts = tf.data.Options(); opts.threading.max_intra_op_parallelism = 1
    ds = tf.data.Dataset.range(10**9).map(work(n), num_parallel_calls=k).batch(batch).prefetch(2).with_options(opts)
    r = Runner(ds); r.consume(20, limit=30); r.window(0.3)
    a = read_machine(); n0 = r.batches
    x = r.window(seconds)
    b = read_machine()
    busy = (b.own - a.own) / (b.wall - a.wall); nb = neighbour_cores(a, b)
    r.close()
    return x, busy, nb, (b.own - a.own) / (r.batches - n0) / batch

for n in (48, 64, 96, 128):
    for k in (2, 3):
        x, busy, nb, w = probe(n, k)
        print(f"n={n} k={k}: {x*32:.0f} el/s, cpu/el {w*1e6:.0f} us, busy {busy:.2f}, neighbours {nb:.2f}, busy of free {busy/max(0.1, 2-nb):.2f}", flush=True)
