# Ran at fe28514 with busy_loops.py as plumbkit/host/load.py and the operator loop of
# plumbkit.tfdata.calibrate.calibrate() run inside `other_cores_busy(available_cores())` when the module
# switch CALIBRATE_BESIDE_BUSY_CORES is true (the change was not kept: NOTE.md).
import tempfile
import plumbkit
import plumbkit.tfdata.calibrate as cal
from plumbkit.bench import pipelines as bp
make = bp.image_random(tempfile.mkdtemp())
for r in range(2):
    for flag in (False, True):
        cal.CALIBRATE_BESIDE_BUSY_CORES = flag
        t = plumbkit.trace(make, seconds=3)
        print("busy" if flag else "idle", {o.label: round((o.cpu_per_element or 0) * 1e6, 1) for o in t.analysis.ops if o.cpu_per_element},
              "attributed/process %.2f" % (t.analysis.attributed_cpu_seconds / t.analysis.cpu_seconds), flush=True)
