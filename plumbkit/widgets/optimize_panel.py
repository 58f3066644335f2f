"""The optimize panel: one click (or ``%%plumb --optimize``) runs the full optimization with a
progress bar naming the phase and a Cancel, then shows the answer in one line (the plan against
yours, measured, then as predicted), each configuration's prediction and measurement as paired
bars, the changes, and the rest folded (what binds the prediction, the allocation, the cache,
notes); with a model in the loop, training steps/s the same way, the verdict and what a right-sized
plan gives back; it exports the optimized pipeline as the user's own cell."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Callable

import ipywidgets as w

from ..engine import optimize
from ..engine.compare import PROTOCOLS
from ..engine.optimization import Plan
from ..engine.scheduler import SCHEDULER, Cancelled, State
from ..export.source import CodegenError
from ..model.disk_tier import default_cache_dir
from ..model.units import parse_bytes
from ..render.html import partial_plan_html, plan_html
from . import lab
from .common import Runner, in_cell_mode


class OptimizePanel(w.VBox):
    """Optimize and Cancel buttons with progress; the result; Export (code box, save to .py)."""

    def __init__(self, pipeline: Any, *, cell_source: str | None = None, seconds: float = 4.0,
                 cores: int | None = None, memory_budget: float | None = None, verbose: bool = False,
                 protocol: str = "quick", disk_budget: float | None = None, cache_dir: str | None = None):
        self.pipeline, self.cell_source = pipeline, cell_source
        self.verbose = verbose
        self.options = dict(seconds=seconds, cores=cores, memory_budget=memory_budget,
                            protocol=PROTOCOLS[protocol])
        self.plan: Plan | None = None
        self.error: str | None = None
        self.on_finished: list[Callable[["OptimizePanel"], None]] = []
        self.runner = Runner()
        lab.frontend()  # connect to JupyterLab now, so Export can insert a cell on the first click
        self.button = w.Button(description="Optimize", button_style="success", icon="rocket",
                               tooltip="stops the live trace, then runs the full optimization")
        self.button.on_click(lambda _: self.run())
        self.cancel_button = w.Button(description="Cancel", icon="times", disabled=True,
                                      tooltip="stop the optimization; what was measured is kept")
        self.cancel_button.on_click(lambda _: self.cancel())
        self.progress = w.FloatProgress(value=0.0, min=0.0, max=1.0, description="",
                                        layout=w.Layout(width="300px"))
        self.message = w.Label("")
        self.message.add_class("plumbkit-phase")
        self.result = w.HTML()
        self.result.add_class("plumbkit-result")
        # the disk tier: off unless a budget is typed (the plan then offers it with the space it needs)
        self.disk_budget = w.Text(value=f"{disk_budget:g}B" if disk_budget else "", placeholder="off, e.g. 2GB",
                                  description="disk budget", layout=w.Layout(width="220px"))
        self.cache_dir = w.Text(value=str(cache_dir or default_cache_dir()), description="cache dir",
                                layout=w.Layout(width="360px"))
        self.export_button = w.Button(description="Export", icon="download", disabled=True)
        self.export_button.on_click(lambda _: self.export())
        self.code = w.Textarea(layout=w.Layout(width="100%", height="160px"))
        self.filename = w.Text(value="optimized_pipeline.py", layout=w.Layout(width="220px"))
        self.save_button = w.Button(description="Save .py", disabled=True)
        self.save_button.on_click(lambda _: self.save())
        super().__init__([w.HBox([self.button, self.cancel_button, self.progress]),
                          w.HBox([self.disk_budget, self.cache_dir]), self.message,
                          self.result, w.HBox([self.export_button, self.filename, self.save_button]),
                          self.code])
        SCHEDULER.watch(self._scheduler_changed)

    # -- running ---------------------------------------------------------------------------
    def _optimize(self) -> Plan:
        disk = parse_bytes(self.disk_budget.value.strip() or None, "disk budget")
        return optimize(self.pipeline, on_progress=self._on_progress, verbose=self.verbose, disk_budget=disk,
                        cache_dir=self.cache_dir.value.strip() or None, **self.options)

    def run(self) -> None:
        """Optimize in the background (a click): the live trace is stopped first, and says so."""
        if self.runner.running:
            return
        self._begin()
        self.runner.start(self._optimize, on_done=self._done)

    def run_here(self) -> Plan | None:
        """Optimize in this thread (``%%plumb --optimize``); Ctrl-C ends it with what was measured."""
        self._begin(in_cell=True)
        result, error = None, None
        try:
            result = self.runner.run_here(self._optimize)
        except (Cancelled, KeyboardInterrupt, Exception) as err:  # noqa: BLE001 - shown in the panel
            error = err
        self._show(result, error)
        return self.plan

    def cancel(self) -> None:
        self.message.value = "cancelling…"
        self.runner.cancel()

    def _begin(self, in_cell: bool = False) -> None:
        self.plan, self.error = None, None
        self.button.disabled = True
        in_cell_mode(self.cancel_button, in_cell, "Cancel", "stop the optimization; what was measured is kept")
        self.progress.value, self.progress.bar_style = 0.0, ""
        self.message.value = "waiting for the measuring slot…"
        self.result.value = ""

    def _on_progress(self, message: str, fraction: float) -> None:
        self.progress.value, self.message.value = fraction, message

    def _done(self, job) -> None:
        self._show(job.result, job.error)

    def _show(self, plan: Plan | None, error: BaseException | None) -> None:
        self.button.disabled = SCHEDULER.state().busy
        in_cell_mode(self.cancel_button, False, "Cancel", "stop the optimization; what was measured is kept")
        self.cancel_button.disabled = True
        if error is not None or plan is None:
            self.error = _one_line(error)
            self.message.value = f"error: {self.error}" if not isinstance(
                error, (Cancelled, KeyboardInterrupt)) else self.error
            self.progress.bar_style = "danger"
        else:
            self.plan = plan
            if plan.partial:
                self.result.value = partial_plan_html(plan)
                self.message.value = plan.notes[0] if plan.notes else "cut short"
                self.progress.bar_style = "warning"
            else:
                self.result.value = plan_html(plan)
                self.progress.value, self.progress.bar_style = 1.0, "success"
                self.message.value = done_message(plan)
                self.export_button.disabled = self.cell_source is None
        for callback in self.on_finished:
            callback(self)

    def _scheduler_changed(self, state: State) -> None:
        """Optimize is off while another measurement (not a live trace) runs or this one does."""
        self.button.disabled = self.runner.running or state.busy

    def wait(self, timeout: float | None = None) -> Plan | None:
        self.runner.wait(timeout)
        return self.plan

    # -- export ----------------------------------------------------------------------------
    def rewritten_cell(self) -> str:
        """The user's cell with the plan written in (or the changes as comments if it cannot be)."""
        if self.plan is None or self.cell_source is None:
            return ""
        try:
            return self.plan.rewrite_source(self.cell_source)
        except CodegenError as err:
            return f"# plumbkit could not rewrite this cell: {err}\n# changes:\n" + "\n".join(
                f"#  - {c}" for c in self.plan.changes)

    def show_code(self, code: str) -> None:
        self.code.value = code
        self.save_button.disabled = not code

    def export(self) -> str:
        """Put the rewritten cell in the copyable box and, in JupyterLab, insert it as a new cell
        below (through JupyterLab's commands: a widget callback cannot use ``set_next_input``,
        ipython/ipython#4983). Elsewhere ``%plumb export`` adds the cell from its own execution."""
        code = self.rewritten_cell()
        if not code:
            return ""
        self.show_code(code)
        if lab.insert_cell_below(code):
            self.message.value = "inserted the optimized cell below; the code is also in the box"
        else:
            self.message.value = "copy the code from the box, save it, or run %plumb export for a new cell"
        return code

    def save(self) -> Path:
        path = Path(self.filename.value)
        path.write_text(self.code.value)
        self.message.value = f"saved {path}"
        return path

    def static_html(self) -> str:
        """The result for a rendered notebook (no widget state there)."""
        if self.plan is None:
            return f"<div>{html.escape(self.message.value)}</div>" if self.message.value else ""
        return partial_plan_html(self.plan) if self.plan.partial else plan_html(self.plan)


def done_message(plan: Plan) -> str:
    """The phase line once a plan is shown: its figures measured and predicted, minibatches/s and,
    with a model in the loop, training steps/s."""
    said = (f"done: measured {plan.measured_throughput:,.1f} minibatches/s, "
            f"predicted {plan.predicted_throughput:,.1f}")
    if plan.model is None:
        return said
    measured = f"{plan.measured_steps_per_s:,.1f}" if plan.measured_steps_per_s else "—"
    predicted = f"{plan.predicted_steps_per_s:,.1f}" if plan.predicted_steps_per_s is not None else "—"
    return f"{said}; training: measured {measured} steps/s, predicted {predicted}"


def _one_line(error: BaseException | None) -> str:
    if error is None:
        return "no result"
    if isinstance(error, KeyboardInterrupt):
        return "interrupted before anything was measured"
    if isinstance(error, Cancelled):
        return f"{error.reason} before anything was measured"
    return f"{type(error).__name__}: {error}"
