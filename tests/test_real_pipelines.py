"""Pipelines as people write them, made on the spot: a ``from_generator`` reader, a
``py_function`` tokenizer, Keras ``TextVectorization`` / ``StringLookup`` (keras-io's text
classification shape, ending in ``.cache().prefetch(10)``), a shuffle under the user's cache
(seeded and unseeded) and a short evaluation epoch.

Each is traced, stepped and optimized — nothing refused — and what plumbkit hands back yields
the same elements: in the same order when the pipeline is deterministic, the same multiset per
epoch when it shuffles. Short traces (0.5 s: what is checked here is what comes back, not a
figure); ~50 s in all on 2 cores.
"""

from __future__ import annotations

import collections

import keras
import numpy as np
import pytest
import tensorflow as tf

import plumbkit
from plumbkit.engine.restarts import measure_restarts, with_counted_epoch
from plumbkit.tfdata.rebuild import apply_changes

from conftest import BRIEF

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)

WORDS = "the quick brown fox jumps over a lazy dog while data flows through the input pipeline".split()


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(3, 14))) for _ in range(n)]


# -- the pipelines --------------------------------------------------------------------------------

def generator_reader() -> tf.data.Dataset:
    """A custom reader in Python (a CSV / audio loader's shape): features and a label per row."""
    def rows():
        for i in range(400):
            yield np.full([16], i % 23, np.float32), np.int64(i % 3)

    def standardize(features, label):
        return (features - 11.0) / 7.0, label
    ds = tf.data.Dataset.from_generator(rows, output_signature=(tf.TensorSpec([16], tf.float32),
                                                                 tf.TensorSpec([], tf.int64)))
    return ds.map(standardize).batch(16)


VOCAB = {w: i + 1 for i, w in enumerate(WORDS)}


def python_tokenizer() -> tf.data.Dataset:
    """A Python tokenizer through ``tf.py_function`` (a sentencepiece / custom vocab shape)."""
    def tokenize(line):
        ids = [VOCAB.get(w, 0) for w in line.numpy().decode().split()][:12]
        return np.array(ids, np.int64)

    def to_ids(line):
        ids = tf.py_function(tokenize, [line], tf.int64)
        return tf.reshape(ids, [-1])
    ds = tf.data.Dataset.from_tensor_slices(sentences(600))
    return ds.map(to_ids).padded_batch(32, padded_shapes=[12])


def keras_text_classification() -> tf.data.Dataset:
    """keras-io's text classification from scratch: a custom standardization, TextVectorization
    in the tf.data pipeline, ``.cache().prefetch(buffer_size=10)``."""
    texts, labels = sentences(640, seed=1), [i % 2 for i in range(640)]
    raw_train_ds = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(32)

    def custom_standardization(input_data):
        lowercase = tf.strings.lower(input_data)
        return tf.strings.regex_replace(lowercase, "<br />", " ")
    vectorize_layer = keras.layers.TextVectorization(standardize=custom_standardization, max_tokens=64,
                                                     output_mode="int", output_sequence_length=16)
    vectorize_layer.adapt(raw_train_ds.map(lambda x, y: x))

    def vectorize_text(text, label):
        text = tf.expand_dims(text, -1)
        return vectorize_layer(text), label
    train_ds = raw_train_ds.map(vectorize_text)
    return train_ds.cache().prefetch(buffer_size=10)


def string_lookup() -> tf.data.Dataset:
    """Tokens mapped to ids with a StringLookup layer (a vocabulary file's shape)."""
    lookup = keras.layers.StringLookup(vocabulary=WORDS[:10])

    def ids(line):
        return lookup(tf.strings.split(line)[:8])
    return tf.data.Dataset.from_tensor_slices(sentences(500, seed=2)).map(ids).padded_batch(25, padded_shapes=[8])


