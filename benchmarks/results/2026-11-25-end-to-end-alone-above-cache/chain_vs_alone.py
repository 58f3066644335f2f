"""Which operators cost less inside the user's chain than alone? For each operator of a bench
pipeline: alone over a cached sample of its inputs (64 and 1024 elements), and in the chain
(difference of prefixes). Plus the segment above the plan's cache over a sample of the cached
elements, against the sum of its operators alone."""
import os, sys, statistics, tempfile, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
from plumbkit.bench import pipelines as bp
from plumbkit.bench.accuracy import sample_truth, prefix_truth, _difference
from plumbkit.tfdata import graph_edits
from plumbkit.tfdata.graph import dataset_at
from plumbkit.tfdata.tracer import observable
from plumbkit.engine import trace

which = sys.argv[1] if len(sys.argv) > 1 else "random"
data = tempfile.mkdtemp()
make = {"random": bp.image_random, "cacheable": bp.image_cacheable, "expert": bp.expert_tuned}[which](data)
ds = make()
t = trace(ds, seconds=3, converge=False, calibrate=False)
g = graph_edits.graph_def_of(ds, allow_external_state=True)
opts = observable(ds).options()
visits = {o.name: o.visit_ratio for o in t.ops}
rows = []
for o in t.ops:
    op = t.pipeline.operators.get(o.name)
    if op is None or op.kind not in ("map", "batch", "interleave") or len(op.inputs) != 1 or not o.elements:
        continue
    cv, v = visits.get(op.inputs[0]), o.visit_ratio
    if not cv or not v:
        continue
    per_input = cv / v
    n = int(min(4000, max(64, 0.4 * o.elements_per_second)))
    if op.kind == "batch":
        n = max(16, n)
    alone = sample_truth(g, op.name, op.inputs[0], opts, elements=n, inputs_per_element=per_input, rounds=5)
    big_s, _ = graph_edits.insert_sample(g, op.inputs[0], 1024, -1)
    s2, rep = graph_edits.insert_sample(g, op.inputs[0], 1024, -1)
    alone_big = _difference(dataset_at(s2, op.name), dataset_at(s2, rep), opts, elements=n, inputs_per_element=per_input, rounds=5)
    chain = prefix_truth(g, op.name, op.inputs[0], opts, elements=n, inputs_per_element=per_input, rounds=5)
    rows.append((op.label, alone, alone_big, chain))
    print(f"{op.label:32s} alone(64) {1e6*alone:8.1f}  alone(1024) {1e6*alone_big:8.1f}  in chain {1e6*chain:8.1f} us/elem", flush=True)
