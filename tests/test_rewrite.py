"""plumbkit.tfdata.graph_edits and .rebuild on real TensorFlow: every edit keeps the pipeline's elements and element_spec.

Each test builds a deterministic pipeline, edits its graph, rebuilds it and compares what the
two datasets yield. Random maps are used on purpose where a test must tell a cache that
caches from one that silently recomputes.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plumbkit.model.pipeline import AUTOTUNE
from plumbkit.model.plan import Change
from plumbkit.tfdata import graph_edits as rw
from plumbkit.tfdata.graph import pipeline_of
from plumbkit.tfdata.graph_edits import RewriteError
from plumbkit.tfdata.rebuild import apply_changes

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)


# -- helpers ------------------------------------------------------------------------------------

def elements(ds: tf.data.Dataset) -> list:
    """Every element as plain Python values (nested dicts/tuples kept), for exact comparison."""
    return [tf.nest.map_structure(lambda t: np.asarray(t).tolist(), e) for e in ds.as_numpy_iterator()]


def rebuilt(ds: tf.data.Dataset, graph_def) -> tf.data.Dataset:
    return rw.dataset_from_graph_def(graph_def, ds.element_spec)


def named(graph_def, op: str) -> list[str]:
    return [n.name for n in graph_def.node if n.op == op]


def node(graph_def, name: str):
    return next(n for n in graph_def.node if n.name == name)


def const_input(graph_def, name: str, index: int):
    source = node(graph_def, node(graph_def, name).input[index])
    return tf.make_ndarray(source.attr["value"].tensor).item()


def assert_same_after(ds: tf.data.Dataset, graph_def) -> tf.data.Dataset:
    out = rebuilt(ds, graph_def)
    assert out.element_spec == ds.element_spec
    assert elements(out) == elements(ds)
    return out


def noisy(x):
    """A map whose output differs on every run unless something caches it."""
    return x + tf.random.uniform((), maxval=1 << 40, dtype=tf.int64)


# -- pipelines ------------------------------------------------------------------------------------

def range_map_batch() -> tf.data.Dataset:
    def square(x):
        return x * x
    return tf.data.Dataset.range(40).map(square).batch(7)


def nested_dicts() -> tf.data.Dataset:
    source = {"a": tf.range(30, dtype=tf.int64), "b": tf.reshape(tf.range(60, dtype=tf.float32), (30, 2))}

    def restructure(row):
        return {"x": (row["a"], row["b"] * 2.0), "y": {"ragged": tf.range(row["a"] % 5)}}

    def keep(row):
        return row["x"][0] % 3 != 0
    return tf.data.Dataset.from_tensor_slices(source).map(restructure).filter(keep).padded_batch(4)


def tfrecords(tmp_path) -> tf.data.Dataset:
    for f in range(3):
        with tf.io.TFRecordWriter(str(tmp_path / f"part-{f}.tfrecord")) as writer:
            for r in range(10):
                writer.write(str(100 * f + r).encode())

    def parse(record):
        return tf.strings.to_number(record, tf.int64) * 2
    files = tf.data.Dataset.list_files(str(tmp_path / "part-*.tfrecord"), shuffle=False)
    return files.interleave(tf.data.TFRecordDataset, cycle_length=2, block_length=3).map(parse).batch(4)


def zipped_and_concatenated() -> tf.data.Dataset:
    def plus_one(x):
        return x + 1
    left = tf.data.Dataset.zip((tf.data.Dataset.range(10).map(plus_one), tf.data.Dataset.range(10, 20)))
    right = tf.data.Dataset.zip((tf.data.Dataset.range(5), tf.data.Dataset.range(5).map(plus_one)))
    return left.concatenate(right)


def first(graph_def, op: str) -> str:
    return named(graph_def, op)[0]


def remove_caches_and_prefetches(graph_def):
    """Splice out every cache and prefetch, one ``remove_node`` at a time."""
    for name in [n.name for n in graph_def.node if n.op in ("CacheDataset", "CacheDatasetV2", "PrefetchDataset")]:
        graph_def = rw.remove_node(graph_def, name)
    return graph_def


# -- serialize and rebuild ---------------------------------------------------------------------------

@pytest.mark.parametrize("make", [range_map_batch, nested_dicts, zipped_and_concatenated])
def test_round_trip_without_edits_keeps_elements_and_spec(make):
    ds = make()
    assert_same_after(ds, rw.graph_def_of(ds))


def test_round_trip_keeps_nested_element_spec():
    ds = nested_dicts()
    out = rebuilt(ds, rw.graph_def_of(ds))
    assert out.element_spec == ds.element_spec
    assert set(out.element_spec) == {"x", "y"} and isinstance(out.element_spec["x"], tuple)


def test_ragged_elements_survive_edits():
    def double(row):
        return row * 2
    rows = tf.ragged.constant([[[1, 2], [3]], [[4]], [[5, 6], [], [7]]])
    ds = tf.data.Dataset.from_tensor_slices(rows).map(double)
    assert isinstance(ds.element_spec, tf.RaggedTensorSpec)
    graph_def = rw.graph_def_of(ds)
    edited = rw.set_parallelism(graph_def, first(graph_def, "MapDataset"), 2)
    edited, _ = rw.set_prefetch(edited, rw.RETVAL, 1)
    out = rebuilt(ds, edited)
    assert out.element_spec == ds.element_spec
    assert [r.to_list() for r in out] == [[[2, 4], [6]], [[8]], [[10, 12], [], [14]]]


def test_user_options_survive_and_rewrite_merges_more():
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.map_parallelization = False
    ds = range_map_batch().with_options(options)
    out = apply_changes(ds, [])
    assert out.options() == ds.options()
    more = tf.data.Options()
    more.threading.private_threadpool_size = 2
    merged = apply_changes(ds, [], more)
    assert merged.options().autotune.enabled is False
    assert merged.options().threading.private_threadpool_size == 2


def test_spec_mismatch_is_refused():
    ds = range_map_batch()
    with pytest.raises(RewriteError, match="element_spec"):
        rw.dataset_from_graph_def(rw.graph_def_of(ds), tf.TensorSpec((None,), tf.float32))


# -- parallelism -------------------------------------------------------------------------------------

def test_parallel_map_and_batch_keep_elements():
    ds = range_map_batch()
    graph_def = rw.graph_def_of(ds)
    edited = rw.set_parallelism(graph_def, first(graph_def, "MapDataset"), 3)
    edited = rw.set_parallelism(edited, first(graph_def, "BatchDatasetV2"), AUTOTUNE)
    map_node, batch_node = node(edited, first(graph_def, "MapDataset")), node(edited, first(graph_def, "BatchDatasetV2"))
    assert (map_node.op, batch_node.op) == ("ParallelMapDatasetV2", "ParallelBatchDataset")
    assert map_node.attr["f"].func.name == node(graph_def, map_node.name).attr["f"].func.name
    assert map_node.attr["deterministic"].s == b"default"
    assert map_node.attr["preserve_cardinality"].b == node(graph_def, map_node.name).attr["preserve_cardinality"].b
    assert const_input(edited, map_node.name, 1) == 3
    assert const_input(edited, batch_node.name, 2) == AUTOTUNE  # batch_size, num_parallel_calls, drop
    assert_same_after(ds, edited)


def test_parallel_map_on_nested_dicts_keeps_elements():
    ds = nested_dicts()
    graph_def = rw.graph_def_of(ds)
    assert_same_after(ds, rw.set_parallelism(graph_def, first(graph_def, "MapDataset"), 2))


def test_parallel_interleave_keeps_order_and_caps_at_cycle_length(tmp_path):
    ds = tfrecords(tmp_path)
    graph_def = rw.graph_def_of(ds)
    name = first(graph_def, "InterleaveDataset")
    edited = rw.set_parallelism(graph_def, name, 8)
    interleave = node(edited, name)
    assert interleave.op == "ParallelInterleaveDatasetV4"
    # inputs: input, cycle_length, block_length, buffer_output_elements, prefetch_input_elements, npc
    assert const_input(edited, name, 1) == 2 and const_input(edited, name, 2) == 3
    assert const_input(edited, name, 5) == 2
    edited = rw.set_parallelism(edited, first(graph_def, "MapDataset"), 2)
    assert_same_after(ds, edited)


def test_already_parallel_ops_get_a_new_value_and_keep_determinism():
    def double(x):
        return x * 2
    ds = tf.data.Dataset.range(30).map(double, num_parallel_calls=2, deterministic=True).batch(4)
    graph_def = rw.graph_def_of(ds)
    name = first(graph_def, "ParallelMapDatasetV2")
    edited = rw.set_parallelism(graph_def, name, 5)
    assert const_input(edited, name, 1) == 5
    assert node(edited, name).attr["deterministic"].s == b"true"
    assert_same_after(ds, edited)


def test_map_and_batch_gets_new_parallelism():
    def double(x):
        return x * 2
    ds = tf.data.Dataset.range(30).apply(tf.data.experimental.map_and_batch(double, 4, num_parallel_calls=1))
    graph_def = rw.graph_def_of(ds)
    name = first(graph_def, "MapAndBatchDataset")
    edited = rw.set_parallelism(graph_def, name, 3)
    assert const_input(edited, name, 2) == 3  # input, batch_size, num_parallel_calls, drop
    assert_same_after(ds, edited)


def test_zip_and_concatenate_with_parallel_branches():
    ds = zipped_and_concatenated()
    graph_def = rw.graph_def_of(ds)
    edited = graph_def
    for name in named(graph_def, "MapDataset"):
        edited = rw.set_parallelism(edited, name, 2)
    edited, _ = rw.set_prefetch(edited, first(graph_def, "ZipDataset"), 2)
    edited, _ = rw.insert_cache(edited, first(graph_def, "ConcatenateDataset"))
    assert_same_after(ds, edited)


@pytest.mark.parametrize("value", [0, -2])
def test_bad_parallelism_is_refused(value):
    graph_def = rw.graph_def_of(range_map_batch())
    with pytest.raises(RewriteError, match="must be >= 1"):
        rw.set_parallelism(graph_def, first(graph_def, "MapDataset"), value)


def test_flat_map_cannot_be_parallelized():
    ds = tf.data.Dataset.range(5).flat_map(tf.data.Dataset.range)
    graph_def = rw.graph_def_of(ds)
    with pytest.raises(RewriteError, match=r"FlatMapDataset/_\d+ \(FlatMapDataset\) cannot be parallelized"):
        rw.set_parallelism(graph_def, first(graph_def, "FlatMapDataset"), 2)


def test_unknown_node_is_named_in_the_error():
    graph_def = rw.graph_def_of(range_map_batch())
    with pytest.raises(RewriteError, match=r"no node named 'MapDataset/_99'.*MapDataset/_\d"):
        rw.set_parallelism(graph_def, "MapDataset/_99", 2)


# -- prefetch ------------------------------------------------------------------------------------------

def test_prefetch_is_inserted_above_the_node_and_resized_not_stacked():
    ds = range_map_batch()
    graph_def = rw.graph_def_of(ds)
    target = first(graph_def, "MapDataset")
    edited, name = rw.set_prefetch(graph_def, target, 3)
    assert re.fullmatch(r"PrefetchDataset/_plumb_\d+", name)
    assert list(node(edited, name).input)[0] == target
    assert node(edited, first(graph_def, "BatchDatasetV2")).input[0] == name
    assert node(edited, name).attr["legacy_autotune"].b is False
    assert_same_after(ds, edited)
    again, same = rw.set_prefetch(edited, target, AUTOTUNE)
    assert same == name and len(named(again, "PrefetchDataset")) == 1
    assert const_input(again, name, 1) == AUTOTUNE and node(again, name).attr["legacy_autotune"].b is True
    assert_same_after(ds, again)


def test_users_prefetch_above_the_node_is_resized():
    ds = range_map_batch().prefetch(1)
    graph_def = rw.graph_def_of(ds)
    edited, name = rw.set_prefetch(graph_def, first(graph_def, "BatchDatasetV2"), 4)
    assert name == first(graph_def, "PrefetchDataset") and const_input(edited, name, 1) == 4
    assert_same_after(ds, edited)


def test_prefetch_at_the_root_goes_below_options():
    ds = range_map_batch().with_options(tf.data.Options())
    graph_def = rw.graph_def_of(ds)
    options_node = first(graph_def, "OptionsDataset")
    assert rw.root_name(graph_def) == first(graph_def, "BatchDatasetV2")
    edited, name = rw.set_prefetch(graph_def, rw.RETVAL, 2)
    assert node(edited, options_node).input[0] == name
    assert node(edited, name).input[0] == first(graph_def, "BatchDatasetV2")
    assert_same_after(ds, edited)


def test_new_names_are_unique():
    graph_def = rw.graph_def_of(range_map_batch())
    edited, a = rw.set_prefetch(graph_def, first(graph_def, "RangeDataset"), 1)
    edited, b = rw.set_prefetch(edited, first(graph_def, "MapDataset"), 1)
    edited, c = rw.insert_cache(edited, first(graph_def, "BatchDatasetV2"))
    names = [n.name for n in edited.node]
    assert len(set(names)) == len(names) and len({a, b, c}) == 3


def test_edits_never_mutate_their_input():
    graph_def = rw.graph_def_of(range_map_batch().cache().prefetch(1))
    before = graph_def.SerializeToString()
    rw.set_parallelism(graph_def, first(graph_def, "MapDataset"), 2)
    rw.set_prefetch(graph_def, first(graph_def, "MapDataset"), 2)
    rw.insert_cache(graph_def, first(graph_def, "MapDataset"))
    rw.remove_node(graph_def, first(graph_def, "PrefetchDataset"))
    rw.dataset_from_graph_def(graph_def, range_map_batch().element_spec)
    assert graph_def.SerializeToString() == before


# -- caches --------------------------------------------------------------------------------------------

def test_memory_cache_is_filled_once_and_read_on_the_next_pass():
    ds = tf.data.Dataset.range(6).map(noisy)
    graph_def = rw.graph_def_of(ds)
    edited, name = rw.insert_cache(graph_def, first(graph_def, "MapDataset"))
    assert node(edited, name).op == "CacheDatasetV2"
    out = rebuilt(ds, edited)
    assert elements(out) == elements(out)  # second iterator reads the cache
    twice = elements(out.repeat(2))
    assert twice[:6] == twice[6:]
    assert elements(ds) != elements(ds)  # without the cache, the map does draw anew


def test_memory_cache_of_a_rebuilt_pipeline_is_its_own():
    """A serialized memory cache names the original's cache; the rebuilt one must not read it."""
    ds = tf.data.Dataset.range(6).map(noisy).cache()
    original = elements(ds)
    assert elements(ds) == original  # the original's cache is full
    out = apply_changes(ds, [])
    mine = elements(out)
    assert mine != original and elements(out) == mine


