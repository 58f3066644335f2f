"""Idle core time of a CPU-bound plan against the load of its sequential stage (session 54).

A cached sample -> map(work_p, k calls) -> map(work_s) (sequential) -> batch(32) -> prefetch(2),
pulled by the comparisons' plain next() loop on 2 cores. The per-element work is split between
the parallel map (p units) and the sequential one (s units), p + s fixed. Per window: minibatches
/s, process CPU per minibatch, idle core time per minibatch (2 x wall - CPU, neighbours' taken
out), and the sequential stage's load u = X x its CPU per minibatch (calibrated alone)."""
import statistics, sys, time, json
import tensorflow as tf
from plumbkit.bench.examples import planted_work
from plumbkit.tfdata.options import sequential_options
from plumbkit.tfdata.run import Runner
from plumbkit.host.machine import others_seconds, read_machine

TOTAL, BATCH, K = int(sys.argv[1]) if len(sys.argv) > 1 else 24, 32, 3

def cpu_per_element(ds, n=512):
    it = iter(ds); next(it)
    c0 = time.process_time()
    for _ in range(n): next(it)
    return (time.process_time() - c0) / n

def pipeline(p, s):
    ds = tf.data.Dataset.range(256).cache().repeat()
    if p: ds = ds.map(lambda x: planted_work(x, p), num_parallel_calls=K)
    if s: ds = ds.map(lambda x: planted_work(x, s))
    return ds.batch(BATCH).prefetch(2).with_options(sequential_options())

def window(runner, seconds=0.5):
    m0, c0, w0, n0 = read_machine(), time.process_time(), time.perf_counter(), runner.batches
    runner.window(seconds)
    wall, cpu, n = time.perf_counter() - w0, time.process_time() - c0, runner.batches - n0
    others = others_seconds(m0, read_machine()) or 0.0
    return n / wall, cpu / n, max(0.0, 2 * wall - cpu - others) / n

for s in [0, 2, 4, 6, 8, 10, 12]:
    p = TOTAL - s
    seq = cpu_per_element(tf.data.Dataset.range(256).cache().repeat().map(lambda x: planted_work(x, s)).with_options(sequential_options())) * BATCH if s else 0.0
    runner = Runner(pipeline(p, s)); runner.consume(20, limit=10)
    rows = [window(runner) for _ in range(5)]; runner.close()
    x = statistics.median(r[0] for r in rows); cpu = statistics.median(r[1] for r in rows); idle = statistics.median(r[2] for r in rows)
    print(json.dumps({"p": p, "s": s, "rate": round(x, 1), "cpu_ms": round(cpu * 1e3, 3), "idle_ms": round(idle * 1e3, 3),
                      "idle_share": round(idle / (cpu + idle), 3), "seq_alone_ms": round(seq * 1e3, 3), "u_seq": round(x * seq, 3)}), flush=True)
