"""plumbkit's notebook widgets (the only modules, with plumbkit.magics, that import ipywidgets).

One widget for every path: ``%%plumb`` (live trace in the background), ``%%plumb --optimize
[--export]`` and ``%%plumb --step`` (trace live, then optimize or step, in the cell) all show a
:class:`PlumbWidget`. Every measurement it starts goes through the engine's scheduler, so a
click never starts a second measurement beside the first.
"""

from __future__ import annotations

import html
from typing import Any, Mapping, MutableMapping

import ipywidgets as w

from ..engine.optimization import Plan
from ..engine.stepping import Step
from ..render.html import html_report
from .live import LiveTraceWidget
from .offload_panel import OffloadPanel
from .optimize_panel import OptimizePanel
from .stepping import SteppingWidget

TRACE_TAB, STEP_TAB, OPTIMIZE_TAB = 0, 1, 2


class PlumbWidget(w.Tab):
    """What ``%%plumb`` shows: the live trace, stepping, and the optimize panel in tabs.

    ``live=True`` starts the trace in the background at once (the cell returns); the one-shot
    paths build it with ``live=False`` and call :meth:`run_optimize` or :meth:`run_step` from the
    cell. Its display carries a static HTML copy of the results (``text/html``), refreshed when
    an operation ends, for notebooks rendered without a kernel. ``in_the_loop`` (``{"model": m}``
    or ``{"step": fn}``, what ``%%plumb --model`` / ``--train-step`` name) puts the user's training
    step in the loop of the trace (the header shows its verdict) and of the optimization.
    """

    def __init__(self, pipeline: Any, *, seconds: float = 10.0, cores: int | None = None,
                 max_batches: int | None = None, memory_budget: float | None = None,
                 disk_budget: float | None = None, cache_dir: str | None = None,
                 cell_source: str | None = None, namespace: MutableMapping[str, Any] | None = None,
                 live: bool = True, verbose: bool = False, protocol: str = "quick",
                 in_the_loop: Mapping[str, Any] | None = None):
        self.live = LiveTraceWidget(pipeline, seconds=seconds, cores=cores, max_batches=max_batches,
                                    start=False, verbose=verbose, **(in_the_loop or {}))
        step_seconds = max(1.0, min(3.0, seconds / 3))
        self.stepping = SteppingWidget(pipeline, namespace=namespace, seconds=step_seconds, verbose=verbose)
        self.optimize = OptimizePanel(pipeline, cell_source=cell_source,
                                      seconds=max(2.0, min(5.0, seconds / 2)), cores=cores,
                                      memory_budget=memory_budget, disk_budget=disk_budget,
                                      cache_dir=cache_dir, verbose=verbose, protocol=protocol)
        self.offload = OffloadPanel(pipeline, cell_source=cell_source, seconds=max(0.5, min(1.5, seconds / 6)))
        self.optimize.options.update(in_the_loop or {})  # model= / step=: the training step in the loop
        self.display_handle: Any = None  # set by whoever displays it (the magic)
        super().__init__(children=[self.live, self.stepping, self.optimize, self.offload])
        for i, title in enumerate(("Trace (live)", "Step", "Optimize", "Offload")):
            self.set_title(i, title)
        for panel in (self.live, self.stepping, self.optimize):
            panel.on_finished.append(lambda _: self.refresh_display())
        if live:
            self.live.start()

    # -- the one-shot paths (run in the cell's own thread) -------------------------------------
    def run_optimize(self) -> Plan | None:
        """Trace live (unless a trace is there already), then optimize with progress; returns the
        plan (``plan.partial`` when cut short) or None when nothing was measured."""
        if self.live.trace is None and not self.live.running:
            trace = self.live.run_here()
            if trace is None or trace.partial:
                return None
        self.selected_index = OPTIMIZE_TAB
        return self.optimize.run_here()

    def run_step(self) -> Step | None:
        """Trace live, then one bottleneck step from that trace; returns the step."""
        if self.live.trace is None and not self.live.running:
            trace = self.live.run_here()
            if trace is None or trace.partial:
                return None
        if self.live.trace is not None:
            self.stepping.start_from(self.live.trace)
        self.selected_index = STEP_TAB
        return self.stepping.run_here("bottleneck")

    # -- results -------------------------------------------------------------------------------
    @property
    def trace(self):
        return self.live.trace

    @property
    def plan(self) -> Plan | None:
        return self.optimize.plan

    def wait(self, timeout: float | None = None):
        return self.live.wait(timeout)

    def static_html(self) -> str:
        """Everything measured so far as plain HTML (what a notebook rendered without a kernel shows)."""
        parts = []
        if self.live.trace is not None:
            parts.append(html_report(self.live.trace))
        elif self.live.error:
            parts.append(f"<div>plumbkit: {html.escape(self.live.error)}</div>")
        else:
            parts.append("<div>plumbkit: tracing…</div>")
        for title, panel in (("Step", self.stepping), ("Optimize", self.optimize)):
            body = panel.static_html()
            if body:
                parts.append(f"<h4>{title}</h4>{body}")
        return "<div class='plumbkit-static'>" + "".join(parts) + "</div>"

    def static_text(self) -> str:
        text = str(self.live.trace) if self.live.trace is not None else "plumbkit: tracing…"
        if self.optimize.plan is not None:
            text += "\n\n" + str(self.optimize.plan)
        return text

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs)
        if isinstance(data, tuple):  # (data, metadata)
            data = data[0]
        data = dict(data or {})
        data["text/html"] = self.static_html()
        data["text/plain"] = self.static_text()
        return data

    def refresh_display(self) -> None:
        """Re-send the display so the static copy holds the latest results (same widget view)."""
        if self.display_handle is not None:
            try:
                self.display_handle.update(self)
            except Exception:  # noqa: BLE001 - a display problem must never lose a result
                pass

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(self.static_text())


__all__ = ["PlumbWidget", "LiveTraceWidget", "OffloadPanel", "SteppingWidget", "OptimizePanel"]
