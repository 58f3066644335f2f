"""A/B: the random-flip pipeline's costs as the final prediction sees them (trace + parallel calibration)."""
import sys, os, tempfile
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
sys.path.insert(0, sys.argv[1])
import plumbkit.engine
from plumbkit.bench import pipelines
from plumbkit.engine.tracing import trace as measure
from plumbkit.engine.calibration import with_parallel_costs
from plumbkit.planning.predict import evidence_from_trace
print(plumbkit.engine.__file__)
make = pipelines.image_random(tempfile.mkdtemp())
ds = make()
t = measure(ds, seconds=5, calibrate=True)
ev0 = evidence_from_trace(t)
names = {o.name for o in t.ops if o.label.startswith(("map(random_flip", "map(normalize"))}
t2 = with_parallel_costs(ds, t, {n: t.cores for n in names})  # one call per core, as it ran then
ev = evidence_from_trace(t2)
for o in t2.ops:
    if o.name in names:
        print(o.label, "cost", round(1e3*ev0.cost.get(o.name, 0), 3), "ms/batch; parallel", round(1e3*ev.parallel_cost.get(o.name, 0), 3),
              "cpu/el", o.cpu_per_element, "par/el", o.parallel_cpu_per_element)
