import tempfile
import plumbkit
from plumbkit.bench import public_pipelines as PP
from plumbkit.engine.compare import QUICK
from plumbkit.planning.predict import evidence_from_trace, predict, layout_with, layout_as_traced
make = PP.tpu_resnet(tempfile.mkdtemp())
plan = plumbkit.optimize(make, seconds=5, compare=False, protocol=QUICK)
ev = evidence_from_trace(plan.trace, runtime=plan.runtime)
print("threads as written", layout_as_traced(ev).threads)
ch = plan.proposed_changes
full = predict(ev, layout_with(ev, ch))
print("full", full.throughput, full.binding)
for c in ch:
    rest = [k for k in ch if k is not c]
    w = predict(ev, layout_with(ev, rest))
    print(f"  without {str(c)[:60]:60s} {w.throughput:.1f} ({w.binding})")
for n in plan.notes: print(" note", n[:200])
