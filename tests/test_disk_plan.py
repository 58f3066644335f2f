"""The disk tier in the plan (issue 26): placed where memory cannot hold a cache and reading it
back beats recomputing, refused or offered otherwise; the rebuilt pipeline and the exported cell.

Real TensorFlow: each pipeline is traced once, uncalibrated (120 minibatches at most, up to 6 s
on a busy machine), its cache directory (pytest's tmp_path, never ~/.cache) is probed for real,
and the plan is made from both. 23 s at load 6-7 on 2 cores.
"""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

import plumbkit
from plumbkit.engine import optimization
from plumbkit.engine.disk_tier import decide_tiered
from plumbkit.model.protocol import QUICK
from plumbkit.planning.fill import fill_seconds
from plumbkit.planning.predict import RuntimeCosts
from plumbkit.tfdata.disk_tier import list_caches
from plumbkit.export.source import rewrite_source
from plumbkit.model.units import human_bytes
from plumbkit.planning.decisions import decide_cache
from plumbkit.planning.disk_tier import tier_candidates
from plumbkit.planning.tier_plan import decide_with_disk
from plumbkit.tfdata.disk_probe import probe_directory
from plumbkit.tfdata.graph import pipeline_of
from plumbkit.tfdata.rebuild import apply_changes
from plumbkit.tunables import ESTIMATE_MARGIN, TIER_GAIN

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)

#: The user's cell: an expensive deterministic map (96 matmul units, ~0.3-0.4 ms per element)
#: whose 1 KB elements, 600 of them, exceed a tiny memory budget.
CELL = '''
import tensorflow as tf
from plumbkit.bench.examples import planted_work

def decode(x):
    return tf.fill([256], planted_work(x, 96))

ds = tf.data.Dataset.range(600).map(decode).batch(16)
'''

#: A map that costs nearly nothing whatever its elements' size (a constant 1 MB): reading an
#: element back costs at least a megabyte read and copied, recomputing it a few microseconds.
CHEAP = '''
import tensorflow as tf

def widen(x):
    return tf.zeros([1 << 20], tf.uint8)

ds = tf.data.Dataset.range(64).map(widen)
'''

#: The shuffled training pipeline: files shuffled, records shuffled, then the expensive decode.
SHUFFLED = '''
import tensorflow as tf
from plumbkit.bench.examples import planted_work

def decode(x):
    return tf.fill([256], planted_work(x, 96))

def records(f):
    return tf.data.Dataset.range(150).map(lambda x: x + 150 * f)

files = tf.data.Dataset.range(4).shuffle(4)
ds = files.interleave(records, cycle_length=2).shuffle(64).map(decode).batch(16)
'''

TINY_MEMORY = 1000  # bytes: nothing of these pipelines fits


def _pipeline(cell: str) -> tf.data.Dataset:
    namespace: dict = {}
    exec(compile(cell, "<cell>", "exec"), namespace)  # noqa: S102 - the test's own cell
    return namespace["ds"]


def _plan(trace, ds, tmp_path, disk_budget):
    return decide_tiered(trace, disk_budget=disk_budget, cache_dir=tmp_path, memory_budget=TINY_MEMORY,
                         root=pipeline_of(ds).root, progress=lambda *_: None)


@pytest.fixture(scope="module")
def expensive():
    ds = _pipeline(CELL)
    return ds, plumbkit.trace(ds, seconds=6, max_batches=120, converge=False, calibrate=False)


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """One cache directory for the tests that write nothing but the probe (probed once per size)."""
    return tmp_path_factory.mktemp("tier")


@pytest.fixture(scope="module")
def cheap():
    ds = _pipeline(CHEAP)
    return ds, plumbkit.trace(ds, seconds=6, max_batches=120, converge=False, calibrate=False)


def _tier_changes(decisions):
    return [c for c in decisions.changes if c.what == "disk_tier"]


