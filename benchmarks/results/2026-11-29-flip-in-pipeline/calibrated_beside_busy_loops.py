# Ran at fe28514 with busy_loops.py as plumbkit/host/load.py and the operator loop of
# plumbkit.tfdata.calibrate.calibrate() run inside `other_cores_busy(available_cores())` when the module
# switch CALIBRATE_BESIDE_BUSY_CORES is true (the change was not kept: NOTE.md).
import numpy as np, tensorflow as tf, sys
import plumbkit
import plumbkit.tfdata.calibrate as cal
from plumbkit.bench import examples as ex
rng = np.random.default_rng(0)
imgs = rng.integers(0, 255, size=(256, 96, 96, 3), dtype=np.uint8)
def make():
    ds = tf.data.Dataset.from_tensor_slices((imgs, np.zeros(256, np.int64))).repeat()
    return ds.map(ex.random_flip).map(ex.normalize).batch(32)
for r in range(3):
    for flag in (False, True):
        cal.CALIBRATE_BESIDE_BUSY_CORES = flag
        t = plumbkit.trace(make, seconds=2)
        print("busy" if flag else "idle", {o.label: round((o.cpu_per_element or 0) * 1e6, 1) for o in t.analysis.ops if o.cpu_per_element},
              "scale-ish attributed/process %.2f" % (t.analysis.attributed_cpu_seconds / t.analysis.cpu_seconds), flush=True)