def test_memory_cache_above_a_deterministic_pipeline_keeps_elements_over_two_passes():
    ds = nested_dicts()
    graph_def = rw.graph_def_of(ds)
    edited, _ = rw.insert_cache(graph_def, first(graph_def, "MapDataset"))
    out = assert_same_after(ds, edited)
    assert elements(out) == elements(ds)


def test_file_cache_is_written_to_the_given_place_and_read_back(tmp_path):
    ds = tf.data.Dataset.range(6).map(noisy)
    graph_def = rw.graph_def_of(ds)
    prefix = str(tmp_path / "cache")
    edited, name = rw.insert_cache(graph_def, rw.RETVAL, filename=prefix)
    out = rebuilt(ds, edited)
    first_pass = elements(out)
    assert list(tmp_path.glob("cache*.index"))
    assert elements(out) == first_pass
    assert rw.insert_cache(edited, name, filename=prefix)[1] == name  # same cache, not a second


def test_file_cache_keeps_elements(tmp_path):
    ds = tfrecords(tmp_path)
    graph_def = rw.graph_def_of(ds)
    edited, _ = rw.insert_cache(graph_def, first(graph_def, "MapDataset"), filename=str(tmp_path / "c"))
    out = assert_same_after(ds, edited)
    assert elements(out) == elements(ds)


