"""Issue 25 lead: does a parallel form's calibrated CPU per element move when a neighbour (another
process) keeps a core busy, and toward what the plan spends? Neighbour: a process busy `share` of a core."""
import statistics, sys, time, tempfile, subprocess
import tensorflow as tf
from plumbkit.engine import optimize
from plumbkit.engine.calibration import with_parallel_costs
from plumbkit.planning.predict import evidence_from_trace, predict, layout_with
from plumbkit.tfdata.rebuild import apply_changes
from plumbkit.bench import pipelines as bp

BURN = "import time\nwhile True:\n    t=time.perf_counter()\n    while time.perf_counter()-t<0.004: pass\n    time.sleep(0.004*(1-{s})/{s})\n"
data = tempfile.mkdtemp(prefix="neigh-")
rows = {"crop": bp.image_random(data), "detection": bp.detection(data)}
share = float(sys.argv[1]) if len(sys.argv) > 1 else 0.7

def cpu_per_minibatch(ds, seconds=2.0, warm=50):
    it = iter(ds)
    for _ in range(warm): next(it)
    c, w, n = time.process_time(), time.perf_counter(), 0
    while time.perf_counter() - w < seconds:
        next(it); n += 1
    return (time.process_time() - c) / n

for name, make in rows.items():
    plan = optimize(make, compare=False)
    par = {c.node: int(c.value) for c in plan.proposed_changes if c.what == "parallelism" and int(c.value) != 1}
    print(f"== {name}: parallelized {par}", flush=True)
    res = {"alone": [], "neighbour": []}
    for k in range(6):
        which = "alone" if k % 2 == 0 else "neighbour"
        proc = subprocess.Popen([sys.executable, "-c", BURN.format(s=share)]) if which == "neighbour" else None
        time.sleep(0.2)
        try:
            t = with_parallel_costs(make(), plan.trace, par)
        finally:
            if proc: proc.kill(); proc.wait()
        fig = [o.parallel_cpu_per_element for o in t.analysis.ops if o.name in par and o.parallel_cpu_per_element][0]
        ev = evidence_from_trace(t, cores=plan.trace.cores, runtime=getattr(plan, "runtime", None))
        p = predict(ev, layout_with(ev, plan.proposed_changes))
        res[which].append((fig, p.cpu_per_batch))
        print(f"  {which}: par {fig*1e6:.0f} us; plan cpu/minibatch {p.cpu_per_batch*1e3:.2f} ms", flush=True)
    meas = [cpu_per_minibatch(apply_changes(make(), plan.proposed_changes)) for _ in range(4)]
    print(f"  measured plan cpu/minibatch " + ", ".join(f"{m*1e3:.2f}" for m in meas), flush=True)
    for w, v in res.items():
        print(f"  {w}: par median {statistics.median(a for a,_ in v)*1e6:.0f} us, plan cpu median {statistics.median(b for _,b in v)*1e3:.2f} ms; measured median {statistics.median(meas)*1e3:.2f}", flush=True)
