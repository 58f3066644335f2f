"""Property: whatever pipeline a user builds from the supported operators, plumbkit's rebuild
with the optimizer's kinds of change keeps its elements.

Hypothesis generates pipelines from sources (range, nested dicts, ragged rows, a Python
generator, a zip of two branches) and steps (maps — TensorFlow, ``py_function`` and
``numpy_function`` —, filters, batches, padded batches, interleaves, seeded shuffles, repeats,
takes, the user's own caches and prefetches), then applies what the optimizer changes
(parallelism, a cache, prefetches, the user's caches and prefetches removed, ``tf.data.Options``)
through :func:`plumbkit.tfdata.rebuild.apply_changes` and compares two epochs with a fresh copy
of the user's pipeline, in order (seeded shuffles repeat exactly). Six of them also go through
the full measured :func:`plumbkit.optimize` with short traces.

Counts: 200 rebuilt pipelines (~28 s on 2 cores), 6 optimized (~28 s: each optimize's own
measurements, not the pipeline, set its cost; the six drawn are six different shapes).
``derandomize`` keeps CI's draw the same from run to run.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import plumbkit
from plumbkit.model.pipeline import AUTOTUNE
from plumbkit.model.plan import Change
from plumbkit.tfdata.graph import pipeline_of
from plumbkit.tfdata.rebuild import apply_changes

from conftest import BRIEF

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)

N = 24  # elements at the source: small, so a few hundred pipelines stay fast

# -- building pipelines ----------------------------------------------------------------------------

SOURCES = ("range", "nested", "ragged", "generator", "zip")

STEP = st.one_of(
    st.tuples(st.just("map"), st.integers(1, 4)),
    st.tuples(st.just("py_function"), st.integers(1, 4)),
    st.tuples(st.just("numpy_function"), st.integers(1, 4)),
    st.tuples(st.just("filter"), st.integers(2, 4)),
    st.tuples(st.just("batch"), st.integers(1, 4), st.booleans()),
    st.tuples(st.just("padded_batch"), st.integers(1, 4)),
    st.tuples(st.just("interleave"), st.integers(1, 3), st.integers(1, 2)),
    st.tuples(st.just("shuffle"), st.integers(2, 8), st.integers(0, 99), st.booleans()),
    st.tuples(st.just("repeat"), st.integers(1, 2)),
    st.tuples(st.just("take"), st.integers(1, 30)),
    st.tuples(st.just("cache")),
    st.tuples(st.just("prefetch"), st.integers(1, 2)),
)
PIPELINE = st.tuples(st.sampled_from(SOURCES), st.lists(STEP, min_size=1, max_size=6))


def source(kind: str) -> tf.data.Dataset:
    if kind == "range":
        return tf.data.Dataset.range(N)
    if kind == "nested":
        return tf.data.Dataset.from_tensor_slices(
            {"a": tf.range(N, dtype=tf.int64), "b": (tf.reshape(tf.range(2 * N, dtype=tf.float32), (N, 2)),)})
    if kind == "ragged":
        return tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[i] * (i % 4) for i in range(N)], tf.int64))
    if kind == "generator":
        return tf.data.Dataset.from_generator(lambda: iter(range(N)), output_signature=tf.TensorSpec((), tf.int64))
    left = tf.data.Dataset.range(N)
    return tf.data.Dataset.zip((left, tf.data.Dataset.range(N).map(quick(lambda x: x * 3))))


quick = tf.autograph.experimental.do_not_convert  # plain TF code: skip autograph's conversion


def _leaf(element) -> tf.Tensor:
    """An int64 scalar summarizing the element (for filters and keys)."""
    first = tf.nest.flatten(element, expand_composites=False)[0]
    return tf.cast(tf.reduce_sum(first), tf.int64)


def _plus(k: int):
    @quick
    def plus(*element):
        element = element[0] if len(element) == 1 else element
        return tf.nest.map_structure(lambda t: t + tf.cast(k, t.dtype), element)
    return plus


def _python(k: int, numpy: bool):
    def times(v):
        return np.int64(v * k + 1) if numpy else v * k + 1

    @quick
    def op(x):
        y = tf.numpy_function(times, [x], tf.int64) if numpy else tf.py_function(times, [x], tf.int64)
        return tf.ensure_shape(y, [])
    return op


def build(pipeline) -> tf.data.Dataset:
    """The user's pipeline for a drawn description (steps that do not fit the element are skipped)."""
    kind, steps = pipeline
    ds = source(kind)
    scalar, rank, vector = kind in ("range", "generator"), 0, False
    for step in steps:
        name = step[0]
        if name == "map":
            ds = ds.map(_plus(step[1]))
        elif name in ("py_function", "numpy_function") and scalar:
            ds = ds.map(_python(step[1], name == "numpy_function"))
        elif name == "filter" and rank == 0:
            ds = ds.filter(quick(lambda *e, m=step[1]: _leaf(e) % m != 0))
        elif name == "batch" and kind == "ragged" and rank == 0:
            ds, rank = ds.ragged_batch(step[1], drop_remainder=step[2]), 1  # rows of varying length
        elif name == "batch" and not vector:
            ds = ds.batch(step[1], drop_remainder=step[2] or rank > 0)
            scalar, rank = False, rank + 1
        elif name == "padded_batch" and scalar:
            ds = ds.map(quick(lambda x: tf.range(x % 5))).padded_batch(step[1])  # variable-length rows
            scalar, rank, vector = False, 1, True  # padded to different lengths: no batch above
        elif name == "interleave" and scalar:
            ds = ds.interleave(quick(lambda x: tf.data.Dataset.range(x % 3 + 1).map(quick(lambda y, x=x: x * 10 + y))),
                               cycle_length=step[1], block_length=step[2])
        elif name == "shuffle":
            ds = ds.shuffle(step[1], seed=step[2], reshuffle_each_iteration=step[3])
        elif name == "repeat":
            ds = ds.repeat(step[1])
        elif name == "take":
            ds = ds.take(step[1])
        elif name == "cache":
            ds = ds.cache()
        elif name == "prefetch":
            ds = ds.prefetch(step[1])
    return ds