def test_users_caches_and_prefetches_are_removed():
    def plus_one(batch):
        return batch + 1
    ds = range_map_batch().cache().prefetch(2).map(plus_one).cache().prefetch(1)
    graph_def = rw.graph_def_of(ds)
    edited = remove_caches_and_prefetches(graph_def)
    assert not [n for n in edited.node if n.op in ("CacheDatasetV2", "CacheDataset", "PrefetchDataset")]
    assert not named(edited, "DummyMemoryCache")
    assert_same_after(ds, edited)


# -- what cannot be serialized ------------------------------------------------------------------------

def test_py_function_rebuilds_here_and_is_refused_only_when_a_portable_graph_is_asked_for():
    def add_one(v):
        return v + 1

    def via_python(x):
        return tf.py_function(add_one, [x], tf.int64)
    ds = tf.data.Dataset.range(3).map(via_python)
    assert elements(apply_changes(ds, [])) == [1, 2, 3]  # the function lives in this process
    with pytest.raises(RewriteError, match=r"MapDataset/_\d+.*py_function cannot be serialized"):
        rw.graph_def_of(ds, allow_external_state=False)
    with pytest.raises(RewriteError, match="py_function cannot be serialized"):
        apply_changes(ds, [], allow_external_state=False)


def test_variables_rebuild_live_and_a_portable_graph_names_the_op():
    offset = tf.Variable(1, dtype=tf.int64)

    def shift(x):
        return x + offset
    ds = tf.data.Dataset.range(3).map(shift)
    out = apply_changes(ds, [])
    offset.assign(10)  # the rebuilt pipeline reads the user's variable, not a copy
    assert elements(out) == [10, 11, 12]
    with pytest.raises(RewriteError, match="ReadVariableOp"):
        rw.graph_def_of(ds, allow_external_state=False)