def layer_mapped_directly() -> tf.data.Dataset:
    """A Keras layer given to ``map`` itself (``ds.batch(32).map(vectorize_layer)``), as
    keras-io's examples often write it."""
    layer = keras.layers.TextVectorization(max_tokens=64, output_sequence_length=12)
    layer.adapt(sentences(200, seed=3))
    return tf.data.Dataset.from_tensor_slices(sentences(480, seed=3)).batch(24).map(layer)


def running_sum() -> tf.data.Dataset:
    """A ``scan`` (a running total, state carried from element to element) under a cacheable
    map: the plan's guarded cache goes above the user's own scan."""
    return (tf.data.Dataset.range(2000).scan(tf.constant(0, tf.int64), lambda s, x: (s + x, s + x))
            .map(lambda x: tf.math.log1p(tf.cast(x, tf.float32))).batch(50))


def heavy(x):
    m = tf.fill([24, 24], tf.sin(tf.cast(x, tf.float32)))
    for _ in range(8):
        m = tf.sin(tf.matmul(m, m))
    return tf.reduce_sum(m)


def shuffled_under_cache(seed: int | None) -> tf.data.Dataset:
    """The user's shuffle with their own cache above it (an epoch order frozen on purpose)."""
    return (tf.data.Dataset.range(300).map(heavy).shuffle(64, seed=seed).cache()
            .map(lambda x: x * 2.0).batch(10))


def short_epoch() -> tf.data.Dataset:
    """A small evaluation set: one epoch is a fraction of a second."""
    return tf.data.Dataset.range(240).map(heavy).batch(12)


PIPELINES = {
    "from_generator reader": (generator_reader, True),
    "py_function tokenizer": (python_tokenizer, True),
    "keras-io TextVectorization": (keras_text_classification, True),
    "StringLookup": (string_lookup, True),
    "seeded shuffle under a user cache": (lambda: shuffled_under_cache(7), False),
    "unseeded shuffle under a user cache": (lambda: shuffled_under_cache(None), False),
    "short epoch": (short_epoch, True),
    "Keras layer mapped directly": (layer_mapped_directly, True),
    "running sum (scan)": (running_sum, True),
}


# -- comparing what they yield ---------------------------------------------------------------------

def epoch(ds: tf.data.Dataset) -> list:
    return [tf.nest.map_structure(lambda t: np.asarray(t).tolist(), e) for e in ds.as_numpy_iterator()]


def multiset(batches: list) -> collections.Counter:
    """The elements of an epoch regardless of order (rows of every batch)."""
    rows = collections.Counter()
    for batch in batches:
        for row in np.asarray(batch).reshape(len(batch), -1).tolist():
            rows[tuple(row)] += 1
    return rows


def two_epochs(ds: tf.data.Dataset) -> list[list]:
    """Two epochs of ``ds``: a filled cache must give the same again."""
    return [epoch(ds) for _ in range(2)]


def assert_same_elements(mine: tf.data.Dataset, theirs: list[list], deterministic: bool) -> None:
    """``mine`` yields ``theirs`` (two epochs of a fresh copy of the user's pipeline, read once
    and compared with each of the datasets plumbkit hands back)."""
    for a, b in zip(two_epochs(mine), theirs):
        if deterministic:
            assert a == b
        else:
            assert multiset(a) == multiset(b) and len(a) == len(b)


