import sys, tempfile
import plumbkit
from plumbkit.bench import pipelines as P
from plumbkit.engine.compare import QUICK
d = tempfile.mkdtemp()
makes = {"flip": lambda: P.image_random(d), "text": lambda: P.text(d), "speech": P.speech, "expert": lambda: P.expert_tuned(d),
         "detection": lambda: P.detection(d), "crop": lambda: P.shuffled_training(d), "skewed": P.planted_skewed}
for name in sys.argv[1].split(","):
    make = makes[name]()
    plan = plumbkit.optimize(make, seconds=5, compare=True, protocol=QUICK)
    print(f"== {name}: plan pred {plan.prediction.throughput:,.0f} ({plan.prediction.binding}); preds {({k: round(v) for k, v in plan.predictions.items() if v})}; measured {({k: round(v) for k, v in plan.baselines.items() if v})}; applied {plan.applied}", flush=True)
    for c in plan.proposed_changes: print("   change", c, flush=True)
    for n in plan.notes:
        if "keeps the threads" in n: print("   note", n, flush=True)
