import sys, time, os
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import tensorflow as tf
from plumbkit.bench import pipelines as P, examples
from plumbkit.host.machine import read_machine, neighbour_cores
D = "/tmp/busy-cores-data"

def switches():
    v = 0
    for t in os.listdir("/proc/self/task"):
        try:
            for line in open(f"/proc/self/task/{t}/status"):
                if line.startswith("voluntary_ctxt_switches"): v += int(line.split()[1])
        except OSError: pass
    return v
def measure(ds, label, seconds=3.0):
    it = iter(ds.repeat())
    for _ in range(300): next(it)
    m0 = read_machine(); v0 = switches(); c0 = time.process_time(); t0 = time.perf_counter(); n = 0
    while time.perf_counter() - t0 < seconds:
        next(it); n += 1
    wall = time.perf_counter() - t0; v1 = switches(); nb = neighbour_cores(m0, read_machine())
    busy = (time.process_time() - c0) / wall; free = 2 - nb
    sw = (v1 - v0) / wall
    print(f"{label}: {n/wall:.0f}/s busy {busy:.2f} of free {free:.2f}; cpu/mb {busy/(n/wall)*1e3:.2f} ms; switches {sw:.0f}/s = {sw/(n/wall):.1f}/mb; idle/switch {(free-busy)/sw*1e6:.1f} us", flush=True)
def flip_plan(kf=3, kn=2):
    paths = P.image_records(D, files=8, per_file=128)
    ds = tf.data.Dataset.from_tensor_slices(paths).interleave(tf.data.TFRecordDataset, cycle_length=1)
    ds = ds.map(examples.parse_example).map(examples.decode_image).map(examples.resize_image).cache()
    ds = ds.map(examples.random_flip, num_parallel_calls=kf).map(examples.normalize, num_parallel_calls=kn).batch(32)
    return ds.repeat().prefetch(6)
def matmul_map(k=2, units=20):
    ds = tf.data.Dataset.range(10**9).map(lambda x: examples.planted_work(x, units), num_parallel_calls=k)
    return ds.batch(32).prefetch(2)
def decode(k=2):
    paths = P.image_records(D, files=16, per_file=256)
    ds = tf.data.Dataset.from_tensor_slices(paths).repeat().interleave(tf.data.TFRecordDataset, cycle_length=2, num_parallel_calls=k)
    ds = ds.map(examples.parse_example, num_parallel_calls=k).map(examples.decode_image, num_parallel_calls=k).map(examples.resize_image, num_parallel_calls=k)
    return ds.batch(32).prefetch(2)
for name in sys.argv[1:]:
    measure(eval(name), name)
