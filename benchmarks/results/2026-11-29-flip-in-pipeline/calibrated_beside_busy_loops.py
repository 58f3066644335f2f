# Needs the change that was not kept (NOTE.md): `git apply calibrate_beside_busy_loops.diff` at
# fe28514 (plumbkit/host/load.py, and calibrate()'s operator loop run inside
# `other_cores_busy(available_cores())` while CALIBRATE_BESIDE_BUSY_CORES is true), then
# `git checkout plumbkit && rm plumbkit/host/load.py` after.
# ``maps``: flip + normalize over 256 cached images, three traces each way; ``image``: the bench's
# random-flip pipeline, two each way.
import sys, tempfile
import numpy as np, tensorflow as tf
import plumbkit
import plumbkit.tfdata.calibrate as cal
from plumbkit.bench import examples as ex, pipelines as bp

rng = np.random.default_rng(0)
imgs = rng.integers(0, 255, size=(256, 96, 96, 3), dtype=np.uint8)


def maps():
    ds = tf.data.Dataset.from_tensor_slices((imgs, np.zeros(256, np.int64))).repeat()
    return ds.map(ex.random_flip).map(ex.normalize).batch(32)


which = sys.argv[1] if len(sys.argv) > 1 else "maps"
make, traces, seconds = (maps, 3, 2) if which == "maps" else (bp.image_random(tempfile.mkdtemp()), 2, 3)
for r in range(traces):
    for flag in (False, True):
        cal.CALIBRATE_BESIDE_BUSY_CORES = flag
        t = plumbkit.trace(make, seconds=seconds)
        print("busy" if flag else "idle", {o.label: round((o.cpu_per_element or 0) * 1e6, 1) for o in t.analysis.ops if o.cpu_per_element},
              "attributed/process %.2f" % (t.analysis.attributed_cpu_seconds / t.analysis.cpu_seconds), flush=True)
