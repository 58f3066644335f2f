"""The calibration sample's size against the map's cost in the pipeline (NOTE.md, section 3)."""
import statistics, sys
from pathlib import Path
import plumbkit
import plumbkit.tfdata.calibrate as cal
from plumbkit.tfdata.disk import evict_from_page_cache
sys.path.insert(0, str(Path(__file__).parent))
from common import run, P, B, files  # the tier of the image row, kept evicted
res = {}
for r in range(int(sys.argv[1])):
    real = run(P) - run(B)
    res.setdefault("real", []).append(real)
    for n in (32, 256, 1024):
        cal.SAMPLE_ELEMENTS = n
        evict_from_page_cache(files)
        t = plumbkit.trace(P, seconds=2)
        o = next(o for o in t.ops if "normalize" in o.label)
        v = o.cpu_per_element * o.visit_ratio * 1e3
        res.setdefault(n, []).append(v)
    print(r, {k: round(v[-1], 2) for k, v in res.items()}, flush=True)
print({k: round(statistics.median(v), 2) for k, v in res.items()})
