"""Speech's mask alone in its parallel form (cached mel outputs -> map(mask, k) -> batch(16)), as the
optimizer's parallel calibration runs it: idle per element beside the probe's."""
import json, statistics, time
import tensorflow as tf
from plumbkit.bench.pipelines import waveform, spectrogram, mel, mask
from plumbkit.bench.examples import planted_work
from plumbkit.host.machine import others_seconds, read_machine
from plumbkit.tfdata.run import Runner
from plumbkit.tfdata.runtime_costs import pool_idle_per_element

def window(runner, n_el, seconds=0.5):
    m0, c0, w0, n0 = read_machine(), time.process_time(), time.perf_counter(), runner.batches
    runner.window(seconds)
    wall, cpu, n = time.perf_counter() - w0, time.process_time() - c0, runner.batches - n0
    others = others_seconds(m0, read_machine()) or 0.0
    return n * n_el / wall, cpu / (n * n_el), max(0.0, 2 * wall - cpu - others) / (n * n_el)

src = tf.data.Dataset.range(2000).map(waveform).map(spectrogram).map(mel).cache().repeat()
probe_fn = lambda x: planted_work(x, 16)
for rep in range(2):
    for name, make, batch in [
        ("mask alone, 3 calls, batch 16", lambda k=3: src.map(mask, num_parallel_calls=k).batch(16), 16),
        ("mask alone, 2 calls, batch 16", lambda k=2: src.map(mask, num_parallel_calls=k).batch(16), 16),
        ("mask alone, 3 calls, batch 16, prefetch 2", lambda k=3: src.map(mask, num_parallel_calls=k).batch(16).prefetch(2), 16),
    ]:
        r = Runner(make()); r.consume(200, limit=60)
        rows = [window(r, batch) for _ in range(5)]; r.close()
        x, cpu, idle = (statistics.median(v[i] for v in rows) for i in range(3))
        print(json.dumps({"variant": name, "elements_per_s": round(x), "cpu_us": round(cpu * 1e6, 1), "idle_us": round(idle * 1e6, 1)}), flush=True)
    print("probe: %.1f us per element" % (1e6 * pool_idle_per_element.__wrapped__(2)), flush=True)
