"""A/B, in one process, alternating: a one-call operator's parallel form measured over its sample
less the read alone (new, 73effba) or as a difference to a second build of its plain form (old);
the plan predicted with each, then measured (NOTE.md; ab_parallel_crop.log).

    python benchmarks/results/2026-11-27-thread-time/ab_parallel.py crop 4
"""
import sys, tempfile, statistics
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))  # benchmarks/
import plumbkit
from plumbkit.bench import pipelines as P
from plumbkit.engine.compare import QUICK
from plumbkit.planning.predict import evidence_from_trace
from plumbkit.tfdata import calibrate as cal
from plumbkit.tfdata.rebuild import apply_changes
from speech_costs import cpu_per_minibatch
new_parallel = cal._parallel
def old_parallel(graph_def, top, repeat, options, ratio, cost, calls):
    if cost.cpu_per_element is None:
        return cost
    plain = cal._Driver(cal._built(graph_def, top, options), cal.PULLED_PER_STEP, latency=False)
    plain.run(cal.WARM_ELEMENTS); plain.run(cal.WARM_ELEMENTS)
    return cal._with_calls(graph_def, top, top, options, plain, cost, calls,
                           max(1, cost.elements // cal.PULLED_PER_STEP), elements_per_output=1.0)
d = tempfile.mkdtemp()
make = {"crop": lambda: P.shuffled_training(d), "flip": lambda: P.image_random(d), "detection": lambda: P.detection(d)}[sys.argv[1]]()
for i in range(int(sys.argv[2])):
    for name, fn in (("new", new_parallel), ("old", old_parallel)) if i % 2 == 0 else (("old", old_parallel), ("new", new_parallel)):
        cal._parallel = fn
        plan = plumbkit.optimize(make, seconds=5, compare=False, protocol=QUICK)
        ev = evidence_from_trace(plan.trace, runtime=plan.runtime)
        labels = {op.name: op.label for op in plan.trace.pipeline}
        p = plan.prediction
        par = " ".join(f"{labels[n].split('(')[1][:10]}={ev.cost[n]*1e3:.3f}->{v*1e3:.3f}" for n, v in ev.parallel_cost.items())
        runs = cpu_per_minibatch(apply_changes(make(), plan.proposed_changes), 300, windows=4)
        c = statistics.median(x for x, _ in runs); r = statistics.median(x for _, x in runs)
        print(f"{i} {name}: pred {p.throughput:.0f} cpu {p.cpu_per_batch*1e3:.3f}; measured {r:.0f} cpu {c*1e3:.3f} (cpu err {p.cpu_per_batch/c-1:+.2f}); traced yours {plan.trace.analysis.cpu_per_batch*1e3:.2f}; {par}", flush=True)
