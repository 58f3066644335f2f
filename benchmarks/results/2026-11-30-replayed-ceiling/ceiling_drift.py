"""The skewed pipeline's plan against the consumer's ceiling, measured in interleaved rounds.

Plans skewed once (no comparison), then ten times: the ceiling (the first minibatch replayed,
pulled directly: what the plan's prediction is made from) and the plan, three 0.5 s windows each.
Prints the ceiling the plan was made from, each round's ceiling and plan, and their ratios.
Run from a checkout: ``python benchmarks/results/2026-11-30-replayed-ceiling/ceiling_drift.py``.
"""
import statistics
import plumbkit
from plumbkit.bench.pipelines import planted_skewed
from plumbkit.engine.compare import Protocol
from plumbkit.tfdata.run import Runner
from plumbkit.tfdata.runtime_costs import consumer_ceiling
make = planted_skewed()
plan = plumbkit.optimize(make, seconds=3, compare=False, protocol=Protocol(rounds=3, window=0.5, max_windows=4, fill_limit=30, extra_rounds=5))
whats = [c.what for c in plan.proposed_changes]
pf = "prefetch" in whats
ceil = plan.runtime.consumer if pf else plan.runtime.consumer_plain
print("changes", whats, "pred", round(plan.prediction.throughput), plan.prediction.binding, "ceiling at plan", round(ceil))
ratios, nows, plans = [], [], []
for _ in range(10):
    now = consumer_ceiling(make(), window=0.5, prefetched=pf)
    r = Runner(plan.dataset); r.consume(2000, limit=30.0)
    v = statistics.median(r.window(0.5) for _ in range(3)); r.close()
    nows.append(now); plans.append(v); ratios.append(v / now)
print("ceiling now", round(statistics.median(nows)), [round(x) for x in nows])
print("plan", round(statistics.median(plans)), [round(x) for x in plans])
print("ratio", round(statistics.median(ratios), 3), [round(x, 2) for x in ratios])