def test_an_expensive_map_memory_cannot_hold_goes_to_disk_with_both_predictions(expensive, probed):
    ds, trace = expensive
    tmp_path = probed
    d = _plan(trace, ds, tmp_path, disk_budget=100e6)
    [tier_change] = _tier_changes(d)
    assert tier_change.value == str(tmp_path)
    assert not [c for c in d.changes if c.what == "cache"]  # memory could not hold it
    tier = d.tier
    assert tier is not None and tier.applied
    assert tier.steady.throughput == pytest.approx(d.prediction.throughput)  # one prediction
    assert tier.steady.throughput >= TIER_GAIN * tier.recompute.throughput
    assert 0 < tier.fill.throughput < tier.steady.throughput  # the first epoch still decodes
    # the whole first epoch: the tier written, then read back once (the guard yields nothing before)
    written = fill_seconds(tier.fill, tier.candidate.epoch_batches) + tier.measurement.write_setup_seconds
    read_back = tier.candidate.epoch_batches / tier.steady.throughput
    assert tier.fill_seconds == pytest.approx(written + read_back) and read_back > 0, str(tier)
    labels = {op.name: op.label for op in trace.pipeline}
    below = {o.name for o in trace.pipeline.descendants(tier_change.node)} | {tier_change.node}
    assert any(labels[n] == "map(decode)" for n in below)  # the map is read back, not recomputed
    said = str(tier)
    assert "steady state predicted" in said and "first epoch writes it" in said, said
    assert "then reads it back" in said and str(tmp_path) in said, said


def test_the_disk_cached_plan_yields_your_elements_in_order_and_exports_on_disk(expensive, tmp_path):
    ds, trace = expensive
    d = _plan(trace, ds, tmp_path, disk_budget=100e6)
    assert _tier_changes(d)
    rebuilt = apply_changes(ds, d.changes)
    for mine, theirs in zip(rebuilt, ds, strict=True):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    again = list(apply_changes(ds, d.changes).take(3))  # a second build reads the same tier back
    np.testing.assert_array_equal(again[2].numpy(), list(ds.skip(2).take(1))[0].numpy())
    source = rewrite_source(CELL, d.changes)
    assert "plumbkit.on_disk(" in source and f"cache_dir={str(tmp_path)!r}" in source
    assert "import plumbkit" in source
    exported: dict = {}
    exec(compile(source, "<exported>", "exec"), exported)  # noqa: S102 - the plan's own cell
    np.testing.assert_array_equal(list(exported["ds"].take(1))[0].numpy(), list(ds.take(1))[0].numpy())


def test_without_a_disk_budget_the_tier_is_offered_with_its_size_not_applied(expensive, probed):
    ds, trace = expensive
    tmp_path = probed
    d = _plan(trace, ds, tmp_path, disk_budget=None)
    assert not _tier_changes(d) and d.tier is None
    [offer] = [o for o in d.options if any(c.what == "disk_tier" for c in o.changes)]
    node = next(c.node for c in offer.changes if c.what == "disk_tier")
    size = next(o.materialized_bytes for o in trace.analysis.ops if o.name == node)
    assert human_bytes(size * (1 + ESTIMATE_MARGIN)) in offer.title and str(tmp_path) in offer.title
    assert offer.gain >= TIER_GAIN and "disk_budget=" in offer.note
    assert not list(tmp_path.glob("*.save"))  # nothing was written but the probe, which is gone


@pytest.fixture(scope="module")
def larger():
    """The expensive map over 4,000 elements of 4 KB: a tier of 16 MB, long enough to read back."""
    ds = _pipeline(CELL.replace("range(600)", "range(4000)").replace("[256]", "[1024]"))
    return ds, plumbkit.trace(ds, seconds=6, max_batches=120, converge=False, calibrate=False)


def _before_the_fact(ds, trace, cache_dir):
    return optimization._plan_before_the_fact(  # noqa: SLF001 - the step that fills and reads the tier
        ds, trace, cores=trace.cores, memory_budget=TINY_MEMORY, runtime=RuntimeCosts(), disk=None, costs=None,
        protocol=QUICK, progress=lambda *_: None, disk_budget=100e6, cache_dir=str(cache_dir))


