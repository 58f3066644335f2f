import tempfile, statistics
import plumbkit
from plumbkit.bench import pipelines as bp
from plumbkit.engine.restarts import measure_restarts
from plumbkit.planning.predict import RuntimeCosts, evidence_from_trace, layout_as_traced, predict
from plumbkit.tfdata.run import Runner
make = bp.expert_tuned(tempfile.mkdtemp())
for trial in range(3):
    t = plumbkit.trace(make, seconds=3)
    r = measure_restarts(make(), t)
    ev0 = evidence_from_trace(t)
    st = predict(ev0, layout_as_traced(ev0)).throughput
    ev = evidence_from_trace(t, runtime=RuntimeCosts(restarts=r))
    av = predict(ev, layout_as_traced(ev)).throughput
    runner = Runner(make()); runner.consume(300, limit=20.0)
    meas = sorted(runner.window(1.0) for _ in range(5))[2]
    print(f"N {r.minibatches:.0f} epoch {r.epoch*1e3:.1f} ms -> {r.minibatches/r.epoch:.0f}/s; startup(mid) {r.startup*1e3:.1f}; steady {st:.0f}; T' {ev.restart_as_traced*1e3:.1f}; pred {av:.0f}; trace {t.throughput:.0f}; runner {meas:.0f}")
