import sys
import plumbkit
import plumbkit.tfdata.calibrate as cal
from plumbkit.bench import pipelines as bp
from plumbkit.analysis.operational import in_pipeline_scale
from plumbkit.tfdata.disk import evict_from_page_cache
make = bp.image_larger_than_memory("/tmp/w/img")
paths = bp.image_records("/tmp/w/img", files=24, per_file=512)
for r in range(4):
    n = (32, 300)[r % 2]
    cal.SAMPLE_ELEMENTS = n
    orig = cal.sample_size
    evict_from_page_cache(paths)
    t = plumbkit.trace(make, seconds=3)
    a = t.analysis
    line = f"sample {n}: process {a.cpu_per_batch*1e3:.2f} ms scale {in_pipeline_scale(a):.3f} "
    for o in t.ops:
        if o.cpu_per_element and o.visit_ratio > 1: line += f"| {o.label.split('(')[1][:6]} {o.cpu_per_element*o.visit_ratio*1e3*in_pipeline_scale(a,o):.2f}"
    print(line, flush=True)