@pytest.mark.parametrize("name", list(PIPELINES))
def test_traced_stepped_and_optimized_with_the_same_elements(name):
    make, deterministic = PIPELINES[name]
    step = plumbkit.step(make, seconds=0.5)
    trace = step.before  # the public trace, as plumbkit.trace makes it
    assert trace.throughput > 0 and not trace.pipeline.problems
    assert not any("cannot" in n and "rebuil" in n for n in trace.notes)
    if name == "py_function tokenizer":  # its Python op named, deterministic, and so no bar to a cache
        assert any("['tokenize']" in n and "deterministic" in n for n in trace.notes), trace.notes
        assert trace.op("padded_batch(32)").cacheable
    if name == "Keras layer mapped directly":  # named by its class, not its module path
        assert [o.label for o in trace.ops if o.kind == "map"] == ["map(TextVectorization)"], trace.ops
    if step.after is None:  # nothing to step: every tunable operator sits under a filled cache
        idle = [o for o in step.before.ops if "not running" in o.note]
        assert idle and all(o.kind != "map" or "not running" in o.note for o in step.before.ops)
    yours = two_epochs(make())
    assert_same_elements(step.dataset, yours, deterministic)
    plan = plumbkit.optimize(make, seconds=0.5, compare=False, protocol=BRIEF)
    assert plan.measured_throughput > 0
    assert_same_elements(plan.dataset, yours, deterministic)
    # what the plan proposed, applied whether or not it measured faster here
    proposed = apply_changes(make(), plan.proposed_changes, allow_external_state=True)
    assert_same_elements(proposed, yours, deterministic)


def test_a_short_epoch_is_traced_over_repeated_epochs_and_names_its_bottleneck():
    trace = plumbkit.trace(short_epoch, seconds=1.5, min_seconds=1.0)
    note = next(n for n in trace.notes if n.startswith("finite pipeline"))
    assert "one epoch is 20 minibatches" in note and "repeated epochs" in note
    assert trace.elapsed >= 1.0  # not the fraction of a second one epoch takes
    assert trace.bottleneck is not None and trace.bottleneck.label == "map(heavy)"


def test_operators_under_a_filled_user_cache_are_labelled_not_running():
    trace = plumbkit.trace(lambda: shuffled_under_cache(7), seconds=1.5, min_seconds=1.0)
    below = trace.op("map(heavy)")
    assert "not running: below the filled cache" in below.note
    assert "static optimizations" not in below.note and below.elements_per_second == 0
    assert trace.bottleneck is None or trace.bottleneck.label != "map(heavy)"


def test_operators_that_never_ran_are_labelled_so():
    def first(x):
        return x + 1

    def never(x):
        return x * 2
    ds = tf.data.Dataset.range(10**9).map(first).concatenate(tf.data.Dataset.range(5).map(never)).batch(4)
    trace = plumbkit.trace(ds, seconds=1.0, min_seconds=0.5)
    skipped = trace.op("map(never)")
    assert skipped.note == "did not run during the trace" and skipped.elements_per_second == 0
    assert trace.op("map(first)").note != "did not run during the trace"


def counted(writes: bool, reads: bool = True) -> tuple[tf.data.Dataset, tf.Variable]:
    """A map that counts the elements it sees in a variable of yours (``writes``), the same map
    reading it only (``reads``: its elements are the work plus 0 x the count), or neither:
    finite, deterministic, cacheable but for the variable."""
    seen = tf.Variable(0, dtype=tf.int64)

    def count(x):
        if writes:
            seen.assign_add(1)
        work = tf.reduce_sum(tf.sin(tf.cast(tf.range(x % 200), tf.float32)))
        return work + tf.cast(0 * seen.read_value(), tf.float32) if reads else work
    return tf.data.Dataset.range(2000).map(count).batch(50), seen


