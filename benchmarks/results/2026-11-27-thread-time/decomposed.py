"""The plan of a bench pipeline predicted before the fact, its charges, then yours and the plan
measured right after in the same process (two interleaved rounds): the predicted speed-up
against the measured one, repeated (NOTE.md).

    python benchmarks/results/2026-11-27-thread-time/decomposed.py flip|speech|skewed 3
"""
import sys, tempfile, statistics, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))  # benchmarks/
import plumbkit
from plumbkit.bench import pipelines as P
from plumbkit.engine.compare import QUICK
from plumbkit.planning.predict import evidence_from_trace, predict, layout_as_traced, layout_with
from plumbkit.analysis.operational import in_pipeline_scale
from plumbkit.tfdata.rebuild import apply_changes
from speech_costs import cpu_per_minibatch
d = tempfile.mkdtemp()
make = P.image_random(d) if sys.argv[1] == "flip" else {"speech": P.speech, "skewed": P.planted_skewed}[sys.argv[1]]()
for i in range(int(sys.argv[2])):
    plan = plumbkit.optimize(make, seconds=5, compare=False, protocol=QUICK)
    ev = evidence_from_trace(plan.trace, runtime=plan.runtime)
    a = plan.trace.analysis; p = plan.prediction
    asis = predict(ev, layout_as_traced(ev))
    labels = {op.name: op.label for op in plan.trace.pipeline}
    rt = plan.runtime
    print(f"run {i}: plan {p.throughput:,.0f} ({p.binding}) cpu {p.cpu_per_batch*1e3:.3f}+idle {p.idle_per_batch*1e3:.3f}; yours pred {asis.throughput:.0f} cpu {asis.cpu_per_batch*1e3:.2f}; traced {a.throughput:.0f} cpu {a.cpu_per_batch*1e3:.2f}; scale {in_pipeline_scale(a):.3f}; pred speedup {p.throughput/asis.throughput:.2f}", flush=True)
    print(f"   rt: consumer {rt.consumer_work(True)*1e3:.3f} handoff {rt.handoff*1e6:.1f}us cache_read {rt.cache_read*1e6:.2f}us pool_idle {rt.pool_idle*1e6:.1f}us", flush=True)
    for name in p.free and [n for n in ev.cost if n not in p.free] or ev.cost:
        par = ev.parallel_cost.get(name)
        print(f"   charge {labels.get(name, name):24s} {ev.cost[name]*1e3:.4f}" + (f" par {par*1e3:.4f}" if par is not None else ""), flush=True)
    print("   ", "; ".join(str(c).split(' — ')[0] for c in plan.proposed_changes), flush=True)
    y, pl = [], []
    for r in range(2):
        y += cpu_per_minibatch(make(), 60, windows=4)
        pl += cpu_per_minibatch(apply_changes(make(), plan.proposed_changes), 300, windows=4)
    my, mp = statistics.median(r for _, r in y), statistics.median(r for _, r in pl)
    cy, cp = statistics.median(c for c, _ in y), statistics.median(c for c, _ in pl)
    print(f"   measured: yours {my:.0f} cpu {cy*1e3:.2f}; plan {mp:.0f} cpu {cp*1e3:.3f}; speedup {mp/my:.2f} (pred err {(p.throughput/asis.throughput)/(mp/my)-1:+.2f})", flush=True)
