"""The toy of the browser test: yours predicted as traced vs measured, fused (default options) or not.

Run from a scratch folder: python intra_op.py fused|seq N  (N traces, each then measured).
"""
import sys, statistics, tensorflow as tf, plumbkit
from plumbkit.planning.predict import evidence_from_trace, layout_as_traced, predict
from plumbkit.tfdata.run import Runner
from plumbkit.tfdata.options import sequential_options
def busy(x):
    return tf.reduce_sum(tf.linalg.matmul(tf.fill([48, 48], tf.cast(x, tf.float32)), tf.ones([48, 48])))
form = sys.argv[1]
def make():
    ds = tf.data.Dataset.range(4000).map(busy).batch(16)
    return ds.with_options(sequential_options()) if form == "seq" else ds
for i in range(int(sys.argv[2])):
    t = plumbkit.trace(make(), seconds=3, calibrate=True)
    ev = evidence_from_trace(t)
    lay = layout_as_traced(ev)
    pr = predict(ev, lay)
    r = Runner(make()); r.consume(50, limit=5); m = statistics.median(r.window(0.5) for _ in range(3)); r.close()
    mp = {k: v for k, v in ev.cost.items() if k.startswith("Map")}
    print(f"{form}: traced {t.analysis.throughput:.0f} predicted {pr.throughput:.0f} ({pr.binding}) measured {m:.0f} "
          f"err {pr.throughput/m-1:+.0%}; cpu {[round(v*1e6) for v in mp.values()]} thread {[round(v*1e6) for k,v in ev.thread_cost.items() if k.startswith('Map')]}", flush=True)