def test_stateful_random_ops_rebuild():
    ds = tf.data.Dataset.range(4).map(noisy)
    assert len(elements(apply_changes(ds, []))) == 4


def test_random_crop_box_sampler_rebuilds_with_fresh_state():
    """SampleDistortedBoundingBoxV2 (the detection crop) keeps its state in its kernel."""
    def crop(x):
        image = tf.fill([32, 32, 3], tf.cast(x, tf.uint8))
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.shape(image), bounding_boxes=tf.constant([[[0.1, 0.1, 0.6, 0.6]]]), min_object_covered=0.1)
        return tf.image.resize(tf.slice(image, begin, size), [8, 8])
    ds = tf.data.Dataset.range(6).map(crop)
    graph_def = rw.graph_def_of(ds)
    edited = rw.set_parallelism(graph_def, first(graph_def, "MapDataset"), 2)
    out = [np.asarray(e) for e in rebuilt(ds, edited).as_numpy_iterator()]
    assert [e.shape for e in out] == [(8, 8, 3)] * 6 and [int(e[0, 0, 0]) for e in out] == list(range(6))
    assert not pipeline_of(ds).problems  # traceable and rewritable: no "not serializable" note


# -- a plan's changes ------------------------------------------------------------------------------------

def change(what: str, node: str, value=None) -> Change:
    return Change(what, node, node, value, "test")