def test_a_map_that_writes_your_state_is_never_cached_above():
    """A cache above a map that assigns a variable would run it in the first epoch only (a
    counter of yours stops counting). Found trying user shapes (session 58): the plan cached
    ``batch(50)`` above such a map."""
    ds, seen = counted(writes=True)
    trace = plumbkit.trace(ds, seconds=0.5, min_seconds=0.3)
    mapped = trace.op("map(count)")
    assert not mapped.cacheable and mapped.cache_note.startswith("writes state: map(count)"), mapped.cache_note
    assert not trace.op("batch(50)").cacheable
    assert any("change your variables or tables ['map(count)']" in n for n in trace.notes), trace.notes
    plan = plumbkit.optimize(lambda: counted(writes=True)[0], seconds=0.5, compare=False, protocol=BRIEF)
    caches = [c.where for c in plan.proposed_changes if c.what == "cache"]
    assert caches in ([], ["range"]), caches  # below the map, never above it
    # what the plan hands back counts every element of every epoch
    ds, seen = counted(writes=True)
    rebuilt = apply_changes(ds, plan.proposed_changes, allow_external_state=True)
    for _ in range(2):
        for _ in rebuilt:
            pass
    assert int(seen.numpy()) == 2 * 2000
    # negative control: the same map touching no variable is cached above, and no option is
    # offered for it (the writer above is never offered either: a cache stops its writes)
    plain, _ = counted(writes=False, reads=False)
    assert plumbkit.trace(plain, seconds=0.5, min_seconds=0.3).op("batch(50)").cacheable
    assert not any(o.title.startswith("cache at") for o in plan.options), plan.options


def scaled_by(knob: tf.Variable) -> tf.data.Dataset:
    """A map whose elements follow a variable of yours (a curriculum's knob, an augmentation's
    strength a callback changes between epochs): 2,000 elements of work, times ``knob``."""
    def scale(x):
        work = tf.reduce_sum(tf.sin(tf.cast(tf.range(x % 200), tf.float32)))
        return work * 0 + tf.cast(x, tf.float32) * knob
    return tf.data.Dataset.range(2000).map(scale).batch(50)


def test_a_map_that_reads_your_variable_is_never_cached_above():
    """A cache above a map that reads a variable replays the values of its first epoch: a
    variable your training changes between epochs no longer reaches the elements. Found trying
    user shapes (session 59): the plan cached ``batch(50)`` above such a map, and the epoch after
    ``knob.assign(2.0)`` still yielded the first epoch's values."""
    knob = tf.Variable(1.0)
    trace = plumbkit.trace(scaled_by(knob), seconds=0.5, min_seconds=0.3)
    mapped = trace.op("map(scale)")
    assert not mapped.cacheable and mapped.cache_note.startswith("reads state: map(scale)"), mapped.cache_note
    assert not trace.op("batch(50)").cacheable
    assert any("read your variables or tables ['map(scale)']" in n for n in trace.notes), trace.notes
    plan = plumbkit.optimize(lambda: scaled_by(knob), seconds=0.5, compare=False, protocol=BRIEF)
    caches = [c.where for c in plan.proposed_changes if c.what == "cache"]
    assert caches in ([], ["range"]), caches  # below the map, never above it
    # what the plan hands back follows the variable from one epoch to the next
    rebuilt = apply_changes(scaled_by(knob), plan.proposed_changes, allow_external_state=True)
    first = np.concatenate([b.numpy() for b in rebuilt])
    knob.assign(2.0)
    second = np.concatenate([b.numpy() for b in rebuilt])
    np.testing.assert_allclose(first, np.arange(2000))
    np.testing.assert_allclose(second, 2 * np.arange(2000))
    # the cache above it is offered, never applied, saying what it replays; turned on, it does
    # replay the first epoch (the negative control: what the plan did before this rule)
    option = next(o for o in plan.options if o.title.startswith("cache at batch(50) in memory, if what map(scale)"))
    assert [(c.what, c.where) for c in option.changes] == [("cache", "batch(50)")], option
    assert option.predicted_throughput > plan.prediction.throughput and "replays the values" in option.note
    assert f"    - {option}" in str(plan) and str(option) in plan._repr_html_().replace("&#x27;", "'")  # every view
    knob.assign(1.0)
    frozen = apply_changes(scaled_by(knob), [*plan.proposed_changes, *option.changes], allow_external_state=True)
    assert np.concatenate([b.numpy() for b in frozen])[1] == 1.0
    knob.assign(2.0)
    assert np.concatenate([b.numpy() for b in frozen])[1] == 1.0
    assert "# plumbkit option: cache at batch(50)" in plan.rewrite_source(
        "ds = tf.data.Dataset.range(2000).map(scale).batch(50)\n")


