import time, threading, statistics, sys
from pathlib import Path
import plumbkit
from plumbkit.bench import examples as ex
from plumbkit.tfdata import disk_tier
from plumbkit.tfdata.disk import evict_from_page_cache
from plumbkit.planning.predict import evidence_from_trace, predict, layout_as_traced, RuntimeCosts
from plumbkit.tfdata.runtime_costs import handoff_cost, cache_read_cost
sys.path.insert(0, str(Path(__file__).parent))
from common import run, P, B, files
rt = RuntimeCosts(handoff=handoff_cost(), cache_read=cache_read_cost())
print("handoff us", rt.handoff * 1e6)
for r in range(3):
    evict_from_page_cache(files)
    t = plumbkit.trace(P, seconds=3)
    ev = evidence_from_trace(t, runtime=rt)
    pr = predict(ev, layout_as_traced(ev))
    meas = run(P)
    parts = {t.op(k).label if hasattr(t, "op") else k: round(v * 1e3, 2) for k, v in ev.cost.items()}
    print(f"trace process {t.analysis.cpu_per_batch*1e3:.2f} ms; predicted {pr.cpu_per_batch*1e3:.2f} ms ({pr.throughput:.0f}/s {pr.binding}); measured {meas:.2f} ms", flush=True)
    print("   costs per minibatch:", {k: round(v * 1e3, 3) for k, v in ev.cost.items()}, "visits", dict(ev.visits), flush=True)
