"""What the expert-tuned pipeline's normalizing map (fused by tf.data with its batch) costs
inside its pipeline: the pipeline with the map left out, with one call, two, and AUTOTUNE, four
interleaved rounds of five 0.5 s windows each, process CPU per minibatch (NOTE.md).

    python benchmarks/results/2026-11-27-fused-scale/fused_in_pipeline.py
"""
import statistics
import sys
import tempfile
from pathlib import Path

import tensorflow as tf

from plumbkit.bench import examples
from plumbkit.bench import pipelines as P

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/
from speech_costs import cpu_per_minibatch  # noqa: E402

paths = P.image_records(tempfile.mkdtemp(), files=16, per_file=256)
AUTO = tf.data.AUTOTUNE


def build(unit_calls):
    ds = tf.data.Dataset.from_tensor_slices(paths)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=AUTO)
    ds = ds.map(examples.parse_example, num_parallel_calls=AUTO)
    ds = ds.map(P.decode_and_resize, num_parallel_calls=AUTO).cache()
    ds = ds.shuffle(1024).map(examples.random_flip, num_parallel_calls=3)
    if unit_calls == 1:
        ds = ds.map(P.to_unit_range)
    elif unit_calls != "none":
        ds = ds.map(P.to_unit_range, num_parallel_calls=unit_calls)
    return ds.batch(32).prefetch(AUTO)


readings = {}
for _ in range(4):
    for calls in ["none", 1, 2, AUTO]:
        runs = cpu_per_minibatch(build(calls), 300)
        readings.setdefault(calls, []).extend(c for c, _ in runs)
        print(calls, " ".join(f"{c * 1e3:.3f}" for c, _ in runs), " rate", " ".join(f"{x:.0f}" for _, x in runs),
              flush=True)
for calls, cpu in readings.items():
    print("median", calls, f"{statistics.median(cpu) * 1e3:.3f} ms per minibatch")
