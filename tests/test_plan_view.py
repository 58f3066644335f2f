"""The plan view (static HTML, the Optimize tab's body): the answer in one line, predicted and
measured paired per configuration, the prediction as the only model figure, the details folded.

Plans here are built by hand from real result objects (Speedup from ratios, Prediction, the
cache decision): the view only formats what a plan holds, so its words are checked exactly.
"""

import dataclasses
import html
import re

from plumbkit.engine.compare import Comparison, Result, Speedup
from plumbkit.engine.optimization import AUTOTUNE_WITH, AUTOTUNE_WITH_DISK, Plan
from plumbkit.model.demand import ModelDemand
from plumbkit.model.plan import CacheDecision
from plumbkit.planning.predict import TRAINING_STEP, Prediction
from plumbkit.planning.right_size import RightSizing
from plumbkit.render.html import AUTOTUNE_NOTE, plan_headline, plan_html
from plumbkit.model.protocol import Protocol
from plumbkit.render.text import cache_row, plan_text
from plumbkit.widgets.optimize_panel import done_message

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
    assert plan.predicted_speedup == 484.0 / 110.0
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



def compared(plan: Plan, rounds: dict[str, list[float]]) -> Plan:
    """``plan`` with a comparison whose rounds are ``rounds`` (name -> minibatches/s a round)."""
    results = {name: Result(name, list(r)) for name, r in rounds.items()}
    return dataclasses.replace(plan, comparison=Comparison(results, Protocol(rounds=3)))


def test_a_rival_that_beats_the_plan_is_said_under_the_headline_in_every_view():
    """AUTOTUNE given the plan's own cache and prefetch measured faster than the plan in every
    round: the headline over yours stays, and the line under it says the rival won and what that
    means; the text view says the same."""
    plan = compared(plan_with((5.0, 5.2, 5.4)), {"yours": [100, 100, 100], "plumbkit": [500, 520, 540],
                                                 AUTOTUNE_WITH: [600, 610, 640]})
    rival = plan.rival_speedup
    assert rival.over == AUTOTUNE_WITH and rival.measurable and not rival.faster
    above = plan_html(plan).split("<details")[0]
    line = re.search(r"<div class='plumbkit-rival'[^>]*>(.*?)</div>", above).group(1)
    assert html.unescape(line).startswith(f"plan over {AUTOTUNE_WITH} (AUTOTUNE given the plan's caches and prefetch)")
    assert "0.84× slower" in line and "tf.data's own tuning beat the plan's settings" in html.unescape(line)
    assert html.unescape(line) in plan_text(plan).replace("\n  ", "\n")
    # a rival inside the spread: no measurable change, and no reading of it
    tied = compared(plan, {"plumbkit": [500, 520, 540], AUTOTUNE_WITH: [480, 530, 600]})
    assert tied.rival_speedup.verdict.startswith("no measurable change") and "tuning beat" not in plan_html(tied)


def test_the_rival_of_a_plan_with_a_disk_tier_is_autotune_over_the_same_tier_and_none_without_a_comparison():
    rounds = {"plumbkit": [500, 520, 540], AUTOTUNE_WITH: [100, 100, 100], AUTOTUNE_WITH_DISK: [250, 260, 270]}
    plan = compared(plan_with((5.0, 5.2, 5.4)), rounds)
    assert plan.rival_speedup.over == AUTOTUNE_WITH_DISK and plan.rival_speedup.ratio == 2.0
    assert "<div class='plumbkit-rival'" in plan_html(plan) and "2.00× faster" in plan_html(plan)
    assert plan_with((5.0, 5.2, 5.4)).rival_speedup is None and "plumbkit-rival" not in plan_html(plan_with((5.0, 5.2, 5.4)))
    assert compared(plan_with((1.0,), changes=()), rounds).rival_speedup is None  # nothing changed: no rival

# -- with a model in the loop (issue 27 item 5) and the cache row (issue 26) ------------------------
# Test inputs, labelled: training steps/s measured alike (yours, AUTOTUNE, the plan), the model
# alone on ideal input, each configuration's own training prediction and the plan's binding.
STEPS_MEASURED = {"yours": 20.0, "autotune": 25.0, "plumbkit": 26.0}
STEPS_PREDICTED = {"yours": 21.0, "plumbkit": 27.5}
IDEAL_STEPS = 30.0
STEP_BINDING = TRAINING_STEP


def _step_prediction(throughput: float) -> Prediction:
    return Prediction(throughput=throughput, binding=STEP_BINDING,
                      limits={STEP_BINDING: throughput, "CPU (2 cores)": 40.0}, cpu_per_batch=0.03,
                      free=frozenset())


def trained(plan: Plan, *, right_sized: bool) -> Plan:
    """``plan`` as optimize(..., model=) leaves it: the demand, the training figures and, where
    the model binds, the right-sizing and its note among the notes (as engine/right_sizing adds it)."""
    demand = ModelDemand(ideal_steps_per_s=IDEAL_STEPS, steps_per_s=20.0, input_bound=0.02,
                         cpu_per_step=0.01, kind="keras model")
    sizing = RightSizing(changes=[], prediction=_step_prediction(STEPS_PREDICTED["plumbkit"]),
                         fastest=_step_prediction(29.0), threads=1, fastest_threads=3,
                         dropped_cache="map(f)", demand=IDEAL_STEPS) if right_sized else None
    return dataclasses.replace(
        plan, model=demand, steps_baselines=dict(STEPS_MEASURED), measured_steps_per_s=STEPS_MEASURED["plumbkit"],
        ideal_steps_per_s=IDEAL_STEPS, step_prediction=_step_prediction(STEPS_PREDICTED["plumbkit"]),
        steps_predictions=dict(STEPS_PREDICTED), right_sizing=sizing,
        notes=plan.notes + ([sizing.note] if sizing else []))


