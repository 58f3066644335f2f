"""Your pipeline's CPU per minibatch: the trace's window against the comparison's Runner, alternating."""
import sys, tempfile, time
from plumbkit.bench import pipelines as P
from plumbkit.engine.tracing import trace
from plumbkit.engine.compare import run_once, Contender
from plumbkit.model.protocol import FULL
d = tempfile.mkdtemp()
makes = {"flip": lambda: P.image_random(d), "text": lambda: P.text(d), "speech": P.speech,
         "detection": lambda: P.detection(d), "crop": lambda: P.shuffled_training(d), "skewed": P.planted_skewed}
make = makes[sys.argv[1]]()
for i in range(int(sys.argv[2])):
    t = trace(make(), seconds=10, calibrate=False)
    a = t.analysis
    r = run_once(Contender("yours", make, 0), FULL)
    print(f"{sys.argv[1]} trace {a.throughput:7.1f}/s cpu {a.cpu_per_batch*1e3:.3f} ms window {a.window[1]-a.window[0]:.1f}s | runner {r.throughput:7.1f}/s cpu {r.cpu_per_batch*1e3:.3f} ms", flush=True)