def looked_up(table) -> tf.data.Dataset:
    """Words mapped to ids through ``table``, batched: deterministic, finite."""
    def ids(words):
        return tf.reshape(table.lookup(words), [-1])
    return tf.data.Dataset.from_tensor_slices(sentences(400)).map(tf.strings.split).map(ids).padded_batch(20)


def test_a_table_that_can_change_is_read_each_epoch_and_a_static_one_is_cached_above():
    """A ``MutableHashTable`` you may fill while training is state: nothing that looks it up is
    cached above. A ``StaticHashTable`` (and Keras' lookup layers, built on one) cannot change:
    what looks it up stays cacheable (the negative control)."""
    vocabulary = sorted(set(WORDS))
    keys = tf.constant(vocabulary)
    ids = tf.range(1, len(vocabulary) + 1, dtype=tf.int64)
    mutable = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, default_value=0)
    mutable.insert(keys, ids)
    trace = plumbkit.trace(looked_up(mutable), seconds=0.5, min_seconds=0.3)
    assert not trace.op("padded_batch(20)").cacheable, trace.op("padded_batch(20)").cache_note
    assert trace.op("padded_batch(20)").cache_note.startswith("reads state: map(ids)")
    static = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, ids), default_value=0)
    assert plumbkit.trace(looked_up(static), seconds=0.5, min_seconds=0.3).op("padded_batch(20)").cacheable


def padded_rows(rows_per_epoch: int | None):
    """A generator of dict rows of varying length (``None``: it never ends), mapped and padded:
    TensorFlow cannot tell its length."""
    def rows():
        i = 0
        while rows_per_epoch is None or i < rows_per_epoch:
            yield {"ids": np.arange(i % 17, dtype=np.int32), "label": np.int32(i % 2)}
            i += 1
    sig = {"ids": tf.TensorSpec([None], tf.int32), "label": tf.TensorSpec([], tf.int32)}
    ds = tf.data.Dataset.from_generator(rows, output_signature=sig)
    ds = ds.map(lambda d: {"ids": d["ids"] * 2 + 1, "label": d["label"]})
    return ds.padded_batch(32, padding_values={"ids": -1, "label": 0})


def test_a_generator_of_unknown_length_is_cached_once_its_epoch_is_counted():
    """A finite generator's epoch has no length TensorFlow can tell: the trace alone leaves every
    operator above it "size unknown". The optimizer counts one epoch (the restarts it measures)
    and sizes each operator from it: the plan caches the padded minibatches, and yields the same
    elements in order. Found trying user shapes (session 59): the plan cached the generator's
    own ``from_tensors`` and nothing else (179 minibatches/s predicted; now ~57x measured)."""
    trace = plumbkit.trace(lambda: padded_rows(3000), seconds=0.5, min_seconds=0.3)
    assert trace.op("padded_batch(32)").cache_note == "size unknown"  # the negative control: not counted
    plan = plumbkit.optimize(lambda: padded_rows(3000), seconds=0.5, compare=False, protocol=BRIEF)
    caches = [c.where for c in plan.proposed_changes if c.what == "cache"]
    assert caches == ["padded_batch(32)"], str(plan)
    assert any("one epoch was counted, 94 minibatches" in n for n in plan.trace.notes), plan.trace.notes
    ours = apply_changes(padded_rows(3000), plan.proposed_changes, allow_external_state=True)
    for _ in range(2):  # the first epoch fills the cache, the second reads it
        assert [e["ids"].numpy().tobytes() for e in ours] == [e["ids"].numpy().tobytes() for e in padded_rows(3000)]
    # a generator that never ends has no epoch to count: its trace stays as it was
    endless = plumbkit.trace(lambda: padded_rows(None), seconds=0.3, min_seconds=0.2, calibrate=False)
    assert with_counted_epoch(endless, measure_restarts(lambda: padded_rows(None), endless)) is endless
