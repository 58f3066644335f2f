"""The stepping widget: bottleneck steps vs random steps, plotted step by step (paper Figure 6).

Each click is one scheduled operation (a step, or a walk of N steps for both policies): it stops
the live trace first, waits for any other measurement, shows its phase and can be cancelled;
the steps completed before a Cancel are kept.
"""

from __future__ import annotations

import html
import random
from typing import Any, Callable, MutableMapping

import ipywidgets as w

from ..engine.measuring import measure
from ..engine.scheduler import SCHEDULER, Cancelled, State, current, operation
from ..engine.stepping import Step, Walk, step_from
from ..engine.trace_result import Trace
from ..tfdata.graph import resolve_pipeline
from .common import Runner, in_cell_mode, svg_lines


class SteppingWidget(w.VBox):
    """Buttons for one bottleneck step, one random step, or walking both N steps; Cancel.

    The pipeline after the last step is stored in ``namespace[var_name]``.
    """

    def __init__(self, pipeline: Any, *, namespace: MutableMapping[str, Any] | None = None,
                 var_name: str = "plumbed_ds", seconds: float = 2.0, seed: int = 0, verbose: bool = False):
        self.pipeline = pipeline
        self.verbose = verbose
        self.namespace = namespace if namespace is not None else {}
        self.var_name = var_name
        self.seconds = seconds
        self.walks = {"bottleneck": Walk(policy="bottleneck"), "random": Walk(policy="random")}
        self.error: str | None = None
        self.on_finished: list[Callable[["SteppingWidget"], None]] = []
        self._rng_seed = seed
        self.runner = Runner()
        self.bottleneck_button = w.Button(description="Bottleneck step", button_style="danger")
        self.random_button = w.Button(description="Random step")
        self.steps = w.BoundedIntText(value=4, min=1, max=50, description="N", layout=w.Layout(width="120px"))
        self.walk_button = w.Button(description="Walk both N steps")
        self.cancel_button = w.Button(description="Cancel", icon="times", disabled=True,
                                      tooltip="stop; the steps completed so far are kept")
        self.bottleneck_button.on_click(lambda _: self.run("bottleneck"))
        self.random_button.on_click(lambda _: self.run("random"))
        self.walk_button.on_click(lambda _: self.run("both"))
        self.cancel_button.on_click(lambda _: self.cancel())
        self.progress = w.FloatProgress(value=0.0, min=0.0, max=1.0, layout=w.Layout(width="200px"))
        self.chart = w.HTML()
        self.chart.add_class("plumbkit-step-chart")
        self.history = w.HTML()
        self.history.add_class("plumbkit-step-history")
        self.status = w.Label(f"each step traces for {seconds:g} s; the newest pipeline is stored as `{var_name}`")
        super().__init__([w.HBox([self.bottleneck_button, self.random_button, self.steps, self.walk_button,
                                  self.cancel_button]),
                          w.HBox([self.progress, self.status]), self.chart, self.history])
        SCHEDULER.watch(self._scheduler_changed)

    # -- actions ---------------------------------------------------------------------------
    def _work(self, what: str) -> Callable[[], Step | None]:
        if what == "both":
            n = int(self.steps.value)
            return lambda: _walk_both(self, n, on_progress=self._on_progress, verbose=self.verbose)
        return lambda: _one_step(self, what, on_progress=self._on_progress, verbose=self.verbose)

    def run(self, what: str) -> None:
        """``"bottleneck"``, ``"random"`` or ``"both"`` (N steps each) in the background."""
        if self.runner.running:
            self.status.value = "busy: a step is still running"
            return
        self._set_busy(True)
        self.runner.start(self._work(what), on_done=lambda job: self._done(job.error))

    def run_here(self, what: str = "bottleneck") -> Step | None:
        """One step in this thread (``%%plumb --step``); Ctrl-C ends it, completed steps stay."""
        self._set_busy(True, in_cell=True)
        result, error = None, None
        try:
            result = self.runner.run_here(self._work(what))
        except (Cancelled, KeyboardInterrupt, Exception) as err:  # noqa: BLE001 - shown in the widget
            error = err
        self._done(error)
        return result

    def cancel(self) -> None:
        self.status.value = "cancelling…"
        self.runner.cancel()

    def _set_busy(self, busy: bool, in_cell: bool = False) -> None:
        for b in (self.bottleneck_button, self.random_button, self.walk_button):
            b.disabled = busy or SCHEDULER.state().busy
        in_cell_mode(self.cancel_button, in_cell, "Cancel", "stop; the steps completed so far are kept")
        self.cancel_button.disabled = in_cell or not busy
        if busy:
            self.progress.value, self.progress.bar_style = 0.0, ""

    def _on_progress(self, message: str, fraction: float) -> None:
        self.status.value, self.progress.value = message, fraction

    def _done(self, error: BaseException | None) -> None:
        self._set_busy(False)
        if error is None:
            self.error = None
            self.status.value, self.progress.value, self.progress.bar_style = "ready", 1.0, "success"
        elif isinstance(error, (Cancelled, KeyboardInterrupt)):
            why = error.reason if isinstance(error, Cancelled) else "interrupted"
            self.error = f"{why}: the steps completed before it are kept"
            self.status.value, self.progress.bar_style = self.error, "warning"
        else:
            self.error = f"{type(error).__name__}: {error}"
            self.status.value, self.progress.bar_style = f"error: {self.error}", "danger"
        self.redraw()
        for callback in self.on_finished:
            callback(self)

    def _scheduler_changed(self, state: State) -> None:
        busy = self.runner.running or state.busy
        for b in (self.bottleneck_button, self.random_button, self.walk_button):
            b.disabled = busy

    def wait(self, timeout: float | None = None) -> None:
        self.runner.wait(timeout)

    def start_from(self, trace: Trace) -> None:
        """Use an existing trace of the user's pipeline as both walks' starting point."""
        for walk in self.walks.values():
            if walk.start is None and not walk.steps:
                walk.start = trace

    # -- steps (run inside a scheduled operation) --------------------------------------------
    def _start_of(self, walk: Walk):
        if walk.start is None:
            current().progress(f"tracing the starting pipeline ({walk.policy} walk)", 0.0)
            walk.start = measure(resolve_pipeline(self.pipeline), seconds=self.seconds)
        last = walk.steps[-1] if walk.steps else None
        ds = last.dataset if last else resolve_pipeline(self.pipeline)
        before = (last.after if last and last.after else walk.start)
        return ds, before

    def step_once(self, policy: str, done: float = 0.0, share: float = 1.0) -> Step:
        walk = self.walks[policy]
        ds, before = self._start_of(walk)
        current().progress(f"{policy} step {len(walk.steps) + 1}: choosing and measuring", done + share / 2)
        rng = random.Random(self._rng_seed + len(walk.steps))
        s = step_from(ds, before, policy=policy, rng=rng, seconds=self.seconds, cores=None)
        walk.steps.append(s)
        self.namespace[self.var_name] = s.dataset
        self.redraw()
        return s

    # -- drawing ---------------------------------------------------------------------------
    def redraw(self) -> None:
        series = {f"{p} walk": wk.throughputs for p, wk in self.walks.items() if wk.throughputs}
        self.chart.value = svg_lines(series, x_label="step →", y_label="minibatches/s (measured)", marked=True)
        rows = []
        for p, wk in self.walks.items():
            chosen = ", ".join(f"{i + 1}: {html.escape(str(o))}" for i, o in enumerate(wk.operators))
            rows.append(f"<div><b>{p}</b>: {chosen or '—'}</div>")
        self.history.value = "".join(rows)

    def static_html(self) -> str:
        return self.history.value if any(wk.steps for wk in self.walks.values()) else ""


@operation("step")
def _one_step(widget: SteppingWidget, policy: str, on_progress=None) -> Step:
    """One step for the widget, as a scheduled operation (stops the live trace, can be cancelled)."""
    return widget.step_once(policy)


@operation("walk")
def _walk_both(widget: SteppingWidget, n: int, on_progress=None) -> Step | None:
    """N steps of each policy, alternating, as one scheduled operation."""
    last = None
    total = 2 * n
    for i in range(n):
        for k, policy in enumerate(("bottleneck", "random")):
            last = widget.step_once(policy, done=(2 * i + k) / total, share=1 / total)
    return last
