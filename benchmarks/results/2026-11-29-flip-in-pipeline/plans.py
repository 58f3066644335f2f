"""Random flip / detection (``python plans.py flip|detection N``): N plans with the bench's
protocol, one JSON line each: the plan's CPU per minibatch predicted (``pred``) and measured
(``meas``), yours at the trace and in the comparison, the in-pipeline scale, throughput predicted
and measured, and per operator [CPU per minibatch as the plan charges it (ms, scaled), one-call
CPU per element calibrated alone (µs), its parallel form's (µs, 0: not measured), visit ratio]."""
import sys, json, tempfile
import plumbkit
from plumbkit.bench import pipelines as bp
from plumbkit.engine.compare import FULL
from plumbkit.analysis.operational import cpu_per_minibatch, in_pipeline_scale
which = sys.argv[1]; n = int(sys.argv[2])
d = tempfile.mkdtemp()
make = bp.image_random(d) if which == "flip" else bp.detection(d)
for i in range(n):
    plan = plumbkit.optimize(make, compare=True, protocol=FULL)
    a = plan.trace.analysis
    res = plan.comparison.results
    row = {"pred": plan.prediction.cpu_per_batch, "meas": res["plumbkit"].cpu_per_batch_median,
           "yours_trace": a.cpu_per_batch, "yours_meas": res["yours"].cpu_per_batch_median,
           "scale": in_pipeline_scale(a), "thr_pred": plan.prediction.throughput, "thr_meas": res["plumbkit"].median,
           "ops": {o.label: [round((cpu_per_minibatch(a, o) or 0)*1e3, 3), round((o.cpu_per_element or 0)*1e6, 1),
                             round((o.parallel_cpu_per_element or 0)*1e6, 1), o.visit_ratio] for o in a.ops}}
    print(json.dumps(row), flush=True)
