import sys
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import tensorflow as tf
from plumbkit.bench import pipelines as P, examples
from plumbkit.tfdata.runtime_costs import epoch_restart
paths = P.image_records("/tmp/busy-cores-data", files=8, per_file=128)
user = lambda: examples.image_pipeline(paths, batch_size=32, epochs=1)
plan = lambda: user().cache()
for _ in range(2):
    print("user T ms", [round(1e3 * (epoch_restart(user(), 32, epochs=4) or -1), 2) for _ in range(2)],
          "plan (cache on top) T ms", [round(1e3 * (epoch_restart(plan(), 32, epochs=12) or -1), 3) for _ in range(3)], flush=True)
