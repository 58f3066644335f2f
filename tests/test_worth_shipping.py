"""Changes ship only where the plan's own prediction says they gain: threads, then the plan (no TensorFlow)."""

import pytest

from plumbkit.model.pipeline import Operator, Pipeline
from plumbkit.model.plan import Change
from plumbkit.planning.predict import Evidence, RuntimeCosts, layout_as_traced, layout_with, predict
from plumbkit.planning.decisions import Declined, batches_as_written, decided_again, resaid
from plumbkit.planning.worth_shipping import plan_worth_its_changes, threads_worth_their_cost
from plumbkit.tunables import PREDICTED_GAIN

pytestmark = pytest.mark.concurrent  # checks what is decided, not a speed (tests/run)


def chain(*ops: tuple[str, str, str]) -> Pipeline:
    """A linear pipeline, root first, from (name, op, kind); each operator reads the next one."""
    linked = [Operator(name=n, op=op, kind=kind, inputs=(ops[i + 1][0],) if i + 1 < len(ops) else (), label=f"{kind}({n})")
              for i, (n, op, kind) in enumerate(ops)]
    return Pipeline(operators={o.name: o for o in linked}, root=linked[0].name)


PIPE = chain(("batch", "BatchDatasetV2", "batch"), ("heavy", "MapDataset", "map"),
             ("light", "MapDataset", "map"), ("src", "RangeDataset", "range"))


def evidence(cost: dict, cores: float, **kw) -> Evidence:
    return Evidence(pipeline=PIPE, cost={"batch": 0.0, "src": 0.0, **cost}, visits={"batch": 1, "heavy": 16, "light": 16, "src": 16},
                    cores=cores, sequential=frozenset({"src"}), runtime=RuntimeCosts(handoff=2e-5), **kw)


def threads(node: str, k: int) -> Change:
    return Change("parallelism", f"map({node})", node, k, "LP")


PREFETCH = Change("prefetch", "batch(batch)", "batch", 2, "overlap")


def test_a_light_maps_threads_that_gain_nothing_are_dropped_and_the_heavy_ones_kept():
    """On 2 cores the heavy map binds; the light map's work fits on the heavy pool's runner thread,
    so its two threads only add hand-offs: it keeps the form you wrote, with a note saying why."""
    ev = evidence({"heavy": 0.05, "light": 0.001}, cores=2)
    changes = [threads("heavy", 2), threads("light", 2), PREFETCH]
    kept, notes = threads_worth_their_cost(ev, changes)
    assert kept == [threads("heavy", 2), PREFETCH]
    assert len(notes) == 1 and notes[0].startswith("map(light) keeps what you wrote (1 thread):")
    # the plan shipped is predicted no slower than the one proposed (hand-offs saved)
    assert predict(ev, layout_with(ev, kept)).throughput >= predict(ev, layout_with(ev, changes)).throughput


def test_threads_the_prediction_needs_are_kept():
    """Negative control: on 4 cores, without its threads the medium map alone on the heavy pool's
    runner thread would bind (33/s against 50/s): both keep their threads."""
    ev = evidence({"heavy": 0.04, "light": 0.03}, cores=4)
    changes = [threads("heavy", 2), threads("light", 2), PREFETCH]
    without_light = predict(ev, layout_with(ev, [threads("heavy", 2), PREFETCH])).throughput
    assert without_light * PREDICTED_GAIN < predict(ev, layout_with(ev, changes)).throughput
    assert threads_worth_their_cost(ev, changes) == (changes, [])


def test_fewer_threads_than_you_wrote_are_left_to_the_plan():
    """A map you wrote with 4 threads, planned with 2: predicted no faster, but it saves CPU a
    training step can use; only extra threads are dropped."""
    ev = evidence({"heavy": 0.05, "light": 0.001}, cores=2, threads_seen={"light": 4})
    changes = [threads("heavy", 2), threads("light", 2)]
    assert threads_worth_their_cost(ev, changes)[0] == changes


def test_threads_that_fill_a_cache_in_the_first_epoch_are_left_to_the_plan():
    """Below a cache an operator is free in steady state: its threads are planned on the fill's
    prediction, not this one."""
    ev = evidence({"heavy": 0.05, "light": 0.001}, cores=2)
    changes = [Change("cache", "map(heavy)", "heavy", None, "cache"), threads("heavy", 2), threads("light", 2)]
    assert threads_worth_their_cost(ev, changes)[0] == changes


def test_a_plan_predicted_no_faster_than_yours_leaves_your_pipeline_as_written():
    """Your heavy map already has the two threads the cores allow: halving the light map's
    threads and adding a prefetch is predicted to gain nothing, so nothing ships, and the note
    names the changes weighed and both figures."""
    ev = evidence({"heavy": 0.05, "light": 0.001}, cores=2, threads_seen={"heavy": 2, "light": 4})
    changes = [threads("light", 2), PREFETCH]
    plan = predict(ev, layout_with(ev, changes)).throughput
    assert plan < predict(ev, layout_as_traced(ev)).throughput * PREDICTED_GAIN
    kept, notes = plan_worth_its_changes(ev, changes)
    assert kept == []
    assert len(notes) == 1 and notes[0].startswith("your pipeline stays as you wrote it: the plan (map(light): parallelism 2")
    assert "prefetch" in notes[0] and "for yours" in notes[0]


