"""A light one-call map (identity, a random flip) calibrated six times over the image pipeline:
its one-call figure and its parallel form with three calls, in µs per element (NOTE.md).

    python benchmarks/results/2026-11-27-thread-time/calib_var.py ident,flip 6

TCS=<seconds> overrides the calibration runs' target CPU (TARGET_CPU_SECONDS), as tried there.
"""
import sys, tempfile, time
import tensorflow as tf
from plumbkit.bench import pipelines as P, examples as E
from plumbkit.tfdata import calibrate as cal
from plumbkit.tfdata.graph import pipeline_of
d = tempfile.mkdtemp()
paths = P.image_records(d, files=8, per_file=128)
def rev(x, y): return tf.reverse(x, [1]), y
def ident(x, y): return x, y + 1
import os
cal.TARGET_CPU_SECONDS = float(os.environ.get("TCS", cal.TARGET_CPU_SECONDS))
fns = {"rev": rev, "ident": ident, "flip": E.random_flip}
for name in sys.argv[1].split(","):
    fn = fns[name]
    ds = tf.data.Dataset.from_tensor_slices(paths).interleave(tf.data.TFRecordDataset, cycle_length=1)
    ds = ds.map(E.parse_example).map(E.decode_image).map(E.resize_image).map(fn).map(E.normalize).batch(32).repeat()
    p = pipeline_of(ds)
    node = [o.name for o in p if o.label.startswith(f"map({fn.__name__}")][0]
    out = []; t0 = time.perf_counter()
    for i in range(int(sys.argv[2])):
        c = cal.calibrate(ds, p, names={node}, parallel_calls={node: 3}).costs[node]
        out.append(f"{c.cpu_per_element*1e6:.0f}/{(c.parallel_cpu_per_element or 0)*1e6:.0f}")
    print(name, " ".join(out), f"{(time.perf_counter()-t0)/len(out):.2f}s each", flush=True)
