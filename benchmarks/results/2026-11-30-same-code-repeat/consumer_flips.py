"""The skewed pipeline optimized twice; the consumer-ceiling probe read inside optimize, the plan measured
by its comparison, then the plan and the probe measured side by side three times. Output: consumer_flips.log."""
import statistics, time
import plumbkit
from plumbkit.bench.pipelines import planted_skewed
from plumbkit.tfdata.runtime_costs import consumer_ceiling
from plumbkit.tfdata.run import Runner
yours = planted_skewed()
for trial in range(2):
    plan = plumbkit.optimize(yours, compare=(trial == 1))
    print("inside optimize: consumer_plain %.0f  prefetched %.0f | predicted %.0f | measured %s" % (
        plan.runtime.consumer_plain, plan.runtime.consumer, plan.prediction.throughput,
        {k: round(v.median) for k, v in plan.comparison.results.items()} if plan.comparison else None))
    for i in range(3):
        r = Runner(plan.dataset); r.consume(1100, limit=60)
        planned = statistics.median(r.window(0.5) for _ in range(3)); r.close()
        print("  after: plan %.0f  probe %.0f" % (planned, consumer_ceiling(yours(), prefetched=False)), flush=True)