def test_a_plan_predicted_faster_than_yours_ships():
    """Negative control: your heavy map runs sequentially; two threads there are predicted nearly
    twice as fast, so the plan ships unchanged and says nothing."""
    ev = evidence({"heavy": 0.05, "light": 0.001}, cores=2)
    changes = [threads("heavy", 2), PREFETCH]
    assert predict(ev, layout_with(ev, changes)).throughput > 1.5 * predict(ev, layout_as_traced(ev)).throughput
    assert plan_worth_its_changes(ev, changes) == (changes, [])
    assert plan_worth_its_changes(ev, []) == ([], [])


def test_a_change_left_out_is_said_with_the_figures_of_the_prediction_shown():
    """decide() weighs a parallel batch on the trace's evidence; optimize() predicts the plan
    again once the operators it parallelizes are calibrated with calls in flight (here the heavy
    map cheaper so). The note is said again on that evidence: its "predicted so" figure is the
    shipped plan's prediction. Said on the first evidence, it is not (the bench's image row
    printed "554 predicted so" beside a plan predicted at 625)."""
    first = evidence({"heavy": 0.05, "light": 0.001}, cores=2)
    later = evidence({"heavy": 0.03, "light": 0.001}, cores=2)
    batch = Change("parallelism", "batch(batch)", "batch", 2, "LP")
    changes = [threads("heavy", 2), batch, PREFETCH]
    shipped, _, declined = batches_as_written(first, changes, predict(first, layout_with(first, changes)))
    assert shipped == [threads("heavy", 2), PREFETCH] and len(declined) == 1
    shown = predict(later, layout_with(later, shipped)).throughput
    said_so = f"batch(batch) keeps the form you wrote (sequential): {shown:,.0f} minibatches/s are predicted so"
    assert not declined[0].note.startswith(said_so)  # negative control: the first evidence's figure
    notes = ["another note", declined[0].note]
    again = resaid(notes, declined, later, predict(later, layout_with(later, shipped)), shipped)
    assert again[0] == "another note" and again[1].startswith(said_so), again
    with_it = predict(later, layout_with(later, shipped + [batch])).throughput
    assert f"{with_it:,.0f} with a parallel batch" in again[1]
    # where nothing ships, nothing was left out of a plan: the note goes
    assert resaid(notes, declined, later, predict(later, layout_as_traced(later)), []) == ["another note"]


def _kept_at(plan, alternative) -> str:
    """A reason planted for the pure tests: both figures it was said with."""
    return f"kept at {plan.throughput:,.1f}, not {alternative.throughput:,.1f}"


def test_a_whole_layout_left_out_is_said_against_the_plan_that_ships():
    """A disk tier not placed was weighed as a whole other layout (its own cache and threads),
    not the plan plus a change: said again, its figure is that layout's on the later evidence,
    and the plan's figure is the shipped plan's."""
    first = evidence({"heavy": 0.05, "light": 0.001}, cores=2)
    later = evidence({"heavy": 0.03, "light": 0.001}, cores=2)
    shipped, other = [threads("heavy", 2), PREFETCH], [threads("light", 2)]
    left = Declined.weighed(other, _kept_at, predict(first, layout_with(first, shipped)),
                            predict(first, layout_with(first, other)), whole=True)
    plan, alternative = (predict(later, layout_with(later, c)).throughput for c in (shipped, other))
    said = left.said(later, predict(later, layout_with(later, shipped)), shipped)
    assert said == f"kept at {plan:,.1f}, not {alternative:,.1f}" and said != left.note
    # negative control: read as the plan plus those changes, the figure is another layout's
    plus = predict(later, layout_with(later, shipped + other)).throughput
    assert f"{plus:,.1f}" != f"{alternative:,.1f}"


def test_a_plan_decided_again_says_only_what_weighs_against_the_plan_that_ships():
    """Where the plan's cache overflows its budget while filling, the plan is decided again
    without it. A change the first decision left out was weighed against the first plan (its
    figures are that plan's): it goes, and the second decision's own notes come in. A whole layout
    left out (a disk tier not placed) still stands beside whatever plan ships: it is kept, and
    said again beside the second plan's prediction."""
    first = evidence({"heavy": 0.05, "light": 0.001}, cores=2)
    cached, bare = [threads("heavy", 2), PREFETCH], [threads("heavy", 2)]
    before = predict(first, layout_with(first, cached))
    prefetch_left = Declined.weighed([PREFETCH], _kept_at, before, before)
    tier_left = Declined.weighed([threads("light", 2)], _kept_at, before,
                                 predict(first, layout_with(first, [threads("light", 2)])), whole=True)
    notes = ["the trace's scale note", prefetch_left.note, tier_left.note, "a disk probe's note"]
    second_left = Declined.weighed([threads("light", 3)], _kept_at, before, before)
    again_notes = ["the trace's scale note", second_left.note]
    merged, declined = decided_again(notes, [prefetch_left, tier_left], again_notes, [second_left])
    assert merged == ["the trace's scale note", tier_left.note, "a disk probe's note", second_left.note], merged
    assert declined == [second_left, tier_left]
    # said beside the second plan's prediction (on the evidence it is made from): that plan's figure
    later = evidence({"heavy": 0.03, "light": 0.001}, cores=2)
    shown = predict(later, layout_with(later, bare))
    said = resaid(merged, declined, later, shown, bare)
    assert f"kept at {shown.throughput:,.1f}" in said[1] and said[1] != tier_left.note, said
    # negative control: the first decision's notes kept whole would say the first plan's figures
    assert prefetch_left.note in notes + again_notes and prefetch_left.note not in said
