"""The offload model and the exported code, on hand-built numbers and pipelines (pure, fast)."""

import ast

import pytest

from plumbkit.export.offload import rewrite_source
from plumbkit.model.offload import Distribute
from plumbkit.model.pipeline import Operator, Pipeline
from plumbkit.planning import offload
from plumbkit.service.cluster import cpu_sets

MS = 1e-3


def setting(**kw):
    base = dict(consumer_ceiling=5000.0, consumer_cpu=0.05 * MS, local=90.0, local_cpu=11 * MS,
                client_cores=1.0, cores_per_worker=1.0)
    base.update(kw)
    return offload.Setting(**base)


def cut(node="b", label="batch(32)", **kw):
    base = dict(node=node, label=label, visit_ratio=1.0, bytes_per_minibatch=128.0, remote_cpu=6 * MS,
                send_cpu=0.5 * MS, receive_cpu=0.8 * MS, transfer_rate=1500.0, client_cpu=5 * MS)
    base.update(kw)
    return offload.CutCosts(**base)


def test_throughput_is_the_smallest_ceiling_and_names_it():
    s, c = setting(), cut()
    one = offload.predict(s, c, 1)
    assert one.bound == "workers' CPU" and one.throughput == pytest.approx(1 / (6.5 * MS))
    # Enough workers: the client (consumer + operators above the cut + receiving) binds.
    many = offload.predict(s, c, 8)
    assert many.bound == "client CPU" and many.throughput == pytest.approx(1 / (5.85 * MS))
    assert offload.predict(s, c, 0) == offload.predict_local(s)
    assert offload.predict_local(s).throughput == pytest.approx(1 / (11 * MS))
    # Throughput never falls as workers are added.
    curve = [p.throughput for p in offload.curve(s, c, 10)[1:]]
    assert curve == sorted(curve)


def test_sequential_operators_and_network_cap_throughput():
    s = setting(bandwidth=1e6, cores_per_worker=4)
    c = cut(remote_caps=(200.0,), bytes_per_minibatch=1e4, client_cpu=0.0)
    assert offload.predict(s, c, 1).bound == "network"  # 1e6 / 1e4 = 100 /s
    s2 = setting(cores_per_worker=4)
    assert offload.predict(s2, c, 1).throughput == pytest.approx(200.0)  # 4 cores, but one sequential op
    assert offload.predict(s2, c, 1).bound == "a sequential remote operator"


def test_workers_needed_is_the_smallest_count_meeting_the_target():
    s, c = setting(), cut(client_cpu=0.0)
    assert offload.workers_needed(s, c, 150, 10) == 1
    assert offload.workers_needed(s, c, 400, 10) == 3  # 3/6.5 ms = 461 >= 400/1.1
    assert offload.workers_needed(s, c, 10_000, 10) is None  # client-bound long before


def test_no_offload_when_the_local_pipeline_meets_the_target():
    d = offload.decide(setting(local=1000.0), [cut()], target=1050.0)
    assert d.action == "do not offload" and "already runs at 1000.0" in d.reason and d.cut is None


def test_no_offload_when_moving_the_data_costs_more_than_it_saves():
    # Big elements: receiving a minibatch costs the client more than computing it locally.
    big = cut(receive_cpu=20 * MS, client_cpu=0.0, bytes_per_minibatch=6e6)
    d = offload.decide(setting(local=500.0, local_cpu=2 * MS), [big])
    assert d.action == "do not offload" and "levels off" in d.reason


def test_a_cut_costed_in_a_slow_moment_is_judged_against_the_local_pipeline_of_that_moment():
    # Notebook 06 on the Intel VM: the local run read 154/s (6.5 ms a minibatch); the split cut's
    # runs, seconds later, cost 6 + 5 ms (the machine ran 1.7x slower): its plateau, 154/s, is
    # 1.7x the 91/s those same runs cost the whole pipeline locally. Measured, served ran 1.1-2.4x.
    s, c = setting(local=154.0, local_cpu=6.5 * MS), cut()
    d = offload.decide(s, [c], target=5000.0, max_workers=1)
    assert offload.local_from_parts(s, c) == pytest.approx(1 / (11.05 * MS))
    assert d.action == "offload" and d.cut.node == "b"
    # Negative control: the same plateau against parts that cost the local pipeline little less
    # (remote 1 ms: the cut moves almost nothing) does not pay.
    cheap_remote = cut(remote_cpu=1 * MS, client_cpu=5.5 * MS, send_cpu=6 * MS)
    no = offload.decide(s, [cheap_remote], target=5000.0, max_workers=1)
    assert no.action == "do not offload" and "costed from the same runs" in no.reason


