"""Which operators cost less inside the user's chain than alone? For each operator of a bench
pipeline: alone over a cached sample of its inputs (64 and 1024 elements), and in the chain
(difference of prefixes). Usage: python chain_vs_alone.py [random|cacheable|expert]"""
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from plumbkit.bench import pipelines as bp
from plumbkit.bench.accuracy import prefix_truth, sample_truth
from plumbkit.engine import trace
from plumbkit.tfdata import graph_edits
from plumbkit.tfdata.tracer import observable

which = sys.argv[1] if len(sys.argv) > 1 else "random"
make = {"random": bp.image_random, "cacheable": bp.image_cacheable, "expert": bp.expert_tuned}[which](tempfile.mkdtemp())
ds = make()
t = trace(ds, seconds=3, converge=False, calibrate=False)
g = graph_edits.graph_def_of(ds, allow_external_state=True)
opts = observable(ds).options()
visits = {o.name: o.visit_ratio for o in t.ops}
for o in t.ops:
    op = t.pipeline.operators.get(o.name)
    if op is None or op.kind not in ("map", "batch", "interleave") or len(op.inputs) != 1 or not o.elements:
        continue
    cv, v = visits.get(op.inputs[0]), o.visit_ratio
    if not cv or not v:
        continue
    args = dict(elements=int(min(4000, max(64, 0.4 * o.elements_per_second))), inputs_per_element=cv / v, rounds=5)
    alone = sample_truth(g, op.name, op.inputs[0], opts, **args)
    alone_big = sample_truth(g, op.name, op.inputs[0], opts, sample=1024, **args)
    chain = prefix_truth(g, op.name, op.inputs[0], opts, **args)
    print(f"{op.label:32s} alone(64) {1e6*alone:8.1f}  alone(1024) {1e6*alone_big:8.1f}  in chain {1e6*chain:8.1f} us/elem", flush=True)
