import plumbkit
from plumbkit.bench import pipelines as bp
from plumbkit.analysis.operational import in_pipeline_scale
from plumbkit.tfdata.disk import evict_from_page_cache
make = bp.image_larger_than_memory("/tmp/w/img")
paths = bp.image_records("/tmp/w/img", files=24, per_file=512)
for r in range(2):
    evict_from_page_cache(paths)
    t = plumbkit.trace(make, seconds=5)
    a = t.analysis
    print("process cpu/minibatch %.2f ms, over %.2f scale %.3f" % (a.cpu_per_batch*1e3, a.over_attributed_share, in_pipeline_scale(a)))
    for o in t.ops:
        if o.cpu_per_element: print(f"  {o.label:25s} cpu/el {o.cpu_per_element*1e6:7.1f} us  x{o.visit_ratio:.0f} -> {o.cpu_per_element*o.visit_ratio*1e3:.2f} ms/mb  scaled {o.cpu_per_element*o.visit_ratio*1e3*in_pipeline_scale(a,o):.2f} [{o.cpu_from}]")