def test_apply_changes_in_order_and_run_again(tmp_path):
    ds = tfrecords(tmp_path).cache().prefetch(1)
    graph_def = rw.graph_def_of(ds)
    changes = [
        change("prefetch", rw.RETVAL, AUTOTUNE),
        change("cache", first(graph_def, "MapDataset"), ""),
        change("parallelism", first(graph_def, "InterleaveDataset"), 2),
        change("parallelism", first(graph_def, "MapDataset"), AUTOTUNE),
        change("parallelism", first(graph_def, "BatchDatasetV2"), 2),
        change("remove", first(graph_def, "PrefetchDataset")),
    ]
    out = apply_changes(ds, changes)
    assert elements(out) == elements(ds) and out.element_spec == ds.element_spec
    again = apply_changes(out, [change("prefetch", rw.RETVAL, 2)])  # a rebuilt pipeline serializes again
    assert elements(again) == elements(ds)


# -- random pipelines, random edits -------------------------------------------------------------------

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("map"), st.integers(1, 5)),
        st.tuples(st.just("filter"), st.integers(2, 4)),
        st.tuples(st.just("batch"), st.integers(1, 4), st.booleans()),
        st.tuples(st.just("unbatch")),
        st.tuples(st.just("take"), st.integers(0, 25)),
        st.tuples(st.just("skip"), st.integers(0, 5)),
        st.tuples(st.just("prefetch"), st.integers(1, 3)),
        st.tuples(st.just("cache")),
    ),
    min_size=1, max_size=6,
)


