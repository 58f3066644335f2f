"""A CPU-bound pipeline does not keep every core busy: each element through a parallel pool leaves
some core idle (a thread woken by a hand-off starts late). plumbkit measures that idle time per
element once, on its own planted probe (``runtime_costs.pool_idle_per_element``: 80 µs maps,
minibatches of 32), and the prediction's CPU limit charges it (``test_predict`` has the formula).

Here the figure is checked on a different pipeline, built here: a map half as expensive,
minibatches of 16. Its throughput is measured by the same plain ``next()`` loop the comparisons
time, with its CPU per minibatch, in windows taken in turn with the probe's (``idle_probe``,
``idle_window``: what ``pool_idle_per_element`` is made of), paired. The limit the model draws
from a pair's CPU and idle time, over what that pair's pool window reached, must be within 15%
(the median of the pairs). The limit without the idle time must miss by more
(the negative control: the model as it was). About 9 s.

Why 15%: the model charges one idle time per element, measured on the probe; this pool's maps
cost half the probe's and its minibatches are half as large. The model's limit read +12.02% and
+12.04% over what the pool reached in two fresh-clone CI runs (without the idle time: +21.7% in
the second), +3.6% and +5.5% in two runs on the dev VM (without: +20.2%, +21.3%). The bound is
what the model holds to on a pipeline unlike its probe; the negative control still fails the
model without the idle time.
"""

import statistics
import time

import pytest
import tensorflow as tf

from plumbkit.bench.examples import planted_work
from plumbkit.host.machine import available_cores, neighbour_cores, read_machine
from plumbkit.tfdata.options import sequential_options
from plumbkit.tfdata.run import Runner
from plumbkit.tfdata.runtime_costs import IDLE_PROBE_BATCH, idle_probe, idle_window, pool_idle_per_element

BATCH = 16
#: Windows of each, taken in turn, and their length: single 0.3 s windows of one pool read its
#: idle per element anywhere in 5-27 µs on this VM, so the medians need ~3 s of each to hold
#: within a few percent (with 5 x 0.2-0.3 s, 1 run in ~10 missed by 11-14%).
WINDOWS, WINDOW_SECONDS = 8, 0.4
#: How close the model's limit must come to what the pool reached (see the module docstring).
WITHIN = 0.15


def _interleaved(pool: tf.data.Dataset, cores: int) -> tuple[list[tuple[float, float, float]], float]:
    """Windows taken in turn, a probe window then a pool window: per pair (the probe's idle per
    element, the pool's minibatches/s, its CPU seconds per minibatch); and the neighbours' cores,
    their median.

    Why in turn, and why paired: the idle time moves with the host (0.5 s windows of one pool read
    5-9 µs an element for seconds at a time on this VM, 15-20 µs otherwise). A probe cached minutes
    before, earlier in a full-suite run, missed the pool by 14%; medians of each side taken apart
    missed by 12.02% once in CI (the probe's median 4.3 µs, the pool's idle ~10 µs), on a run
    where another test saw the truth move >20% in 6 of 8 rounds. A pair's two windows are
    neighbours in time, and share the host's mode."""
    probe, runner = Runner(idle_probe(cores)), Runner(pool)
    try:
        probe.consume(4, limit=10.0)
        runner.consume(8, limit=10.0)
        pairs, others = [], []
        for _ in range(WINDOWS):
            idle = idle_window(probe, cores, IDLE_PROBE_BATCH, WINDOW_SECONDS)
            m0, c0, n0 = read_machine(), time.process_time(), runner.batches
            rate = runner.window(WINDOW_SECONDS)
            cpu = (time.process_time() - c0) / (runner.batches - n0)
            others.append(neighbour_cores(m0, read_machine()) or 0.0)
            if idle is not None:
                pairs.append((idle, rate, cpu))
        return pairs, statistics.median(others)
    finally:
        probe.close()
        runner.close()


def test_a_cpu_bound_pool_leaves_the_probes_idle_time_per_element():
    cores = available_cores()
    if cores < 2:
        pytest.skip("one core: no pool keeps several cores busy")
    assert 0 < pool_idle_per_element(cores) < 80e-6  # some idle; less than the probe's own work per element
    ds = (tf.data.Dataset.range(10**9).map(lambda x: planted_work(x, 8), num_parallel_calls=cores + 1)
          .batch(BATCH).prefetch(2).with_options(sequential_options()))
    pairs, neighbours = _interleaved(ds, cores)
    if neighbours >= 0.2:
        pytest.skip(f"measured beside {neighbours:.1f} busy neighbour cores: their share, not idle, is missing")
    assert len(pairs) >= WINDOWS // 2, pairs
    # each pair's limit over what that pair's pool window reached, the median of them
    with_idle = statistics.median(cores / (cpu + idle * BATCH) / rate for idle, rate, cpu in pairs)
    without = statistics.median(cores / cpu / rate for _, rate, cpu in pairs)
    idle, rate, cpu = (statistics.median(p[i] for p in pairs) for i in range(3))
    report = (f"medians: {rate:,.0f}/s at {cpu * 1e3:.3f} ms CPU per minibatch, {idle * 1e6:.1f} µs idle per "
              f"element; the limit with the idle time {with_idle - 1:+.1%} off, without it {without - 1:+.1%}")
    assert abs(with_idle - 1) <= WITHIN, report
    assert abs(without - 1) > abs(with_idle - 1), report
