import sys, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import tensorflow as tf
import plumbkit
from plumbkit.tfdata.options import sequential_options
from plumbkit.bench.examples import planted_work
from plumbkit.engine.restarts import measure_restarts
from plumbkit.planning.predict import RuntimeCosts, evidence_from_trace, layout_as_traced, predict
from plumbkit.tfdata.run import Runner
U = int(sys.argv[1]); N = int(sys.argv[2])
def make():
    ds = tf.data.Dataset.range(N).map(lambda x: planted_work(x, 3)).prefetch(1)
    return ds.shuffle(N).map(lambda x: planted_work(x, 5)).batch(8).with_options(sequential_options())
t0 = time.perf_counter()
tr = plumbkit.trace(make, seconds=2.0, min_seconds=1.0)
t1 = time.perf_counter()
r = measure_restarts(make(), tr)
t2 = time.perf_counter()
ev = evidence_from_trace(tr, runtime=RuntimeCosts(restarts=r))
p = predict(ev, layout_as_traced(ev))
steady = predict(evidence_from_trace(tr), layout_as_traced(ev))
run = Runner(make()); run.consume(20, limit=10)
m = sorted(run.window(0.5) for _ in range(3))[1]
print(dict(ev.cost), {k: round(v) for k, v in p.limits.items()})
print(f"trace {t1-t0:.1f}s restart {t2-t1:.1f}s; traced {tr.throughput:.0f}/s; restarts {r}; predicted {p.throughput:.0f} ({p.binding}); steady {steady.throughput:.0f} ({steady.binding}); measured {m:.0f}/s; total {time.perf_counter()-t0:.1f}s")
