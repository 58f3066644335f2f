"""The same pipeline (the bench's shuffled + random crop), run for 150 s in 1 s windows: its
minibatches/s and process CPU per minibatch, to see how far the machine alone moves a figure
the prediction is made from (machine_drift.log; NOTE.md, "The machine moves").

    python benchmarks/results/2026-11-27-fused-scale/machine_drift.py
"""
import tempfile
import time

from plumbkit.bench import pipelines as P
from plumbkit.tfdata.run import Runner

runner = Runner(P.shuffled_training(tempfile.mkdtemp())())
runner.consume(100, limit=60)
t0 = time.perf_counter()
for _ in range(150):
    c0, n0 = time.process_time(), runner.batches
    rate = runner.window(1.0)
    print(f"{time.perf_counter() - t0:6.1f} rate {rate:6.1f} cpu/mb "
          f"{(time.process_time() - c0) / (runner.batches - n0) * 1e3:.3f}", flush=True)
runner.close()
