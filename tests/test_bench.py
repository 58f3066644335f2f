"""The reduced benchmark suite runs end to end, so the benchmark code cannot rot."""

import json

import pytest

from plumbkit import bench, cli
from plumbkit.bench.suite import CONFIGS

pytestmark = pytest.mark.concurrent  # checks what is printed or written, not a speed (tests/run)


@pytest.mark.usefixtures("ctrl_c_raises")  # its cancel section presses Ctrl-C, however pytest was started
def test_quick_bench_writes_a_report(tmp_path):
    assert cli.main(["bench", "--quick", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    row = report["end_to_end"][0]
    assert set(row["measured"]) == set(CONFIGS)
    assert all(v > 0 for v in row["measured"].values()) and not row["failed"]
    assert all(len(v) == 2 for v in row["rounds"].values())  # every configuration, every round
    assert row["predicted_plumbkit"] > 0 and row["prediction_error"] >= 0
    # what the trace read of yours, beside what the comparison measured of it
    assert row["traced_throughput"] > 0 and row["traced_cpu_per_batch"] > 0
    # the speed-up optimize() reported is checked against the same two pipelines timed again
    assert row["independent_speedup"] is not None and row["speedup_agreement"] is not None
    walk = report["stepping"][0]
    # one start each (--quick runs each section's code once; the bench's own run has three)
    assert len(walk["bottleneck_walks"]) == 1 and len(walk["random"]) == 1 and len(walk["allocation_bounds"]) == 3
    assert walk["verdict"].startswith(("separable", "not separable"))
    md = (tmp_path / "report.md").read_text()
    assert "| skewed |" in md and "AUTOTUNE + same cache" in md and "timed independently" in md
    for png in ("end_to_end.png", "stepping_skewed.png", "cache_estimate.png", "overhead.png"):
        assert (tmp_path / png).stat().st_size > 1000, png
    sizes = report["cache"][0]["rows"]
    assert sizes and all(r["true"] > 0 and r["predicted"] > 0 for r in sizes)
    # the overhead section ran and reported both costs; how large they are is timed alone
    # (test_tracing_overhead.py): beside two other tests here, the tracer once read 1.77x
    cost = report["overhead"][0]
    assert cost["ratio"] > 0 and cost["widget_ratio"] > 0 and cost["traced_thread_cpu"] > 0
    latencies = report["cancel"][0]["rows"]
    assert {r["how"] for r in latencies} == {"cancel", "ctrl-c"} and all(r["seconds"] < 10 for r in latencies)
    assert report["machine"]["cores"] >= 1
    assert bench.markdown(report) == md
