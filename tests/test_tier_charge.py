"""Where a disk tier's read is charged (no TensorFlow): all its CPU counts against the cores,
only the pulling thread's share against the operator that pulls from it. A tier's shards are read
on its reader's own threads: 27 KB elements from a 4.5 GB tier cost 17-60 us of process CPU each,
2.5-5 us of it on the pulling thread (``benchmarks/results/2026-11-28-tier-read-back``). Charged
whole to one thread, a 340 MB image tier read back was predicted slower than recomputing and
dropped, where the run before it had measured 3.28x."""

import dataclasses

import pytest

from plumbkit.model.pipeline import Operator, Pipeline
from plumbkit.planning.predict import Evidence, Layout, RuntimeCosts, TierRead, predict

pytestmark = pytest.mark.concurrent  # checks what is predicted, not a speed (tests/run)

OPS = (("batch", "BatchDatasetV2", "batch"), ("heavy", "ParallelMapDatasetV2", "map"),
       ("decode", "MapDataset", "map"), ("src", "RangeDataset", "range"))
PIPE = Pipeline(operators={n: Operator(name=n, op=op, kind=kind, inputs=(OPS[i + 1][0],) if i + 1 < len(OPS) else (),
                                       label=f"{kind}({n})")
                           for i, (n, op, kind) in enumerate(OPS)}, root="batch")
#: 200 us of CPU per element read back, 5 us of it on the pulling thread; 16 elements a minibatch.
READ = TierRead(cpu_per_element=200e-6, bytes_per_element=27_648, read_bandwidth=2e9, thread_cpu_per_element=5e-6)
TIER = Layout(threads={"heavy": 8}, cached=frozenset({"decode"}), on_disk=frozenset({"decode"}))


def evidence(read: TierRead) -> Evidence:
    return Evidence(pipeline=PIPE, cost={"batch": 0.0, "heavy": 0.004, "decode": 0.05, "src": 0.0},
                    visits={"batch": 1, "heavy": 16, "decode": 16, "src": 16}, cores=8,
                    sequential=frozenset({"src"}), runtime=RuntimeCosts(), tiers={"decode": read})


def test_a_tiers_read_charges_the_pulling_thread_its_own_share_and_the_cores_all_of_it():
    shared = predict(evidence(READ), TIER)
    # all of it against the cores: 16 x 200 us beside the heavy map's 4 ms per minibatch
    assert shared.cpu_per_batch == pytest.approx(0.004 + 16 * 200e-6, rel=0.05)
    pulling = shared.limits["runner thread of map(heavy)"]
    assert pulling == pytest.approx(1 / (16 * 5e-6), rel=0.05)  # 12,500/s: the thread's own share
    assert not shared.binding.startswith("runner thread"), shared.binding
    # negative control: the whole read on the pulling thread (the share not measured) binds it
    whole = predict(evidence(dataclasses.replace(READ, thread_cpu_per_element=None)), TIER)
    assert whole.binding == "runner thread of map(heavy)"
    assert whole.throughput == pytest.approx(1 / (16 * 200e-6), rel=0.05)
    assert whole.throughput < shared.throughput
    assert whole.cpu_per_batch == pytest.approx(shared.cpu_per_batch)  # the same CPU, charged elsewhere


def test_a_filling_tier_charges_its_measured_write_against_the_cores_not_the_pulling_thread():
    """The first epoch writes every element through a Python generator into the save's writer
    threads (tfdata/disk_tier.py): on the dev VM ~120 us of CPU per 27 KB element, a quarter of
    what the image row's maps cost to make it, which the fill's prediction had left out (it
    predicted the fill 2x fast)."""
    writing = dataclasses.replace(READ, write_cpu_per_element=120e-6)
    fill = predict(evidence(writing), TIER, filling=True)
    # negative control: the write not measured, charged as a memory cache's put (none here)
    unmeasured = predict(evidence(READ), TIER, filling=True)
    assert fill.cpu_per_batch == pytest.approx(unmeasured.cpu_per_batch + 16 * 120e-6)
    cores = next(k for k in fill.limits if k.startswith("CPU"))
    assert fill.limits[cores] < unmeasured.limits[cores]
    thread = "runner thread of map(heavy)"  # the tier's writers are not the pulling thread
    assert fill.limits[thread] == pytest.approx(unmeasured.limits[thread])
    # the steady state reads the tier back: its write costs nothing there
    assert predict(evidence(writing), TIER).cpu_per_batch == pytest.approx(predict(evidence(READ), TIER).cpu_per_batch)
