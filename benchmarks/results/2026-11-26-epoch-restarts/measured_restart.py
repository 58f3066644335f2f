import sys; sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
from plumbkit.bench import pipelines as P
from plumbkit.engine.measuring import measure
from plumbkit.engine.restarts import restart_scope
ds = P.expert_tuned("/tmp/busy-cores-data")()
t = measure(ds, seconds=2.0, calibrate=False)
from plumbkit.engine.restarts import measure_restarts
print(t.pipeline.root, t.throughput, measure_restarts(ds, t))
for o in t.ops: print(o.name, o.kind, o.cardinality, o.visit_ratio, o.injected)
