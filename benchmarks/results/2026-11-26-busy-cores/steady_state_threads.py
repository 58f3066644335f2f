"""Why a saturated plan keeps < 2 cores busy: per-thread CPU of the expert-tuned steady state."""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3]))
import os, sys, time, collections
import tensorflow as tf
from plumbkit.bench import pipelines as P, examples
from plumbkit.tfdata.run import Runner
from plumbkit.host.machine import read_machine, neighbour_cores

data = "/tmp/busy-cores-data"
paths = P.image_records(data, files=16, per_file=256)

def threads():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            s = open(f"/proc/self/task/{tid}/stat").read()
            comm = s[s.index("(")+1:s.rindex(")")]
            f = s[s.rindex(")")+2:].split()
            out[tid] = (comm, (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"))
        except OSError:
            pass
    return out

def make(kflip, knorm, prefetch=tf.data.AUTOTUNE, batch_par=None, inside=False, shuffle=True):
    ds = tf.data.Dataset.from_tensor_slices(paths)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=2)
    ds = ds.map(examples.parse_example, num_parallel_calls=2)
    ds = ds.map(P.decode_and_resize, num_parallel_calls=2).cache()
    ds = ds.repeat() if inside else ds
    ds = ds.shuffle(1024) if shuffle else ds.map(examples.random_flip, num_parallel_calls=kflip)
    ds = ds.map(P.to_unit_range, num_parallel_calls=knorm)
    ds = ds.batch(32, num_parallel_calls=batch_par) if batch_par else ds.batch(32)
    ds = ds.prefetch(prefetch)
    if os.environ.get('NONDET'):
        o = tf.data.Options(); o.deterministic = False; ds = ds.with_options(o)
    return ds

def measure(ds, seconds=3.0, warm=300):
    r = Runner(ds)
    r.consume(warm, limit=60)
    r.window(0.5)
    m0 = read_machine()
    t0, c0, th0 = time.perf_counter(), time.process_time(), threads()
    x = r.window(seconds)
    t1, c1, th1 = time.perf_counter(), time.process_time(), threads()
    nb = neighbour_cores(m0, read_machine())
    wall = t1 - t0
    by = collections.Counter()
    for tid, (comm, c) in th1.items():
        by[f'{comm}:{tid}'] += (c - th0.get(tid, (comm, 0))[1]) / wall
    r.close()
    return x, (c1 - c0) / wall, by, nb

for spec in sys.argv[1:]:
    kf, kn, pf, bp, ins, sh = (int(v) if v != "-" else None for v in spec.split(","))
    x, busy, by, nb = measure(make(kf, kn, pf if pf is not None else tf.data.AUTOTUNE, bp, bool(ins), bool(sh)))
    top = ", ".join(f"{k} {v:.2f}" for k, v in by.most_common(4))
    print(f"nb={nb:.2f} of-free={busy/max(0.1,2-nb):.2f} shuffle={sh} inside={ins} flip={kf} norm={kn} prefetch={pf} batchpar={bp}: {x:.0f}/s busy {busy:.2f} cpu/b {busy/x*1e3:.2f} ms | {top}", flush=True)
