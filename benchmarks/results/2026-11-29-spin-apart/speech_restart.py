"""Speech's plan: where its restart charge comes from (session 53 diagnosis)."""
import plumbkit
from plumbkit.bench import pipelines as bp
from plumbkit.engine import optimization as opt
from plumbkit.planning import predict as pr
seen = []
orig = opt.evidence_from_trace
def capture(*a, **k):
    ev = orig(*a, **k); seen.append(ev); return ev
opt.evidence_from_trace = capture
plan = plumbkit.optimize(bp.speech(), compare=False)
ev = seen[-1]
r = ev.runtime.restarts
print("restarts:", r, "restart_as_traced:", ev.restart_as_traced)
print("prediction:", plan.prediction.throughput, plan.prediction.binding)
p = ev.pipeline
scope = {r.below} | {o.name for o in p.descendants(r.below)}
for n in scope:
    print(f"  {p[n].label:24s} cost {ev.cost.get(n, 0)*1e3:.3f} ms  parallel {ev.parallel_cost.get(n, 0)*1e3:.3f}")
print("yours: the measured epoch", r.epoch, "s; the model's steady epoch", r.epoch - ev.restart_as_traced, "s")
print("changes:", plan.changes)
