"""How much does a plan's parallel-form calibration move from one call to the next, and against
the plan's own CPU per minibatch measured over fresh builds? (issue 25 lead)"""
import statistics, sys, time, tempfile
import tensorflow as tf
from plumbkit.engine import optimize
from plumbkit.engine.calibration import with_parallel_costs
from plumbkit.planning.predict import evidence_from_trace, predict, layout_with
from plumbkit.tfdata.rebuild import apply_changes
from plumbkit.bench import pipelines as bp

data = tempfile.mkdtemp(prefix="parcal-")
rows = {"crop": bp.image_random(data), "detection": bp.detection(data)}
which = sys.argv[1:] or list(rows)

def cpu_per_minibatch(ds, seconds=2.0, warm=50):
    it = iter(ds)
    for _ in range(warm): next(it)
    c, w, n = time.process_time(), time.perf_counter(), 0
    while time.perf_counter() - w < seconds:
        next(it); n += 1
    return (time.process_time() - c) / n, n / (time.perf_counter() - w)

for name in which:
    make = rows[name]
    plan = optimize(make, compare=False)
    par = {c.node: int(c.value) for c in plan.proposed_changes if c.what == "parallelism" and int(c.value) != 1}
    print(f"== {name}: predicted {plan.prediction.throughput:.0f}/s, cpu/minibatch {plan.prediction.cpu_per_batch*1e3:.2f} ms; parallelized {par}", flush=True)
    preds = []
    for k in range(5):
        t = with_parallel_costs(make(), plan.trace, par)
        figs = {o.label: (o.parallel_cpu_per_element, o.cpu_per_element) for o in t.analysis.ops if o.name in par}
        ev = evidence_from_trace(t, cores=plan.trace.cores, runtime=plan.runtime if hasattr(plan, 'runtime') else None)
        p = predict(ev, layout_with(ev, plan.proposed_changes))
        preds.append(p.cpu_per_batch)
        print(f"  calibration {k}: " + ", ".join(f"{l}: par {a*1e6:.0f} us seq {b*1e6:.0f} us" for l, (a, b) in figs.items() if a) + f"; plan cpu/minibatch {p.cpu_per_batch*1e3:.2f} ms", flush=True)
    meas = [cpu_per_minibatch(apply_changes(make(), plan.proposed_changes)) for _ in range(5)]
    print(f"  measured plan, 5 fresh builds: cpu/minibatch " + ", ".join(f"{m[0]*1e3:.2f}" for m in meas) + " ms; rate " + ", ".join(f"{m[1]:.0f}" for m in meas), flush=True)
    print(f"  predicted cpu/minibatch median {statistics.median(preds)*1e3:.2f} (range {min(preds)*1e3:.2f}-{max(preds)*1e3:.2f}); measured median {statistics.median(m[0] for m in meas)*1e3:.2f}", flush=True)