def test_cannot_offload_says_why():
    d = offload.decide(setting(), [], invalid={"map(py)": "runs Python"})
    assert d.action == "cannot offload" and "map(py): runs Python" in d.reason


def test_the_cut_meeting_the_target_with_fewest_workers_wins():
    everything = cut("m2", "map(post)", remote_cpu=11 * MS, client_cpu=0.0)
    split = cut("b", "batch(32)", remote_cpu=6 * MS, client_cpu=5 * MS)
    d = offload.decide(setting(), [everything, split], target=140.0)
    assert d.action == "offload" and d.cut.node == "b" and d.workers == 1 and d.meets_target
    # A target only the full offload reaches: more workers, everything remote.
    d = offload.decide(setting(), [everything, split], target=400.0)
    assert d.cut.node == "m2" and d.workers == 5  # 5 / 11.5 ms = 435 (4 give 348 < 400 / 1.1)


def test_ties_go_to_the_cut_moving_fewer_bytes():
    # Same compute either side; the cut below the float conversion moves a quarter of the bytes.
    small = cut("d", "map(decode)", bytes_per_minibatch=1e5)
    large = cut("f", "map(to_float)", bytes_per_minibatch=4e5)
    assert offload.decide(setting(), [large, small], target=140.0).cut.node == "d"


def test_unreachable_target_gives_the_plateau():
    c = cut(client_cpu=0.0)
    d = offload.decide(setting(), [c], target=1e6, max_workers=32)
    assert d.action == "offload" and not d.meets_target
    assert "out of reach" in d.reason and "client CPU" in d.reason
    assert d.workers == offload.plateau(setting(), c, 32).workers < 32


def _pipeline(*ops):
    """ops root first: (name, kind, label); each reads the next."""
    operators = {}
    for i, (name, kind, label) in enumerate(ops):
        inputs = (ops[i + 1][0],) if i + 1 < len(ops) else ()
        operators[name] = Operator(name=name, op=kind, kind=kind, inputs=inputs, label=label)
    return Pipeline(operators=operators, root=ops[0][0])


PIPE = _pipeline(("p", "prefetch", "prefetch(2)"), ("b", "batch", "batch(32)"), ("f", "map", "map(to_float)"),
                 ("d", "map", "map(decode)"), ("r", "range", "range"))


def test_candidate_cuts_skip_prefetch_and_keep_the_useful_ones():
    shares = {"b": 0.02, "f": 0.1, "d": 0.8, "r": 0.01}
    sizes = {"b": 4e5, "f": 4e5, "d": 1e5, "r": 256}
    cuts = offload.candidate_cuts(PIPE, {}, cpu_share=shares, bytes_per_minibatch=sizes)
    names = [c.name for c in cuts]
    assert "p" not in names and names[0] == "b"  # root side first; never at a prefetch
    assert "d" in names  # below the size-increasing float conversion, and holds the heavy decode
    assert "r" not in names  # offloads ~1% of the CPU
    # Two cuts: everything remote, and the split closest to half the CPU on each side.
    two = offload.candidate_cuts(PIPE, {}, cpu_share={"b": 0.02, "f": 0.45, "d": 0.45, "r": 0.01}, limit=2)
    assert [c.name for c in two] == ["b", "d"]


TWO_STAGE = _pipeline(("m2", "map", "map(lambda)#2"), ("b", "batch", "batch(32)"), ("m", "map", "map(lambda)"),
                      ("rp", "repeat", "repeat(-1)"), ("r", "range", "range"))


