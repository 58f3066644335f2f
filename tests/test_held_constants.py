"""In-memory arrays (``from_tensor_slices((x, y))``) are held once, by reference, not copied into
every graph plumbkit edits and every pipeline it rebuilds (:mod:`plumbkit.tfdata.held_constants`).

What it checks: the edited graph no longer carries the array (and does when the hold is turned
off: the negative control); rebuilt pipelines, with or without changes, yield the user's
elements in order; TensorFlow's cardinalities and a sub-pipeline still read the array; a
changed array is a different cache fingerprint; what is held is let go when the outermost
operation ends, unless a live pipeline still uses it.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
import tensorflow as tf

import plumbkit
from plumbkit.engine.scheduler import operation
from plumbkit.model.plan import Change
from plumbkit.tfdata import held_constants
from plumbkit.tfdata.disk_tier import fingerprint
from plumbkit.tfdata.graph import dataset_at, pipeline_of, serialized_graph, static_cardinalities
from plumbkit.tfdata.held_constants import HELD_ATTR, held_bindings, held_count, holding
from plumbkit.tfdata.rebuild import apply_changes

from conftest import BRIEF

pytestmark = pytest.mark.concurrent  # checks what is yielded and held, not a speed (tests/run)

ROWS = 2048  # 2048 x 16 x 16 x 3 float32: 6.3 MB, well over the 1 MB held


def arrays(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.random((ROWS, 16, 16, 3)).astype("float32"), np.arange(ROWS) % 10


def keras_style(x: np.ndarray, y: np.ndarray) -> tf.data.Dataset:
    """As notebooks write it: arrays in memory, a map, a batch."""
    return (tf.data.Dataset.from_tensor_slices((x, y))
            .map(lambda a, b: (tf.reduce_mean(a, axis=-1), b)).batch(64))


def elements(ds: tf.data.Dataset) -> list:
    return [(a.tolist(), b.tolist()) for a, b in ds.as_numpy_iterator()]


def test_the_array_is_held_once_and_the_graph_is_small():
    x, y = arrays()
    graph_def, _ = serialized_graph(keras_style(x, y))
    held = [n for n in graph_def.node if HELD_ATTR in n.attr]
    assert [n.op for n in held] == ["Placeholder"] and graph_def.ByteSize() < 1e6, graph_def.ByteSize()
    (tensor,) = held_bindings(graph_def).values()
    np.testing.assert_array_equal(tensor.numpy(), x)
    # the same content serialized again is the same held tensor, not a second copy
    again, _ = serialized_graph(keras_style(x.copy(), y))
    assert list(held_bindings(again).values())[0] is tensor


def test_file_names_stay_in_the_graph_however_many():
    """A long list of file names (over the 1 MB held) stays readable: the disk model and the
    tier's digest read the files from the graph."""
    names = [f"/data/shard-{i:07d}-of-a-long-dataset-name.tfrecord" for i in range(30000)]
    graph_def, _ = serialized_graph(tf.data.Dataset.from_tensor_slices(names).map(tf.strings.length))
    assert not any(HELD_ATTR in n.attr for n in graph_def.node) and graph_def.ByteSize() > 2**20


def test_without_the_hold_the_graph_carries_the_array(monkeypatch):
    """Negative control: the size check above sees a copied array."""
    monkeypatch.setattr(held_constants, "HELD_BYTES", 2**40)
    graph_def, _ = serialized_graph(keras_style(*arrays()))
    assert not any(HELD_ATTR in n.attr for n in graph_def.node)
    assert graph_def.ByteSize() > ROWS * 16 * 16 * 3 * 4


def test_rebuilt_pipelines_yield_the_users_elements_in_order():
    x, y = arrays()
    yours = elements(keras_style(x, y))
    assert elements(apply_changes(keras_style(x, y), [])) == yours
    pipeline = pipeline_of(keras_style(x, y))
    mapped = next(o for o in pipeline if o.kind == "map")
    changes = [Change("parallelism", mapped.label, mapped.name, 2, "test"),
               Change("cache", "batch(64)", pipeline.root, "", "test")]
    rebuilt = apply_changes(keras_style(x, y), changes)
    assert elements(rebuilt) == yours
    assert elements(rebuilt) == yours  # read back from the cache


def test_cardinalities_and_sub_pipelines_still_read_the_array():
    x, y = arrays()
    ds = keras_style(x, y)
    pipeline = pipeline_of(ds)
    counts = static_cardinalities(ds, pipeline)
    assert counts[pipeline.root] == ROWS // 64
    source = next(o for o in pipeline if o.kind == "from_tensor_slices")
    assert counts[source.name] == ROWS
    graph_def, _ = serialized_graph(ds)
    first = next(iter(dataset_at(graph_def, source.name)))
    np.testing.assert_array_equal(first[0].numpy(), x[0])


def test_a_changed_array_is_another_cache():
    x, y = arrays()
    assert fingerprint(keras_style(x, y)) == fingerprint(keras_style(x.copy(), y))
    changed = x.copy()
    changed[-1, -1, -1, -1] += 1.0  # one value of 6 MB
    assert fingerprint(keras_style(changed, y)) != fingerprint(keras_style(x, y))


@operation("held constants test")
def _rebuild_inside_an_operation(x, y, keep: bool):
    rebuilt = apply_changes(keras_style(x, y), [])
    assert held_count() >= 1
    return rebuilt if keep else None


def test_what_is_held_is_let_go_when_the_operation_ends_unless_a_pipeline_uses_it():
    with holding():  # empties what earlier tests left held, on exit
        pass
    gc.collect()
    before = held_count()
    x, y = arrays(seed=1)
    assert _rebuild_inside_an_operation(x, y, keep=False) is None
    gc.collect()
    assert held_count() == before  # nothing uses it: let go
    kept = _rebuild_inside_an_operation(*arrays(seed=2), keep=True)
    gc.collect()
    assert held_count() == before + 1  # the rebuilt pipeline captures it
    assert elements(kept) == elements(keras_style(*arrays(seed=2)))
    del kept
    gc.collect()
    assert held_count() == before


def test_a_plan_for_arrays_in_memory_keeps_their_elements():
    x, y = arrays(seed=3)
    plan = plumbkit.optimize(lambda: keras_style(x, y).repeat(), seconds=0.3, compare=False,
                             protocol=BRIEF)
    yours = elements(keras_style(x, y).repeat().take(ROWS // 64 * 2))
    assert elements(plan.dataset.take(ROWS // 64 * 2)) == yours
