"""Exporting a plan as the user's own cell, rewritten at the right call sites."""

import numpy as np
import pytest

from plumbkit.export.source import CodegenError, rewrite_source
from plumbkit.model.plan import Change

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)

CHAIN = '''import tensorflow as tf

def decode(x):  # the user's function
    return x * 2

ds = (tf.data.Dataset.range(100)
      .map(decode)          # decode step
      .batch(8))
ds
'''

STEPS = '''%%plumb -s 2
import tensorflow as tf
ds = tf.data.Dataset.range(100)
ds = ds.map(lambda x: x + 1, 2)
ds = ds.cache()
ds = ds.batch(8).prefetch(1)
'''


def change(what, where, value=""):
    return Change(what, where, "node", value, "test")


def test_fluent_chain_gets_parallelism_cache_and_prefetch_with_comments_kept():
    """A chain written one call per line gets its additions one per line, indented alike."""
    out = rewrite_source(CHAIN, [change("parallelism", "map(decode)", 4), change("cache", "map(decode)"),
                                 change("prefetch", "batch(8)", 3)])
    assert ("      .map(decode, num_parallel_calls=4)          # decode step\n"
            "      .cache()\n"
            "      .batch(8)\n"
            "      .prefetch(3))\n") in out, out
    assert "def decode(x):  # the user's function" in out


#: keras-io's style: an alias for AUTOTUNE, a call whose arguments span lines, the last line `)`.
KERAS_IO = '''import tensorflow as tf
AUTO = tf.data.AUTOTUNE
ds = (
    tf.data.Dataset.range(100)
    .map(
        lambda x: x * 2,
        num_parallel_calls=AUTO,
    )
    .batch(8)
    .prefetch(AUTO)
)
'''
#: The same chain continued by backslashes, and on one line: a line break there would end it.
BACKSLASHES = "import tensorflow as tf\nds = tf.data.Dataset.range(100) \\\n    .map(lambda x: x * 2) \\\n    .batch(8)\n"
ONE_LINE = "import tensorflow as tf\nds = tf.data.Dataset.range(100).map(lambda x: x * 2).batch(8)\n"


def test_additions_follow_the_cells_own_line_style_and_the_cell_runs():
    plan = [change("cache", "map(lambda)"), change("prefetch", "batch(8)", 3)]
    out = rewrite_source(KERAS_IO, plan)
    assert "        num_parallel_calls=AUTO,\n    )\n    .cache()\n    .batch(8)\n    .prefetch(3)\n)" in out, out
    assert ".map(lambda x: x * 2).cache() \\\n    .batch(8).prefetch(3)\n" in rewrite_source(BACKSLASHES, plan)
    assert ".map(lambda x: x * 2).cache().batch(8).prefetch(3)\n" in rewrite_source(ONE_LINE, plan)
    for cell in (KERAS_IO, BACKSLASHES, ONE_LINE):
        namespace: dict = {}
        exec(rewrite_source(cell, plan), namespace)  # noqa: S102 - the exported cell runs
        assert [b.tolist() for b in namespace["ds"].as_numpy_iterator()][-1] == [2 * x for x in range(96, 100)]
        assert rewrite_source(rewrite_source(cell, plan), plan) == rewrite_source(cell, plan)  # idempotent


def test_reassignment_style_positional_parallelism_autotune_and_removal():
    out = rewrite_source(STEPS, [change("remove", "cache"), change("parallelism", "map(lambda)", -1),
                                 change("prefetch", "batch(8)", 4)])
    assert out.startswith("%%plumb -s 2\n")
    assert "ds = ds.map(lambda x: x + 1, tf.data.AUTOTUNE)" in out
    assert "ds = ds\n" in out  # the user's cache is gone
    assert "ds = ds.batch(8).prefetch(4)" in out


def test_idempotent():
    plan = [change("parallelism", "map(decode)", 2), change("cache", "map(decode)"), change("prefetch", "batch(8)", 2)]
    once = rewrite_source(CHAIN, plan)
    assert rewrite_source(once, plan) == once


def test_ambiguity_resolved_by_occurrence_and_clear_error():
    src = "import tensorflow as tf\nds = tf.data.Dataset.range(9).map(f).map(f).batch(3)\n"
    out = rewrite_source(src, [change("parallelism", "map(f)#2", 2)])
    assert ".map(f).map(f, num_parallel_calls=2)" in out
    with pytest.raises(CodegenError, match="interleave"):
        rewrite_source(src, [change("parallelism", "interleave(g)", 2)])


def test_exported_cell_runs_and_yields_the_same_elements():
    plan = [change("parallelism", "map(decode)", 3), change("cache", "map(decode)"), change("prefetch", "batch(8)", 2)]
    before, after = {}, {}
    exec(CHAIN, before)
    exec(rewrite_source(CHAIN, plan), after)
    a = list(before["ds"].as_numpy_iterator())
    b = list(after["ds"].as_numpy_iterator())
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def test_thread_pool_is_raised_in_an_options_object_before_the_pipeline_and_idempotent():
    source = ("import tensorflow as tf\n"
              "ds = tf.data.Dataset.range(100).map(fetch)  # a remote call\n"
              "ds = ds.batch(8)\n"
              "ds\n")
    changes = [Change("parallelism", "map(fetch)", "n1", 11, ""), Change("threadpool", "batch(8)", "n2", 13, "")]
    out = rewrite_source(source, changes)
    assert "map(fetch, num_parallel_calls=11)  # a remote call" in out
    assert "_plumbkit_options.threading.private_threadpool_size = 13\nds = ds.batch(8).with_options(_plumbkit_options)" in out
    assert rewrite_source(out, changes) == out
    assert "private_threadpool_size = 20" in rewrite_source(out, [Change("threadpool", "batch(8)", "n2", 20, "")])
    namespace = {"fetch": lambda x: x + 1}
    exec(out, namespace)  # noqa: S102 - the exported cell runs
    assert namespace["ds"].options().threading.private_threadpool_size == 13