def test_with_a_model_the_view_shows_the_verdict_and_training_steps_per_s_measured_and_predicted():
    plan = trained(plan_with((5.0, 5.2, 5.4)), right_sized=False)
    view = plan_html(plan)
    above = view.split("<details")[0]
    assert f"<b>training</b> (keras model): {html.escape(plan.model.verdict)}" in above
    assert plan.model.verdict.startswith("model-bound")
    table = above.split("<b>training steps/s</b>")[1]
    rows = dict(re.findall(r"<tr class='plumbkit-training-config'><td>([^<]+)</td>(.*?)</tr>", table))
    assert list(rows) == ["yours", "autotune", "plumbkit", "ideal input (the model alone)"]
    assert "<th>predicted</th>" in table  # every predicted figure sits under that label
    top = IDEAL_STEPS
    for name, measured in [*STEPS_MEASURED.items(), ("ideal input (the model alone)", IDEAL_STEPS)]:
        (predicted_px, _), (measured_px, _) = re.findall(r"width:(\d+)px;background:(#\w+)", rows[name])
        assert rows[name].startswith(f"<td>{measured:,.1f}</td>"), (name, rows[name])
        assert int(measured_px) == round(240 * measured / top), (name, rows[name])
        if name in STEPS_PREDICTED:
            assert int(predicted_px) == round(240 * STEPS_PREDICTED[name] / top), (name, rows[name])
        else:
            assert predicted_px == "0", (name, rows[name])
    # the plan's predicted figure beside its own binding; yours' alone; AUTOTUNE's none
    assert f"<td>27.5 <span style='color:#777;font-size:11px'>bound by {html.escape(STEP_BINDING)}</span></td>" \
        in rows["plumbkit"]
    assert "<td>21.0</td>" in rows["yours"] and "bound by" not in rows["yours"]
    assert AUTOTUNE_NOTE in rows["autotune"]
    assert "right-sized" not in view  # not right-sized: no note
    text = str(plan)
    assert f"training step, in the loop: {plan.model.verdict}" in text
    assert "training steps/s of the plan, predicted before any rewrite: 27.5, bound by " + STEP_BINDING in text
    assert re.search(r"\n    plumbkit +26\.0 +27\.5 \(bound by the training step", text), text
    assert re.search(r"\n    ideal input \(the model alone\) +30\.0 +—\n", text), text
    assert done_message(plan) == ("done: measured 520.0 minibatches/s, predicted 484.0; "
                                  "training: measured 26.0 steps/s, predicted 27.5")


def test_a_right_sized_plan_says_what_it_gives_back_under_the_headline_once():
    plan = trained(plan_with((5.0, 5.2, 5.4)), right_sized=True)
    note = plan.right_sizing.note
    assert "2 of the fastest plan's 3 pipeline threads" in note and "the cache after map(f)" in note
    view, text = plan_html(plan), str(plan)
    above, details = view.split("<details")
    assert f"<div class='plumbkit-right-sizing'><b>right-sized</b>: {html.escape(note)}</div>" in above
    assert html.escape(note) not in details and "a note" in details  # the other notes stay there
    assert text.count(note) == 1 and f"\n  right-sized: {note}\n" in text and "note: a note" in text


def test_without_a_model_there_is_no_training_line_table_or_figure():
    plan = plan_with((5.0, 5.2, 5.4))
    view, text = plan_html(plan), str(plan)
    for said in ("training", "steps/s", "right-sized", "plumbkit-training"):
        assert said not in view and said not in text, said
    assert done_message(plan) == "done: measured 520.0 minibatches/s, predicted 484.0"


def test_the_cache_row_says_the_tier_where_how_large_and_what_filling_it_costs():
    fill = Prediction(throughput=50.0, binding="disk writes", limits={"disk writes": 50.0},
                      cpu_per_batch=0.01, free=frozenset())
    base = plan_with((5.0, 5.2, 5.4))
    memory = dataclasses.replace(base, cache=CacheDecision(label="map(f)", node="map", bytes=2e9, budget=4e9,
                                                           why="fits"), fill_prediction=fill, fill_seconds=12.0)
    assert cache_row(memory) == ("in memory at map(f): 2.0 GB of a 4.0 GB budget; its first epoch fills it "
                                 "at 50.0 minibatches/s predicted (disk writes), ~12.0 s")
    disk = dataclasses.replace(memory, cache=dataclasses.replace(memory.cache, tier="disk", directory="/data/pk"))
    assert cache_row(disk) == ("on disk at map(f): 2.0 GB in /data/pk; its first epoch writes it "
                               "at 50.0 minibatches/s predicted (disk writes), then reads it back: ~12.0 s in all")
    assert f"<b>cache</b>: {html.escape(cache_row(disk))} — fits" in plan_html(disk)
    assert f"cache: {cache_row(disk)} — fits" in str(disk)
    assert cache_row(base) == "none new"