def test_a_filled_tier_is_planned_on_its_own_read_not_the_probes(larger, tmp_path):
    """A probe of a few MB read 4.7 GB/s where the 4.5 GB tier it was for read ~0.7 (the third
    disk-tier run): once filled, the tier is read back in part, evicted, and the plan decided
    again on that read, its note saying so."""
    ds, trace = larger
    planned = _before_the_fact(ds, trace, tmp_path)
    tier = planned.decisions.tier
    assert tier is not None and tier.measurement.read_back_bytes > 0
    [entry] = list_caches(tmp_path)
    assert entry.complete and tier.measurement.read_back_bytes == pytest.approx(entry.bytes, rel=0.05)
    read = planned.decisions.tiers[tier.candidate.node]
    assert (read.read_bandwidth, read.cpu_per_element) == (tier.measurement.read_bandwidth,
                                                           tier.measurement.read_cpu_per_element)
    assert "read back from" in str(tier) and "of the filled tier" in str(tier)  # said once predicted (below)
    assert "read back from" in planned.decisions.cache.why


def test_an_optimized_plan_says_its_tier_once_with_the_prediction_it_shows(tmp_path):
    """The tier is decided on the trace's evidence, and the plan is predicted again once the
    operators it parallelizes are calibrated with calls in flight: the tier's note is said from
    that prediction, once (the bench's image row noted "steady state predicted 554.3" beside a
    plan predicted at 624.6)."""
    plan = plumbkit.optimize(lambda: _pipeline(CELL), memory_budget=TINY_MEMORY, disk_budget=100e6,
                             cache_dir=str(tmp_path), seconds=0.5, protocol=QUICK, compare=False)
    assert plan.tier is not None, plan.notes
    said = [n for n in plan.notes if "steady state predicted" in n]
    assert said == [str(plan.tier)], plan.notes
    assert f"steady state predicted {plan.prediction.throughput:,.1f} minibatches/s" in said[0], (said, plan.prediction)


def test_a_filled_tier_that_reads_back_slower_than_recomputing_is_dropped_and_removed(larger, tmp_path, monkeypatch):
    """Negative control: the same tier read back as from a disk of 1 MB/s is no longer worth it;
    the plan goes on without it and removes what it filled."""
    ds, trace = larger
    real = optimization.read_tier_back

    def slow_disk(path, probed, progress):
        read = real(path, probed, progress)
        return dataclasses.replace(read, read_bandwidth=1e6)
    monkeypatch.setattr(optimization, "read_tier_back", slow_disk)
    planned = _before_the_fact(ds, trace, tmp_path)
    assert planned.decisions.tier is None and not _tier_changes(planned.decisions)
    assert list_caches(tmp_path) == []
    assert any("was removed: read back, it no longer beat recomputing" in n for n in planned.notes), planned.notes
    assert any(n.startswith("no disk tier: reading ") and "(disk tier read bandwidth" in n for n in planned.notes)


def test_a_disk_budget_smaller_than_the_cache_is_refused_in_one_line(expensive, probed):
    ds, trace = expensive
    d = _plan(trace, ds, probed, disk_budget=2000)
    assert not _tier_changes(d)
    [line] = [n for n in d.notes if n.startswith("disk tier refused")]
    assert "\n" not in line and "2.0 KB disk budget" in line


def test_a_tier_slower_than_recomputing_is_never_chosen(cheap, probed):
    ds, trace = cheap
    d = _plan(trace, ds, probed, disk_budget=1e9)
    assert not _tier_changes(d) and d.tier is None  # not even worth a probe of the directory
    # measured anyway: reading a megabyte back is predicted slower than recomputing it
    node = next(op.name for op in trace.pipeline if op.label == "map(widen)")
    measured = {node: probe_directory(probed, 1 << 20)}
    for budget in (1e9, None):
        d = decide_with_disk(trace, disk_budget=budget, directory=str(probed), measured=measured,
                             memory_budget=TINY_MEMORY, root=pipeline_of(ds).root)
        assert not _tier_changes(d) and d.tier is None
        assert not [o for o in d.options if any(c.what == "disk_tier" for c in o.changes)]
        assert any(n.startswith("no disk tier: reading map(widen) back") for n in d.notes), (d.notes, repr(trace))


