import sys, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import tensorflow as tf
from plumbkit.tfdata.run import Runner
from plumbkit.host.machine import read_machine, neighbour_cores
def rate(ds, batch):
    r = Runner(ds); r.consume(20, limit=30); r.window(0.3)
    a = read_machine(); n0 = r.batches
    x = r.window(1.5); b = read_machine()
    busy = (b.own - a.own) / (b.wall - a.wall)
    r.close()
    return x * batch, busy
img = tf.zeros((96, 96, 3), tf.uint8)
for k in (2, 3, 8):
    for name, make in (("plus1", lambda k: tf.data.Dataset.range(10**9).map(lambda i: i + 1, num_parallel_calls=k)),
                       ("cached img+shuffle+flip", lambda k: tf.data.Dataset.from_tensors(img).repeat(4096).cache().repeat().shuffle(1024).map(tf.image.random_flip_left_right, num_parallel_calls=k))):
        el, busy = rate(make(k).batch(32).prefetch(2), 32)
        print(f"{name} k={k}: {el:,.0f} elements/s, busy {busy:.2f}", flush=True)
