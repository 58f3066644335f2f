"""Is a cheap map's CPU per element a property of its iterator (build), or of the moment?"""
import time, statistics, sys
import tensorflow as tf
img = tf.random.uniform([128, 128, 3], maxval=255, dtype=tf.int32)
img = tf.cast(img, tf.uint8)
def flip(x): return tf.image.random_flip_left_right(x)
base = tf.data.Dataset.from_tensors(img).repeat(256).cache().repeat()
its = [iter(base.map(flip)) for _ in range(4)]
for it in its:
    for _ in range(300): next(it)
res = {i: [] for i in range(len(its))}
N = 600
for r in range(8):
    for i, it in enumerate(its):
        c0 = time.process_time(); t0 = time.perf_counter()
        for _ in range(N): next(it)
        res[i].append((time.process_time() - c0) / N * 1e6)
for i in res:
    print(i, "median %.1f us" % statistics.median(res[i]), " ".join("%.0f" % v for v in res[i]))