def test_a_disk_too_full_for_the_cache_is_said_with_or_without_a_budget(expensive, probed):
    ds, trace = expensive
    node = next(op.name for op in trace.pipeline if op.label == "map(decode)")
    full = dataclasses.replace(probe_directory(probed, 1024), free_bytes=1000.0)  # the real probe, a full disk
    for budget in (100e6, None):
        d = decide_with_disk(trace, disk_budget=budget, directory=str(probed), measured={node: full},
                             memory_budget=TINY_MEMORY, root=pipeline_of(ds).root)
        assert not _tier_changes(d) and not [o for o in d.options if any(c.what == "disk_tier" for c in o.changes)]
        [line] = [n for n in d.notes if n.startswith("no disk tier: map(decode)")]
        assert "needs" in line and "has 1.0 KB free" in line, line


def test_an_elements_declared_size_is_read_from_the_graph_only_where_it_is_fixed():
    """What a trace falls back on when it never saw an operator run (test_analysis_window)."""
    ds = (tf.data.Dataset.range(64).map(lambda x: (tf.zeros([1 << 20], tf.uint8), tf.cast(x, tf.float32)))
          .batch(4, drop_remainder=True))
    sizes = {op.label: op.static_bytes for op in pipeline_of(ds)}
    assert sizes == {"batch(4)": 4 * ((1 << 20) + 4), "map(lambda)": (1 << 20) + 4, "range": 8}
    ragged = tf.data.Dataset.from_tensor_slices(["a", "bc"]).batch(2)  # strings, a last batch of any size
    assert {op.static_bytes for op in pipeline_of(ragged)} == {None}


def test_a_shuffle_below_the_decode_is_offered_moved_above_the_cache_never_applied(probed):
    ds = _pipeline(SHUFFLED)
    trace = plumbkit.trace(ds, seconds=6, max_batches=80, converge=False, calibrate=False)
    d = _plan(trace, ds, probed, disk_budget=100e6)
    stats = {o.name: o for o in trace.analysis.ops}
    assert not [c for c in d.changes if c.what == "remove"]  # the order is yours: no shuffle moved
    assert all(stats[c.node].cacheable for c in d.changes if c.what in ("cache", "disk_tier"))  # none above one
    [offer] = [o for o in d.options if o.title.startswith("cache the decoded records at map(decode)")]
    kinds = {c.what: c for c in offer.changes}
    assert kinds["remove"].where == "shuffle(64)" and kinds["shuffle_above"].value == 64
    assert kinds.keys() & {"cache", "disk_tier"}
    assert offer.gain >= TIER_GAIN
    assert "shuffle_buffer = 64" in offer.note and "shuffle(4)" in offer.note and "listed order" in offer.note


def test_an_in_memory_source_is_never_a_tier_candidate_what_is_built_on_it_may_be():
    """A tier of ``from_tensor_slices`` would write out what memory holds and read it back slower;
    before the fix the source was the candidate the plan probed the directory for (~100 MB written)."""
    ds = tf.data.Dataset.from_tensor_slices(np.zeros((600, 2048), np.float32)).map(lambda x: x * 2).batch(16)
    trace = plumbkit.trace(ds, seconds=4, max_batches=40, converge=False, calibrate=False)
    root = pipeline_of(ds).root
    memory = decide_cache(trace, TINY_MEMORY, root)
    assert memory.node is None  # nothing fits: every operator is a disk candidate but the source
    labels = [c.label for c in tier_candidates(trace, memory, root)]
    assert labels == ["batch(16)", "map(lambda)"], labels