def test_the_half_split_is_stable_on_a_near_tie():
    """bench.offload.two_stage: the per-element map's share sits near one half and the batch adds
    ~0.001. Whichever side of half the measured shares fall, the cut is after the batch (the same
    work remote, minibatches sent instead of elements); a cut clearly closer to half still wins."""
    def second(per_element: float) -> str:
        shares = {"m2": 0.995 - per_element, "b": 0.001, "m": per_element, "rp": 0.002, "r": 0.002}
        return offload.candidate_cuts(TWO_STAGE, {}, cpu_share=shares, limit=2)[1].label
    for per_element in (0.44, 0.49, 0.4985, 0.4995, 0.51, 0.54):
        assert second(per_element) == "batch(32)", per_element  # nearest to half alone: map(lambda) above 0.4955
    clearly = {"m2": 0.30, "b": 0.25, "m": 0.41, "rp": 0.02, "r": 0.02}  # batch 0.70 remote, map 0.45
    assert offload.candidate_cuts(TWO_STAGE, {}, cpu_share=clearly, limit=2)[1].label == "map(lambda)"


def test_python_functions_stay_on_the_client():
    python = {"f": "EagerPyFunc"}
    bad = offload.invalid_cuts(PIPE, python)
    assert set(bad) == {"prefetch(2)", "batch(32)", "map(to_float)"}
    assert "Could not find callback" in bad["batch(32)"] and "map(to_float)" in bad["batch(32)"]
    cuts = offload.candidate_cuts(PIPE, python, cpu_share={"d": 0.9, "f": 0.05, "r": 0.01})
    assert [c.name for c in cuts] == ["d"]
    assert offload.candidate_cuts(PIPE, {"r": "PyFunc"}) == []


def test_cpu_sets_keep_the_client_cores_free():
    assert cpu_sets(1, [0, 1], [0]) == ([1], [[1]])
    assert cpu_sets(3, [0, 1, 2, 3], [0]) == ([1], [[1], [2], [3]])
    assert cpu_sets(2, [0, 1], None) == ([0], [[0], [1]])
    assert cpu_sets(2, [0], [0]) == ([0], [[0], [0]])  # nothing spare: share


CELL = """%load_ext plumbkit
import tensorflow as tf

def make(n=1000):
    ds = tf.data.Dataset.range(n)
    ds = ds.map(heavy, num_parallel_calls=tf.data.AUTOTUNE)  # the expensive part
    ds = ds.batch(32)
    return ds
"""


def test_export_writes_distribute_at_the_cut_with_the_dispatcher_a_parameter():
    plan = Distribute(cut="x", cut_label="map(heavy)", sharding="DYNAMIC", job_name="plumbkit-abc")
    out = rewrite_source(CELL, plan, root_label="batch(32)", address="grpc://127.0.0.1:5000")
    assert out.startswith("%load_ext plumbkit\n")  # magics kept
    assert "def make(n=1000, dispatcher='grpc://127.0.0.1:5000'):" in out
    assert ("ds.map(heavy, num_parallel_calls=tf.data.AUTOTUNE).apply(tf.data.experimental.service.distribute("
            "processing_mode=tf.data.experimental.service.ShardingPolicy.DYNAMIC, service=dispatcher, "
            "job_name='plumbkit-abc', compression=None))  # the expensive part") in out
    assert "ds = ds.batch(32).prefetch(tf.data.AUTOTUNE)" in out
    ast.parse(out.replace("%load_ext plumbkit", ""))
    assert rewrite_source(out, plan, root_label="batch(32)", address="grpc://127.0.0.1:5000") == out


def test_export_at_top_level_defines_the_dispatcher_variable():
    cell = "import tensorflow as tf\nds = tf.data.Dataset.range(10).map(f).batch(2).prefetch(1)\n"
    out = rewrite_source(cell, Distribute(cut="b", cut_label="batch(2)"), root_label="prefetch(1)",
                         address="grpc://127.0.0.1:7")
    lines = out.splitlines()
    assert lines[1].startswith("dispatcher = 'grpc://127.0.0.1:7'")
    assert lines[2] == ("ds = tf.data.Dataset.range(10).map(f).batch(2).apply(tf.data.experimental.service."
                        "distribute(processing_mode=tf.data.experimental.service.ShardingPolicy.OFF, "
                        "service=dispatcher, compression=None)).prefetch(1)")


