"""Exported code that runs: the plan written into the user's cell is valid Python and valid for
TensorFlow, for every bench pipeline and for the ways people write pipelines (fluent chains over
several lines, reassignment, a factory function, a loop, a helper called twice).

Each test executes the original cell and the exported one and compares what they yield.
Bench pipelines are traced for one second and planned by the real planner; the style tests
write a plan by hand from the real pipeline model (every parallelizable operator, a cache and a
prefetch), so each call site is exercised whatever a short trace would decide. ~25 s in all.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from plumbkit.bench import examples
from plumbkit.bench import pipelines as bench
from plumbkit.engine.tracing import trace
from plumbkit.export.source import CodegenError, rewrite_source
from plumbkit.model.plan import Change
from plumbkit.planning.decisions import decide
from plumbkit.tfdata.graph import pipeline_of

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)


# -- helpers --------------------------------------------------------------------------------------

def run_cell(cell: str, namespace: dict | None = None) -> tf.data.Dataset:
    ns = dict(namespace or {})
    exec(compile(cell, "<cell>", "exec"), ns)  # noqa: S102 - the user's cell, as Jupyter runs it
    return ns["ds"]


def batches(ds: tf.data.Dataset, n: int = 6) -> list:
    return [tf.nest.map_structure(np.asarray, e) for e in ds.take(n).as_numpy_iterator()]


def assert_same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for u, v in zip(tf.nest.flatten(x), tf.nest.flatten(y)):
            np.testing.assert_array_equal(u, v)


def assert_same_structure(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert [np.shape(u) for u in tf.nest.flatten(x)] == [np.shape(v) for v in tf.nest.flatten(y)]


def hand_plan(ds: tf.data.Dataset, *, cache_at: str | None = None) -> list[Change]:
    """Every parallelizable operator a different parallelism, a cache, a prefetch at the root."""
    p = pipeline_of(ds)
    changes = [Change("parallelism", op.label, op.name, 2 + k % 3, "test")
               for k, op in enumerate(o for o in p if o.parallelizable)]
    if cache_at:
        op = p.by_label(cache_at)
        changes.append(Change("cache", op.label, op.name, "", "test"))
    changes.append(Change("prefetch", p[p.root].label, p.root, 3, "test"))
    return changes


# -- how people write pipelines -------------------------------------------------------------------

HEADER = '''import tensorflow as tf

def double(x):
    return x * 2

def plus_one(x):
    return x + 1

def square(x):
    return x * x
'''

STYLES = {
    "fluent chain over several lines": HEADER + '''
ds = (
    tf.data.Dataset.range(60)
    .map(double)   # first
    .map(
        plus_one,
    )
    .filter(lambda x: x % 3 != 0)
    .batch(4)
)
''',
    "reassignment": HEADER + '''
ds = tf.data.Dataset.range(60)
ds = ds.map(double)
ds = ds.map(plus_one, num_parallel_calls=1)
ds = ds.batch(4)
''',
    "factory function": HEADER + '''
def make_dataset(n=60):
    ds = tf.data.Dataset.range(n).map(double)
    return ds.map(square).batch(4)

ds = make_dataset()
''',
    "loop": HEADER + '''
ds = tf.data.Dataset.range(60)
for fn in (double, plus_one, square):
    ds = ds.map(fn)
ds = ds.batch(4)
''',
    "helper called twice": HEADER + '''
def preprocess(d):
    return d.map(double).map(plus_one)

left = preprocess(tf.data.Dataset.range(30))
right = preprocess(tf.data.Dataset.range(30, 60))
ds = tf.data.Dataset.zip((left, right)).batch(4)
''',
    "interleave with a literal cycle length": '''import tensorflow as tf

def part(i):
    return tf.data.Dataset.range(i * 10, i * 10 + 10)

ds = tf.data.Dataset.range(4).interleave(part, cycle_length=2, block_length=3)
ds = ds.batch(5)
''',
    "a legacy transformation applied": HEADER + '''
ds = tf.data.Dataset.range(60).map(plus_one)
ds = ds.apply(tf.data.experimental.map_and_batch(double, 4))
''',
}


@pytest.mark.parametrize("style", list(STYLES))
def test_exported_cell_runs_for_every_style(style):
    cell = STYLES[style]
    ds = run_cell(cell)
    # the loop and the helper put one call site behind several operators: the cache goes
    # after one of them, which export must not write inside the loop or the helper
    # a transformation handed to apply(): what follows it follows the apply, not the function
    cache_at = {"loop": "map(plus_one)", "helper called twice": "map(double)",
                "a legacy transformation applied": "map_and_batch(double)"}.get(style, "batch(4)")
    if style.startswith("interleave"):
        cache_at = "batch(5)"
    changes = hand_plan(ds, cache_at=cache_at)
    out = rewrite_source(cell, changes)
    ast.parse(out)
    assert_same(batches(run_cell(out), 100), batches(ds, 100))
    assert rewrite_source(out, changes) == out or style in ("loop", "helper called twice")


#: Operators plumbkit knows by name only, each as a cell builds it, and the label it must show:
#: before, these showed as opaque(2), opaque(4194304), opaque(load_lambda)..., and an export
#: placing a cache after one failed to find its call.
KNOWN_BY_NAME = {
    "sparse_batch(3)": "ds = tf.data.Dataset.range(30).map(lambda i: tf.range(i % 4)).sparse_batch(3, row_shape=[4])\n",
    "csv": "ds = tf.data.experimental.CsvDataset(PATH + '.csv', [0, 0.0], header=True)\n",
    "sql": "ds = tf.data.experimental.SqlDataset('sqlite', PATH + '.db', 'SELECT a, b FROM t', (tf.int64, tf.float64))\n",
    "load": "ds = tf.data.Dataset.load(PATH + '.saved')\n",
    "parse_example_dataset": "spec = {'x': tf.io.FixedLenFeature([], tf.int64)}\n"
                             "ds = tf.data.TFRecordDataset(PATH + '.tfrecord').batch(4)\n"
                             "ds = ds.apply(tf.data.experimental.parse_example_dataset(spec))\n",
    "map_and_batch(double)": "def double(x):\n    return x * 2\n"
                             "ds = tf.data.Dataset.range(30).apply(tf.data.experimental.map_and_batch(double, 4))\n",
}


def _files_for_known_by_name(path) -> None:
    import sqlite3
    path.with_suffix(".csv").write_text("a,b\n" + "".join(f"{i},{i / 2}\n" for i in range(30)))
    with sqlite3.connect(path.with_suffix(".db")) as db:
        db.execute("CREATE TABLE t (a INTEGER, b REAL)")
        db.executemany("INSERT INTO t VALUES (?, ?)", [(i, i / 2) for i in range(30)])
    tf.data.Dataset.range(30).save(str(path.with_suffix(".saved")))
    with tf.io.TFRecordWriter(str(path.with_suffix(".tfrecord"))) as w:
        for i in range(30):
            x = tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))
            w.write(tf.train.Example(features=tf.train.Features(feature={"x": x})).SerializeToString())


def _dense(ds: tf.data.Dataset) -> list:
    return [[t.numpy().tolist() if not isinstance(t, tf.SparseTensor) else tf.sparse.to_dense(t).numpy().tolist()
             for t in tf.nest.flatten(e)] for e in ds]


@pytest.mark.parametrize("label", list(KNOWN_BY_NAME))
def test_an_operator_known_by_name_shows_as_called_and_its_cell_exports(label, tmp_path):
    _files_for_known_by_name(tmp_path / "data")
    cell = f"import tensorflow as tf\nPATH = {str(tmp_path / 'data')!r}\n" + KNOWN_BY_NAME[label]
    ds = run_cell(cell)
    op = next((o for o in pipeline_of(ds) if o.label == label), None)
    assert op is not None, [o.label for o in pipeline_of(ds)]
    out = rewrite_source(cell, [Change("cache", label, op.name, "", "test"), Change("prefetch", label, op.name, 2, "test")])
    assert ".cache().prefetch(2)" in out, out
    assert _dense(run_cell(out)) == _dense(ds)


def test_a_call_site_building_several_operators_gets_one_value_and_a_clear_comment():
    cell = STYLES["loop"]
    changes = hand_plan(run_cell(cell), cache_at="map(plus_one)")
    values = {c.value for c in changes if c.what == "parallelism" and c.where.startswith("map")}
    assert len(values) > 1  # the plan asks for different values at the one call site
    out = rewrite_source(cell, changes)
    assert f"    ds = ds.map(fn, num_parallel_calls={max(values)})\n" in out
    comment = next(line for line in out.splitlines() if "# plumbkit:" in line)
    assert "cache() after map(plus_one)" in comment and "by hand" in comment
    assert comment.startswith("    # plumbkit:")  # at the loop body's indentation, above ds = ds.map(fn)


def test_helper_called_twice_gets_one_value():
    cell = STYLES["helper called twice"]
    out = rewrite_source(cell, hand_plan(run_cell(cell)))
    helper = out.split("def preprocess(d):")[1].split("\n\n")[0]
    assert helper.count("num_parallel_calls=") == 2  # one per call site (two maps), not per operator


def test_interleave_parallelism_never_exceeds_its_cycle_length():
    cell = STYLES["interleave with a literal cycle length"]
    ds = run_cell(cell)
    op = next(o for o in pipeline_of(ds) if o.kind == "interleave")
    assert op.max_parallelism == 2
    out = rewrite_source(cell, [Change("parallelism", op.label, op.name, 8, "test")])
    assert "cycle_length=2, block_length=3, num_parallel_calls=2)" in out
    assert_same(batches(run_cell(out), 100), batches(ds, 100))


def test_trailing_comma_gets_a_valid_keyword():
    cell = "import tensorflow as tf\nds = tf.data.Dataset.range(9).map(\n    lambda x: x + 1,\n)\n"
    out = rewrite_source(cell, [Change("parallelism", "map(lambda)", "n", 2, "test")])
    assert_same(batches(run_cell(out)), batches(run_cell(cell)))


# -- every bench pipeline -------------------------------------------------------------------------

def _module_tree(fn) -> tuple[ast.Module, str]:
    source = inspect.getsource(sys.modules[fn.__module__])
    return ast.parse(source), source


def _definition(fn) -> ast.AST:
    """The ``def`` or ``lambda`` node that defined ``fn`` in its module."""
    tree, _ = _module_tree(fn)
    kind = ast.Lambda if fn.__name__ == "<lambda>" else (ast.FunctionDef,)
    return next(n for n in ast.walk(tree) if isinstance(n, kind) and n.lineno == fn.__code__.co_firstlineno
                and getattr(n, "name", fn.__name__) == fn.__name__)


def cell_for(make) -> tuple[str, dict]:
    """The bench pipeline ``make`` written as a notebook cell: the functions it is built from,
    then ``ds = ...``; and the namespace it needs (its data paths and settings)."""
    namespace = {**vars(examples), **vars(bench), "examples": examples, "tf": tf}
    defs: list[str] = []

    def include(fn) -> None:
        for name, value in inspect.getclosurevars(fn).nonlocals.items():
            if inspect.isfunction(value) and value.__name__ != "<lambda>":
                include(value)
            else:
                namespace[name] = value
        if fn.__name__ != "<lambda>":
            _, source = _module_tree(fn)
            text = textwrap.dedent(ast.get_source_segment(source, _definition(fn), padded=True))
            if text not in defs:
                defs.append(text)

    include(make)
    if make.__name__ == "<lambda>":
        body = _definition(make).body
        helper = body.func if isinstance(body, ast.Call) else None
        if isinstance(helper, ast.Attribute) and isinstance(helper.value, ast.Name) and helper.value.id == "examples":
            include(getattr(examples, helper.attr))  # a helper from another module: its source too
            body.func = ast.Name(helper.attr)
        expr = ast.unparse(body)
    else:
        expr = f"{make.__name__}()"
    return "import tensorflow as tf\n\n" + "\n\n".join(defs) + f"\n\nds = {expr}\n", namespace


def bench_factories(data_dir) -> dict:
    small = dict(files=2, per_file=16)
    candidates = bench.classification_candidates(data_dir, **small)
    return {
        "image (cacheable)": (bench.image_cacheable(data_dir, **small), True),
        "image + random flip": (bench.image_random(data_dir, **small), False),
        "decode only": (bench.decode_only(data_dir, **small), True),
        "classification, unfused": (candidates["unfused"], False),
        "classification, fused": (candidates["fused"], False),
        "object detection": (bench.detection(data_dir, **small), False),
        "text": (bench.text(data_dir, files=2, lines=200), True),
        "text, tuned": (bench.text(data_dir, files=2, lines=200, tuned=True), True),
        "planted skewed": (bench.planted_skewed(600), True),
        "planted three maps": (bench.planted_three_maps(), True),
        "speech": (bench.speech(), False),
    }


@pytest.fixture(scope="module")
def factories(tmp_path_factory):
    return bench_factories(tmp_path_factory.mktemp("bench-data"))


BENCH_PIPELINES = ["image (cacheable)", "image + random flip", "decode only", "classification, unfused",
                   "classification, fused", "object detection", "text", "text, tuned", "planted skewed",
                   "planted three maps", "speech"]


def test_every_bench_pipeline_is_covered(tmp_path):
    assert sorted(bench_factories(tmp_path)) == sorted(BENCH_PIPELINES)


@pytest.mark.parametrize("name", BENCH_PIPELINES)
def test_exported_cell_runs_for_every_bench_pipeline(name, factories):
    make, deterministic = factories[name]
    cell, namespace = cell_for(make)
    original = run_cell(cell, namespace)
    assert original.element_spec == make().element_spec  # the cell is the bench pipeline
    # What is checked is the export, not the plan: an uncalibrated half-second trace gives the
    # planner changes to write as well as a calibrated one (calibration: ~0.3 s per operator).
    t = trace(make, seconds=0.5, min_seconds=0.5, converge=False, calibrate=False)
    changes = decide(t, memory_budget=2**30).changes
    assert changes, "the planner changed nothing: the export is not exercised"
    exported = rewrite_source(cell, changes)
    new = run_cell(exported, namespace)
    assert new.element_spec == original.element_spec
    a, b = batches(original, 3), batches(new, 3)
    (assert_same if deterministic else assert_same_structure)(a, b)
    for c in changes:
        if c.what == "parallelism":
            assert "num_parallel_calls=" in exported


def test_the_planner_never_asks_an_interleave_for_more_than_its_cycle_length():
    def part(i):
        # ~0.1 ms an element: two threads of it stay well under the consumer's own ceiling (a
        # 64-float sine reached it at 32 cores on a faster machine, and the cap no longer bound)
        return tf.data.Dataset.range(i * 100, i * 100 + 100).map(lambda x: examples.planted_work(x, 8))
    make = lambda: tf.data.Dataset.range(10**6).interleave(part, cycle_length=2, block_length=4).batch(8)  # noqa: E731
    t = trace(make, seconds=1.0, min_seconds=0.5, converge=False)
    interleave = next(o for o in t.pipeline if o.kind == "interleave")
    for cores in (2, 8, 32):  # the costly interleave would take most of the cores
        d = decide(t, cores=cores, memory_budget=0)
        asked = [c.value for c in d.changes if c.what == "parallelism" and c.node == interleave.name]
        assert all(v <= 2 for v in asked), (cores, asked)
        assert d.allocation.theta[interleave.name] <= 2 + 1e-6  # the LP knows the cap: its bound holds
    assert t.allocation_bound(cores=32) < t.allocation(cores=32, max_threads={interleave.name: 64.0}).throughput
    assert not interleave.can_take_more_parallelism(2)


# -- operators a library call builds (keras' image_dataset_from_directory) ------------------------

LIBRARY_CELL = '''import tensorflow as tf
ds = tf.keras.utils.image_dataset_from_directory(FOLDER, image_size=(8, 8), batch_size=4, shuffle=False)
'''
LIBRARY_CELL_MAPPED = LIBRARY_CELL + "ds = ds.map(lambda x, y: (x / 255.0, y))\n"


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("images")
    for label in ("cat", "dog"):
        (folder / label).mkdir()
        for i in range(6):
            pixels = tf.fill([12, 12, 3], tf.constant(i * 20 + (label == "dog"), tf.uint8))
            tf.io.write_file(str(folder / label / f"{i}.png"), tf.io.encode_png(pixels))
    return str(folder)


def test_an_operator_a_library_call_builds_is_written_where_its_elements_pass_in_the_cell(image_folder):
    """image_dataset_from_directory builds a map, a batch and a prefetch inside: a cache after
    its batch is written after the cell binds its dataset, or before the cell's own map above it;
    the library's map's parallelism is said in a comment, not written on the cell's map (both are
    labelled map(lambda): the cell's is the top one). Before, the export failed ("no call .map(...)
    for 'map(lambda)'"), and with a map of the cell's it wrote the library's parallelism there."""
    namespace = {"FOLDER": image_folder}
    alone = pipeline_of(run_cell(LIBRARY_CELL, namespace))
    ours = "map(lambda)"
    assert [o.label for o in alone if o.kind in ("map", "batch", "prefetch")] == ["prefetch(AUTOTUNE)", "batch(4)", ours]
    changes = [Change("parallelism", ours, "n", 3, "test"), Change("cache", "batch(4)", "n", "", "test")]
    with pytest.raises(CodegenError):  # without the pipeline's model the cell has no call to write them at
        rewrite_source(LIBRARY_CELL, changes)
    out = rewrite_source(LIBRARY_CELL, changes, pipeline=alone)
    assert out.endswith("shuffle=False)\nds = ds.cache()\n"
                        "# plumbkit: 3 parallel calls for map(lambda): not written, a call this cell makes "
                        "builds it inside (not the cell's own code)\n"), out
    assert rewrite_source(out, changes, pipeline=alone) == out  # idempotent
    mapped = pipeline_of(run_cell(LIBRARY_CELL_MAPPED, namespace))
    changes = [Change("parallelism", "map(lambda)#2", "n", 2, "test"), Change("parallelism", ours, "n", 3, "test"),
               Change("cache", "batch(4)", "n", "", "test")]
    out_mapped = rewrite_source(LIBRARY_CELL_MAPPED, changes, pipeline=mapped)
    assert "ds = ds.cache().map(lambda x, y: (x / 255.0, y), num_parallel_calls=2)\n" in out_mapped, out_mapped
    assert "# plumbkit: 3 parallel calls for map(lambda): not written" in out_mapped
    assert rewrite_source(out_mapped, changes, pipeline=mapped) == out_mapped
    for cell, exported in ((LIBRARY_CELL, out), (LIBRARY_CELL_MAPPED, out_mapped)):
        yours = list(run_cell(cell, namespace).as_numpy_iterator())
        assert_same([tf.nest.map_structure(np.asarray, e) for e in run_cell(exported, namespace).as_numpy_iterator()],
                    [tf.nest.map_structure(np.asarray, e) for e in yours])
