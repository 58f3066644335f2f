import time, glob
import tensorflow as tf, plumbkit
from plumbkit.bench import examples as ex
from plumbkit.engine.compare import Protocol
from plumbkit.tfdata.graph import pipeline_of
files = sorted(glob.glob("/tmp/w/img/images-24x512/*.tfrecord"))[:8]  # 4,096 images, 128 minibatches
make = lambda: ex.image_pipeline(files, epochs=None)
plan = plumbkit.optimize(make, seconds=3, compare=False, protocol=Protocol(rounds=2, window=0.3, max_windows=4, fill_limit=200, extra_rounds=0))
print("changes", [str(c) for c in plan.proposed_changes], plan.notes)
from plumbkit.tfdata.rebuild import apply_changes
built = apply_changes(make(), plan.proposed_changes)
print("fill predicted", plan.fill_prediction.throughput if plan.fill_prediction else None, plan.fill_prediction.binding if plan.fill_prediction else None)
print("forms", [(o.label, o.parallelism) for o in pipeline_of(built)])
o = built.options(); print("map_parallelization", o.experimental_optimization.map_parallelization, "defaults", o.experimental_optimization.apply_default_optimizations)
for r in range(3):
    it = iter(apply_changes(make(), plan.proposed_changes)); t0 = time.perf_counter()
    for _ in range(128): next(it)
    t = time.perf_counter() - t0
    it2 = iter(make()); t1 = time.perf_counter()
    for _ in range(128): next(it2)
    ty = time.perf_counter() - t1
    print(f"plan's first epoch: {128 / t:.1f}/s; yours' first epoch: {128 / ty:.1f}/s", flush=True)
    del it, it2
