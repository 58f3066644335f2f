"""Rebuilding in the user's process keeps the user's *live* state (no mocks; real TensorFlow).

A serialized pipeline holds copies of the resources its functions capture; plumbkit's rebuild
binds the user's own (``plumbkit.tfdata.live_state``), keeps Python functions and generators
alive, and reads Python functions for randomness. Each test rebuilds a pipeline, then changes
or reads the state from outside and checks the rebuilt pipeline sees the same. ~5 s.
"""

from __future__ import annotations

import gc

import keras
import numpy as np
import pytest
import tensorflow as tf

from plumbkit.model.plan import Change
from plumbkit.tfdata.graph import pipeline_of
from plumbkit.tfdata.rebuild import apply_changes

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)


def values(ds: tf.data.Dataset) -> list:
    return [tf.nest.map_structure(lambda t: np.asarray(t).tolist(), e) for e in ds.as_numpy_iterator()]


def parallel_and_prefetched(ds: tf.data.Dataset) -> tf.data.Dataset:
    """The optimizer's kinds of change: every map parallel, a prefetch at the root."""
    p = pipeline_of(ds)
    changes = [Change("parallelism", o.label, o.name, 2, "t") for o in p if o.kind == "map"]
    changes.append(Change("prefetch", p[p.root].label, p.root, 2, "t"))
    return apply_changes(ds, changes)


def test_a_variable_the_program_changes_is_read_live():
    scale = tf.Variable(1, dtype=tf.int64)
    ds = tf.data.Dataset.range(4).map(lambda x: x * scale)
    out = parallel_and_prefetched(ds)
    assert values(out) == [0, 1, 2, 3]
    scale.assign(10)  # e.g. a curriculum the training loop advances
    assert values(out) == values(ds) == [0, 10, 20, 30]


def test_state_the_pipeline_writes_lands_in_the_users_variable():
    seen = tf.Variable(0, dtype=tf.int64)

    def count(x):
        seen.assign_add(1)
        return x
    out = apply_changes(tf.data.Dataset.range(5).map(count), [])
    values(out)
    assert int(seen.numpy()) == 5


def test_a_mutable_table_filled_later_is_seen():
    table = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, default_value=-1)
    ds = tf.data.Dataset.from_tensor_slices(["a", "b"]).map(table.lookup)
    out = parallel_and_prefetched(ds)
    table.insert(tf.constant(["b"]), tf.constant([7], tf.int64))
    assert values(out) == [-1, 7]


def test_a_random_generator_advances_as_one_stream():
    gen = tf.random.Generator.from_seed(3)
    out = apply_changes(tf.data.Dataset.range(3).map(lambda x: gen.uniform(())), [])
    before = gen.state.numpy().copy()
    first, second = values(out), values(out)
    assert first != second  # the stream moves on, as the user's own pipeline's would
    assert not np.array_equal(gen.state.numpy(), before)  # ...and it is the user's generator


def test_python_state_and_generators_survive_the_users_dataset():
    calls = []

    def tokenize(s):
        calls.append(1)
        return np.array([len(w) for w in s.numpy().decode().split()], np.int64)

    def lines():
        yield from ("a bb ccc", "dddd e")

    def make():
        ds = tf.data.Dataset.from_generator(lines, output_signature=tf.TensorSpec((), tf.string))
        return ds.map(lambda s: tf.py_function(tokenize, [s], tf.int64))
    out = parallel_and_prefetched(make())
    gc.collect()  # the user's Dataset is gone; its Python functions must not be
    assert values(out) == [[1, 2, 3], [4, 1]] and len(calls) == 2
    again = apply_changes(out, [])  # a rebuilt pipeline rebuilds again, same state
    assert values(again) == [[1, 2, 3], [4, 1]] and len(calls) == 4


def test_rebuilding_a_rebuilt_pipeline_keeps_the_live_binding():
    offset = tf.Variable(0, dtype=tf.int64)
    once = apply_changes(tf.data.Dataset.range(3).map(lambda x: x + offset), [])
    twice = parallel_and_prefetched(once.map(lambda x: x * 2))
    offset.assign(5)
    assert values(twice) == [10, 12, 14]


def test_keras_preprocessing_layers_rebuild_with_the_same_vocabulary_and_weights():
    vectorize = keras.layers.TextVectorization(max_tokens=50, output_sequence_length=5)
    vectorize.adapt(tf.data.Dataset.from_tensor_slices(["the cat sat", "a dog ran far", "the dog sat"]))
    lookup = keras.layers.StringLookup(vocabulary=["cat", "dog"])
    norm = keras.layers.Normalization()
    norm.adapt(np.array([[1.0], [3.0]], np.float32))
    texts = tf.data.Dataset.from_tensor_slices(["the dog ran", "cat sat on a mat"])
    for ds in (texts.batch(2).map(vectorize), texts.map(tf.strings.split).map(lookup),
               tf.data.Dataset.from_tensor_slices(np.array([[2.0], [5.0]], np.float32)).map(norm)):
        assert values(parallel_and_prefetched(ds)) == values(ds)


def test_python_functions_are_read_for_randomness():
    def tokenize(s):
        return np.int64(len(s.numpy()))

    def jitter(x):
        return x + np.random.uniform(-1, 1)

    ds = tf.data.Dataset.from_tensor_slices(["ab", "c"]).map(lambda s: tf.py_function(tokenize, [s], tf.int64))
    p = pipeline_of(ds)
    assert not any(op.random for op in p)
    assert any("['tokenize']" in r and "deterministic" in r for r in p.remarks)
    noisy = ds.map(lambda x: tf.numpy_function(jitter, [tf.cast(x, tf.float64)], tf.float64))
    q = pipeline_of(noisy)
    assert q.by_label("map(lambda)#2").random and not q.by_label("map(lambda)").random
    assert any("jitter uses random, uniform" in r for r in q.remarks)


@pytest.mark.parametrize("portable", [False])
def test_a_portable_graph_is_still_refused_for_python_ops(portable):
    from plumbkit.tfdata.graph_edits import RewriteError
    ds = tf.data.Dataset.range(3).map(lambda x: tf.py_function(lambda v: v, [x], tf.int64))
    with pytest.raises(RewriteError, match="py_function cannot be serialized"):
        apply_changes(ds, [], allow_external_state=portable)