def test_a_stall_names_the_lost_worker_or_says_it_cannot():
    from plumbkit.service.client import Watch, stall_error
    from plumbkit.service.errors import LostWorker
    lost = [LostWorker(1, 4242, "127.0.0.1:5001", "killed by SIGKILL")]
    ours = stall_error(3996, 10.2, lost, Watch(expected=4000, sharding="DYNAMIC"), True)
    assert ours.elements == 3996 and ours.lost == tuple(lost)
    assert str(ours).startswith("the tf.data service stalled: no element for 10 s after 3,996 of 4,000 arrived; "
                                "lost worker 1 (pid 4242, 127.0.0.1:5001) killed by SIGKILL.")
    assert "waits at the end of the epoch for the lost worker's task" in str(ours)
    theirs = stall_error(12, 10.0, [], Watch(), False)
    assert "plumbkit did not start these workers, so it cannot tell which" in str(theirs)


def test_compression_only_where_the_network_binds():
    from plumbkit.engine.offload import _compression
    c = cut(bytes_per_minibatch=1e6, client_cpu=0.0)
    assert _compression(setting(), c, 1, None) is None  # loopback: snappy would only cost CPU
    assert _compression(setting(bandwidth=5e7), c, 4, None) == "AUTO"  # 50 MB/s, 1 MB a minibatch
    assert _compression(setting(bandwidth=1e10), c, 1, None) is None  # a fast network does not bind
    assert _compression(setting(), c, 1, "AUTO") == "AUTO"  # asked for


# -- the element exchange and what serving costs ------------------------------------------------

def single_elements(**kw):
    """A cut that sends 32 single elements per minibatch (costs measured on the two-stage bench
    pipeline: moving a cached sample ran at 101.6 minibatches/s; served, it measured 70.6)."""
    base = dict(node="m", label="map(lambda)", visit_ratio=32.0, remote_cpu=6.16 * MS, send_cpu=4.72 * MS,
                receive_cpu=6.20 * MS, transfer_rate=101.6, client_cpu=3.27 * MS)
    base.update(kw)
    return cut(**base)


def test_one_round_trip_per_worker_binds_single_element_cuts():
    s = setting(consumer_cpu=0.06 * MS)
    c = single_elements()
    t = offload.terms(s, c, 1)
    # Fully overlapped, the worker's core (compute + send) would allow 92 /s and the client 105:
    assert t["workers' CPU"] == pytest.approx(1 / (10.88 * MS)) and t["client CPU"] > 100
    # ... but the round trips wait for the busy cores: 60-75 /s (measured 70.6).
    point = offload.predict(s, c, 1)
    assert point.bound == "element exchange" and 60 < point.throughput < 75
    # With nothing to compute on either side, the exchange runs at the measured transfer rate.
    idle = offload.exchange_rate(setting(consumer_cpu=0.0), single_elements(remote_cpu=0.0, client_cpu=0.0), 1)
    assert idle == pytest.approx(101.6, rel=1e-6)
    # A worker core that computes nearly all the time: the round trips wait for it, and the
    # bound says the core is the cause.
    busy = offload.predict(s, single_elements(visit_ratio=1.0, remote_cpu=8 * MS, send_cpu=0.1 * MS,
                                              receive_cpu=0.1 * MS, transfer_rate=3000.0, client_cpu=0.0), 1)
    assert busy.bound.startswith("workers' CPU") and busy.throughput == pytest.approx(1 / (8.1 * MS), rel=0.03)
    # A second worker adds a second round trip in flight, as far as the client's cores allow.
    assert offload.exchange_rate(s, c, 1) < offload.exchange_rate(s, c, 2) < t["client CPU"]
    roomy = setting(consumer_cpu=0.06 * MS, client_cores=4.0)
    assert offload.exchange_rate(roomy, c, 2) > 1.5 * offload.exchange_rate(roomy, c, 1)