def elements(ds: tf.data.Dataset) -> list:
    def plain(t):
        return t.to_list() if isinstance(t, tf.RaggedTensor) else np.asarray(t).tolist()
    return [tf.nest.map_structure(plain, e) for e in ds]


# -- the optimizer's kinds of change ------------------------------------------------------------------

OPTIONS = {
    "none": lambda: None,
    "private thread pool": lambda: _options(lambda o: setattr(o.threading, "private_threadpool_size", 3)),
    "one intra-op thread": lambda: _options(lambda o: setattr(o.threading, "max_intra_op_parallelism", 1)),
    "autotune off": lambda: _options(lambda o: setattr(o.autotune, "enabled", False)),
    "no map parallelization": lambda: _options(
        lambda o: setattr(o.experimental_optimization, "map_parallelization", False)),
}


def _options(edit) -> tf.data.Options:
    options = tf.data.Options()
    edit(options)
    return options


def draw_changes(data, ds: tf.data.Dataset) -> list[Change]:
    p = pipeline_of(ds)
    ops = list(p)
    changes = []
    for op in ops:
        if op.parallelizable and data.draw(st.booleans(), label=f"tune {op.label}"):
            value = data.draw(st.sampled_from([1, 2, 3, AUTOTUNE]), label=f"parallelism of {op.label}")
            changes.append(Change("parallelism", op.label, op.name, value, "property"))
    if data.draw(st.booleans(), label="remove the user's caches and prefetches"):
        changes += [Change("remove", op.label, op.name, op.kind, "property") for op in ops
                    if op.kind in ("cache", "prefetch")]
    removed = {c.node for c in changes if c.what == "remove"}
    places = [op for op in ops if op.name not in removed]
    # the optimizer caches only what is the same every epoch: nothing random at or below it
    cacheable = [op for op in places if not op.random and not any(d.random for d in p.descendants(op.name))]
    if cacheable and data.draw(st.booleans(), label="cache"):
        op = data.draw(st.sampled_from(cacheable), label="cache after")
        changes.append(Change("cache", op.label, op.name, "", "property"))
    for _ in range(data.draw(st.integers(0, 2), label="prefetches")):
        op = data.draw(st.sampled_from(places), label="prefetch after")
        changes.append(Change("prefetch", op.label, op.name,
                              data.draw(st.sampled_from([1, 2, AUTOTUNE]), label="buffer"), "property"))
    return changes


# No shrinking: a falsifying example is reported as drawn (shrinking TF pipelines takes minutes).
@settings(max_examples=200, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pipeline=PIPELINE, data=st.data())
def test_rebuilt_pipelines_keep_their_elements(pipeline, data):
    ds = build(pipeline)
    changes = draw_changes(data, ds)
    options = OPTIONS[data.draw(st.sampled_from(sorted(OPTIONS)), label="options")]()
    out = apply_changes(ds, changes, options)
    assert out.element_spec == ds.element_spec
    fresh = build(pipeline)  # the user's pipeline as it runs the first time
    assert elements(out) == elements(fresh)
    assert elements(out) == elements(fresh)  # a second epoch: caches read back, seeds replayed


@settings(max_examples=6, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pipeline=PIPELINE)
def test_optimized_pipelines_keep_their_elements(pipeline):
    try:
        plan = plumbkit.optimize(lambda: build(pipeline), seconds=0.4, compare=False, protocol=BRIEF)
    except plumbkit.PipelineError as err:  # a drawn pipeline may be empty (take, filter)
        assert elements(build(pipeline)) == [] and "empty" in str(err)
        return
    yours = elements(build(pipeline))  # a fresh copy's first epoch: the same on every build (seeds)
    assert elements(plan.dataset) == yours
    # what the plan proposed, applied whether or not it measured faster here
    proposed = apply_changes(build(pipeline), plan.proposed_changes, allow_external_state=True)
    assert elements(proposed) == yours