def build(steps) -> tf.data.Dataset:
    ds, rank = tf.data.Dataset.range(24), 0
    ragged = False  # the elements' first dimension may differ: the first batch kept a short remainder
    for step in steps:
        kind = step[0]
        if kind == "map":
            ds = ds.map(lambda x, k=step[1]: x * k + 1)
        elif kind == "filter":
            ds = ds.filter(lambda x, m=step[1]: tf.reduce_sum(x) % m != 0)
        elif kind == "batch":
            # Batches of batches must have equal shapes: drop ragged remainders there, and batch
            # one at a time elements whose first batch kept a short remainder (take(3).batch(2)
            # .batch(2) would stack a [2] and a [1]: a pipeline that raises as written).
            size, drop = (1 if ragged else step[1]), step[2] or rank > 0
            ragged = ragged or (rank == 0 and not drop and size > 1)
            ds, rank = ds.batch(size, drop_remainder=drop), rank + 1
        elif kind == "unbatch" and rank > 0:
            ds, rank = ds.unbatch(), rank - 1
            ragged = ragged and rank > 0
        elif kind == "take":
            ds = ds.take(step[1])
        elif kind == "skip":
            ds = ds.skip(step[1])
        elif kind == "prefetch":
            ds = ds.prefetch(step[1])
        elif kind == "cache":
            ds = ds.cache()
    return ds


PARALLELIZABLE = ("MapDataset", "BatchDatasetV2", "ParallelMapDatasetV2", "ParallelBatchDataset")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS, data=st.data())
def test_random_edits_on_random_pipelines_keep_elements(steps, data):
    ds = build(steps)
    expected = elements(ds)
    graph_def = rw.graph_def_of(ds)
    for _ in range(data.draw(st.integers(0, 4), label="number of edits")):
        datasets = [n.name for n in graph_def.node if "Dataset" in n.op] + [rw.RETVAL]
        tunable = [n.name for n in graph_def.node if n.op in PARALLELIZABLE]
        kinds = ["prefetch", "cache", "remove"] + (["parallelism"] if tunable else [])
        kind = data.draw(st.sampled_from(kinds), label="edit")
        if kind == "parallelism":
            name = data.draw(st.sampled_from(tunable), label="node")
            graph_def = rw.set_parallelism(graph_def, name, data.draw(st.sampled_from([1, 2, 3, AUTOTUNE])))
        elif kind == "prefetch":
            name = data.draw(st.sampled_from(datasets), label="after")
            graph_def, _ = rw.set_prefetch(graph_def, name, data.draw(st.sampled_from([0, 1, 2, AUTOTUNE])))
        elif kind == "cache":
            graph_def, _ = rw.insert_cache(graph_def, data.draw(st.sampled_from(datasets), label="after"))
        else:
            graph_def = remove_caches_and_prefetches(graph_def)
    out = rebuilt(ds, graph_def)
    assert out.element_spec == ds.element_spec
    assert elements(out) == expected
