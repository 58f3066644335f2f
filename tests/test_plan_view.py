"""The plan view (static HTML, the Optimize tab's body): the answer in one line, predicted and
measured paired per configuration, the prediction as the only model figure, the details folded.

Plans here are built by hand from real result objects (Speedup from ratios, Prediction, the
cache decision): the view only formats what a plan holds, so its words are checked exactly.
"""

import re

from plumbkit.engine.compare import Speedup
from plumbkit.engine.optimization import Plan
from plumbkit.model.plan import CacheDecision
from plumbkit.planning.predict import Prediction
from plumbkit.render.html import AUTOTUNE_NOTE, plan_headline, plan_html, predicted_speedup

MEASURED = {"yours": 100.0, "naive": 120.0, "autotune": 300.0, "plumbkit": 520.0}
PREDICTED = {"yours": 110.0, "naive": 130.0, "plumbkit": 484.0}


def plan_with(ratios: tuple[float, ...], *, changes: tuple[str, ...] = ("map(f): 2 parallel calls",)) -> Plan:
    prediction = Prediction(throughput=PREDICTED["plumbkit"], binding="CPU (2 cores)",
                            limits={"CPU (2 cores)": 484.0, "consumer thread": 2_000.0},
                            cpu_per_batch=0.004, free=frozenset())
    speedup = Speedup.of_ratios("plumbkit", "yours", ratios)
    return Plan(dataset=None, changes=list(changes), prediction=prediction,
                measured_throughput=MEASURED["plumbkit"], baseline_throughput=MEASURED["yours"],
                allocation=None, cache=CacheDecision(label=None, node=None, bytes=None, budget=0.0,
                                                     why="no memory budget"),
                theta_by_label={"map(f)": 1.6}, trace=None, baselines=dict(MEASURED),
                predictions=dict(PREDICTED), proposed_changes=list(changes), applied=speedup.faster,
                speedup=speedup, notes=["a note"])


def test_the_headline_is_the_measured_speedup_then_the_predicted_one():
    plan = plan_with((5.0, 5.2, 5.4))
    assert predicted_speedup(plan) == 484.0 / 110.0
    assert plan_headline(plan) == "5.2× faster than yours, measured; predicted 4.4×"


def test_an_unseparated_speedup_says_no_measurable_change_as_its_verdict_does():
    plan = plan_with((0.95, 1.02, 1.08))
    assert plan.speedup.verdict.startswith("no measurable change")
    assert plan_headline(plan) == f"{plan.speedup.verdict}; predicted 4.4×"


def test_a_slower_plan_says_so_and_nothing_to_change_says_that():
    assert plan_headline(plan_with((0.5, 0.6, 0.7))) == (
        "slower than yours: 0.60× its throughput, measured; predicted 4.4×")
    assert plan_headline(plan_with((1.0, 1.0, 1.0), changes=())) == (
        "nothing to change: your pipeline is returned unchanged")


def test_each_configuration_pairs_its_prediction_with_its_measurement():
    view = plan_html(plan_with((5.0, 5.2, 5.4)))
    rows = dict(re.findall(r"<tr class='plumbkit-config'><td>([^<]+)</td>(.*?)</tr>", view))
    assert list(rows) == list(MEASURED)
    for name, row in rows.items():
        bars = re.findall(r"width:(\d+)px;background:(#\w+)", row)
        assert len(bars) == 2, (name, row)  # predicted over measured, on one scale
        (predicted_px, _), (measured_px, _) = bars
        assert int(measured_px) == round(240 * MEASURED[name] / 520.0), (name, row)
        if name in PREDICTED:
            assert f"<td>{PREDICTED[name]:,.1f}</td>" in row and int(predicted_px) > 0
        else:  # AUTOTUNE picks its parallelism at run time: no prediction, no bar
            assert AUTOTUNE_NOTE in row and predicted_px == "0"


def test_the_plan_view_shows_the_prediction_alone_and_folds_the_details():
    view = plan_html(plan_with((5.0, 5.2, 5.4)))
    assert "bound" not in view.split("<details")[0]  # above the fold: no bound beside the prediction
    details = view.split("<details class='plumbkit-plan-details'>")[1]
    assert "bound by CPU (2 cores)" in details and "<b>CPU (2 cores): 484.0 (binds)</b>" in details
    assert "consumer thread: 2,000.0" in details and "map(f): 1.60" in details and "a note" in details
    assert "LP" not in view and "allocation bound" not in view
