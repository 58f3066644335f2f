"""Speech's plan: idle core time per minibatch as its pool's threads and its prefetch change,
beside the idle probe every plan is charged from (runtime_costs.pool_idle_per_element).
Per variant: 5 windows of 0.5 s after the cache filled; minibatches/s, process CPU per minibatch,
idle = (2 x wall - CPU - other processes' CPU) per minibatch, and per element (16 a minibatch)."""
import dataclasses, json, statistics, time
import plumbkit
from plumbkit.bench.pipelines import speech
from plumbkit.host.machine import others_seconds, read_machine
from plumbkit.tfdata.rebuild import apply_changes
from plumbkit.tfdata.run import Runner
from plumbkit.tfdata.runtime_costs import pool_idle_per_element

BATCH = 16
make = speech()
plan = plumbkit.optimize(make, compare=False)
print("plan:", [str(c)[:90] for c in plan.changes], flush=True)
print("predicted idle per minibatch %.3f ms, CPU %.3f ms" % (1e3 * plan.prediction.idle_per_batch, 1e3 * plan.prediction.cpu_per_batch))

def window(runner, seconds=0.5):
    m0, c0, w0, n0 = read_machine(), time.process_time(), time.perf_counter(), runner.batches
    runner.window(seconds)
    wall, cpu, n = time.perf_counter() - w0, time.process_time() - c0, runner.batches - n0
    others = others_seconds(m0, read_machine()) or 0.0
    return n / wall, cpu / n, max(0.0, 2 * wall - cpu - others) / n

def variant(threads=None, prefetch=True):
    changes = []
    for c in plan.changes:
        if c.what == "prefetch" and not prefetch:
            continue
        if c.what == "parallelism" and threads is not None:
            c = dataclasses.replace(c, value=threads)
        changes.append(c)
    return apply_changes(make(), changes)

for rep in range(2):
    for name, kw in [("mask 3 threads (the plan)", {}), ("mask 2 threads", {"threads": 2}), ("mask 4 threads", {"threads": 4}),
                     ("mask 1 thread", {"threads": 1}), ("the plan, no prefetch", {"prefetch": False})]:
        runner = Runner(variant(**kw)); runner.consume(200, limit=60)
        rows = [window(runner) for _ in range(5)]; runner.close()
        x, cpu, idle = (statistics.median(r[i] for r in rows) for i in range(3))
        print(json.dumps({"variant": name, "rate": round(x), "cpu_ms": round(cpu * 1e3, 3), "idle_ms": round(idle * 1e3, 3),
                          "idle_us_per_element": round(idle / BATCH * 1e6, 1), "idle_share": round(idle / (cpu + idle), 3)}), flush=True)
    print("probe: %.1f us per element" % (1e6 * pool_idle_per_element.__wrapped__(2)), flush=True)
