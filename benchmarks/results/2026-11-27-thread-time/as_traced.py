"""The prediction of a pipeline as traced, against the throughput the trace measured: the limits
and each operator's calibrated CPU and charge (NOTE.md: the skewed pipeline).

    python benchmarks/results/2026-11-27-thread-time/as_traced.py skewed 2
"""
import sys, tempfile
import plumbkit
from plumbkit.bench import pipelines as P
from plumbkit.engine.compare import QUICK
from plumbkit.engine.tracing import trace as measure
from plumbkit.planning.predict import evidence_from_trace, predict, layout_as_traced
from plumbkit.engine.optimization import _runtime_costs
from plumbkit.analysis.operational import in_pipeline_scale
d = tempfile.mkdtemp()
make = {"skewed": P.planted_skewed, "speech": P.speech, "flip": lambda: P.image_random(d)}[sys.argv[1]]()
for i in range(int(sys.argv[2])):
    ds = make()
    t = measure(ds, seconds=5, calibrate=True)
    rt = _runtime_costs(ds, t, QUICK, lambda *a: None)
    ev = evidence_from_trace(t, runtime=rt)
    p = predict(ev, layout_as_traced(ev))
    a = t.analysis
    print(f"traced {a.throughput:.0f}/s cpu {a.cpu_per_batch*1e3:.3f}; predicted {p.throughput:.0f} ({p.binding}) cpu {p.cpu_per_batch*1e3:.3f} idle {p.idle_per_batch*1e3:.3f}; scale {in_pipeline_scale(a):.3f}")
    for k, v in sorted(p.limits.items(), key=lambda kv: kv[1])[:5]:
        print(f"   limit {k}: {v:.0f}")
    for o in t.ops:
        print(f"   op {o.label:28s} {o.runtime:16s} p={o.parallelism} cpu/elt {(o.cpu_per_element or 0)*1e6:.1f}us V={o.visit_ratio} charged {ev.cost.get(o.name, 0)*1e3:.4f} ms/mb")
