"""A light parallel map calibrated alone against what it costs inside a small pipeline (with and
without it, three interleaved rounds of five 0.5 s windows): a lead for the next change (NOTE.md).

    python benchmarks/results/2026-11-27-fused-scale/light_maps_alone.py
"""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/
import tensorflow as tf
from plumbkit.tfdata import calibrate as cal
from plumbkit.tfdata.graph import pipeline_of
from plumbkit.bench import examples
from speech_costs import cpu_per_minibatch
A = tf.data.AUTOTUNE
def img(i):
    return tf.cast(tf.fill([96, 96, 3], tf.cast(i % 255, tf.int32)), tf.uint8), i
def ident(x, y):
    return x, y + 1
def build(op, calls):
    ds = tf.data.Dataset.range(10**9).map(img, num_parallel_calls=A).take(2048).cache().repeat()
    if op is not None:
        ds = ds.map(op, num_parallel_calls=calls)
    return ds.batch(32).prefetch(A)
for name, op in [("identity", ident), ("flip", examples.random_flip)]:
    for calls in (2,):
        ds = build(op, calls)
        p = pipeline_of(ds)
        node = [o.name for o in p if o.label.startswith(f"map({op.__name__}")][0]
        alone = [cal.calibrate(ds, p, names={node}).costs[node].cpu_per_element for _ in range(3)]
        with_, without = [], []
        for r in range(3):
            with_ += [c for c, _ in cpu_per_minibatch(build(op, calls), 300)]
            without += [c for c, _ in cpu_per_minibatch(build(None, calls), 300)]
        inpipe = (statistics.median(with_) - statistics.median(without)) / 32
        print(f"{name} calls={calls}: calibrated alone {[round(a*1e6,1) for a in alone]} us/elt; in pipeline {inpipe*1e6:.1f} us/elt", flush=True)
