"""The live trace widget: one row per operator, the bottleneck highlighted, throughput over time,
a status line and a Stop button, updated while the pipeline runs (tracing off the main thread)."""

from __future__ import annotations

import html
import threading
import time
from typing import Any, Callable

import ipywidgets as w

from ..engine.scheduler import Cancelled
from ..engine.trace_result import Trace
from ..engine.tracing import trace as trace_pipeline
from ..model.errors import PipelineError
from ..model.units import human_bytes
from ..render.table import COLUMN_NOTES, COLUMNS, row_cells, throughput_series
from ..render.text import allocation_bound_line
from .common import Background, Runner, in_cell_mode, svg_lines

#: Redraw at most this often (seconds): live, yet cheap for the kernel (the trace builds no
#: analysis between redraws).
MIN_REDRAW_INTERVAL = 0.25
#: Re-solve the allocation bound shown under the table at most this often while tracing (a solve costs
#: ~10 ms of CPU in cvxpy, ten times an analysis); the final redraw always solves it.
LP_INTERVAL = 1.0


def _bar(fraction: float | None, color: str) -> str:
    if fraction is None:
        return "—"
    pct = max(0.0, min(1.0, fraction)) * 100
    return (f'<div style="width:28px;background:#eee;display:inline-block;vertical-align:middle">'
            f'<div style="width:{pct:.0f}%;background:{color};height:9px"></div></div> {pct:.0f}%')


#: Columns whose long names may wrap (the others keep a figure on one line).
WRAPPED = (COLUMNS.index("operator"), COLUMNS.index("kind"))


def _breakable(text: str) -> str:
    """``text`` escaped, with places a narrow column may break it: after "/", "(", "_"."""
    out = html.escape(text)
    for mark in "/(_":
        out = out.replace(mark, mark + "<wbr>")
    return out.replace("materialized", "materi&shy;alized")


def table_html(trace: Trace, bottleneck_op: Any = None) -> str:
    """The operator table with CPU share and utilization bars; the bottleneck row highlighted
    (``bottleneck_op``: the trace's bottleneck when the caller has it already)."""
    if bottleneck_op is None:
        bottleneck_op = trace.bottleneck
    bottleneck = bottleneck_op.name if bottleneck_op else None
    head = "".join(f"<th style='text-align:left;vertical-align:bottom;padding:1px 3px' "
                   f"title='{html.escape(COLUMN_NOTES.get(c, ''))}'>{_breakable(c)}</th>" for c in COLUMNS)
    rows = []
    for o in trace.ops:
        cells = row_cells(o)
        cells_html = [html.escape(c) for c in cells]
        cells_html[COLUMNS.index("CPU")] = _bar(o.cpu_share, "#1f77b4")
        cells_html[COLUMNS.index("util")] = _bar(o.utilization, "#ff7f0e")
        cells_html[COLUMNS.index("CPU/elem")] = cells_html[COLUMNS.index("CPU/elem")].replace("; ", "<br>")
        for k in WRAPPED:  # long names may break after "(" or "_"
            cells_html[k] = _breakable(cells[k])
        is_b = o.name == bottleneck
        style = "background:#ffd6d6;font-weight:bold" if is_b else ""
        mark = "▶" if is_b else ""
        tds = "".join(f"<td style='padding:1px 3px;white-space:{'normal' if k in WRAPPED else 'nowrap'}'>{c}</td>"
                      for k, c in enumerate(cells_html))
        title = html.escape(o.note or o.cache_note)
        rows.append(f"<tr class='plumbkit-row{' plumbkit-bottleneck' if is_b else ''}' "
                    f"style='{style}' title='{title}'><td title='bottleneck'>{mark}</td>{tds}</tr>")
    # narrow columns, headers and names that wrap keep it within the widget; a scroll bar only beyond
    return (f"<div style='overflow-x:auto;max-width:100%;white-space:normal'>"
            f"<table class='plumbkit-table' style='border-collapse:collapse;font-size:11px;line-height:1.3'>"
            f"<thead><tr><th></th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def status_text(trace: Trace, state: str, bottleneck: Any = None) -> str:
    snaps = trace.raw.snapshots
    if not snaps:
        return f"{state}…"
    last = snaps[-1]
    cpu = 100 * last.cpu / last.t if last.t > 0 else 0.0
    return (f"{state} · {last.t:.1f} s · {trace.throughput:.1f} minibatches/s · process CPU {cpu:.0f}% "
            f"of one core · memory {human_bytes(last.rss)}"
            + (f" · bottleneck {bottleneck.label}" if bottleneck else ""))


def verdict_html(trace: Trace) -> str:
    """The training step's verdict for the header, once measured (``trace(..., model=/step=)``):
    "input-bound: the model waits 63% of each step for input (...)" in the bottleneck's colour,
    "model-bound: ..." in green."""
    if trace.model is None:
        return ""
    color = "#2a7a2a" if trace.model.bound == "model" else "#b35900"
    return f" · <span class='plumbkit-verdict' style='color:{color}'>{html.escape(trace.model.verdict)}</span>"


def ended_text(trace: Trace) -> str:
    """How a trace ended, in the words the status line uses."""
    if trace.partial:
        return f"{trace.ended}: what was measured until then"
    return f"done ({trace.ended})"


class LiveTraceWidget(w.VBox):
    """Traces ``pipeline`` and shows it live; ``trace`` holds the latest result.

    ``start()`` traces in the background (the cell returns; Stop answers); ``run_here()``
    traces in the calling thread (a one-shot cell). Either way the trace is a *live view* for
    the scheduler: an Optimize or Step started meanwhile stops it, and it says so.
    """

    def __init__(self, pipeline: Any, *, seconds: float = 10.0, cores: int | None = None,
                 max_batches: int | None = None, start: bool = True, verbose: bool = False,
                 **trace_options: Any):
        self.pipeline = pipeline
        self.verbose = verbose  # let TensorFlow, absl and the solver print while it traces
        self.trace: Trace | None = None
        self.error: str | None = None
        self.renders = 0  # redraws so far (the bench and tests count them)
        self._lp_note: str | None = None
        self._lp_at = -float("inf")
        self.on_finished: list[Callable[["LiveTraceWidget"], None]] = []
        self._lock = threading.Lock()
        self.runner = Runner(preemptible=True)
        self.title = w.HTML("<b>plumbkit</b> · tracing…")
        self.table = w.HTML()
        self.chart = w.HTML()
        self.notes = w.HTML()
        self.status = w.Label("starting…")
        self.stop_button = w.Button(description="Stop", icon="stop", button_style="warning",
                                    tooltip="end the trace now and keep what it measured")
        self.stop_button.on_click(lambda _: self.stop())
        super().__init__([self.title, self.status, self.table, self.chart, self.notes, self.stop_button])
        self._kwargs = dict(seconds=seconds, cores=cores, max_batches=max_batches, **trace_options)
        if start:
            self.start()

    # -- running ---------------------------------------------------------------------------
    def _trace(self) -> Trace:
        return trace_pipeline(self.pipeline, on_update=self._on_update, verbose=self.verbose,
                              update_interval=MIN_REDRAW_INTERVAL, **self._kwargs)

    def start(self) -> None:
        """Trace in a background thread (the cell returns at once)."""
        self.runner.start(self._trace, on_done=self._finished)

    def run_here(self) -> Trace | None:
        """Trace in this thread (a one-shot cell); Ctrl-C ends it and keeps what was measured."""
        in_cell_mode(self.stop_button, True, "Stop", "end the trace now and keep what it measured")
        job = Background()
        job.result, job.error, job.error_text = None, None, ""
        try:
            job.result = self.runner.run_here(self._trace)
        except (Cancelled, KeyboardInterrupt, PipelineError) as err:
            job.error, job.error_text = err, _why(err)
        self._finished(job)
        return self.trace

    def stop(self) -> None:
        """End the trace cleanly; what was measured is kept."""
        self.runner.cancel("stopped")

    def wait(self, timeout: float | None = None) -> Trace | None:
        """Block until the trace ends (for scripts and tests); returns the final Trace."""
        self.runner.wait(timeout)
        return self.trace

    @property
    def running(self) -> bool:
        return self.runner.running

    # -- drawing ---------------------------------------------------------------------------
    def _on_update(self, trace: Trace) -> None:
        self.trace = trace
        try:
            self.render(trace, "tracing")
        except Exception as err:  # noqa: BLE001 - a drawing problem must never stop the trace
            self.status.value = f"(display error: {err})"

    def _finished(self, job) -> None:
        if job.error is not None:
            self.error = job.error_text
            self.title.value = f"<b>plumbkit</b> · <span style='color:#b00'>{html.escape(job.error_text)}</span>"
            self.status.value = job.error_text
        else:
            self.trace = job.result
            self.render(job.result, ended_text(job.result), final=True)
        in_cell_mode(self.stop_button, False, "Stop", "end the trace now and keep what it measured")
        self.stop_button.disabled = True
        for callback in self.on_finished:
            callback(self)

    def render(self, trace: Trace, state: str, final: bool = False) -> None:
        """One analysis (the Trace given) and at most one LP solve per redraw (one a second while
        tracing, the last one always)."""
        with self._lock:
            self.renders += 1
            bottleneck = trace.bottleneck
            self.title.value = f"<b>plumbkit</b> · {html.escape(state)}" + verdict_html(trace)
            self.status.value = status_text(trace, state, bottleneck)
            self.table.value = table_html(trace, bottleneck)
            self.chart.value = svg_lines({"minibatches/s": throughput_series(trace)},
                                         x_label="time →", y_label="throughput over time")
            now = time.monotonic()
            if final or now - self._lp_at >= LP_INTERVAL:
                self._lp_at, self._lp_note = now, None
                if trace.raw.snapshots and trace.throughput > 0:
                    try:
                        self._lp_note = allocation_bound_line(trace)
                    except Exception:  # noqa: BLE001 - no bound yet (nothing measured): say nothing
                        pass
            notes = ([self._lp_note] if self._lp_note else []) + list(trace.notes)
            self.notes.value = "".join(f"<div>• {html.escape(n)}</div>" for n in notes)

    def close(self) -> None:
        """Close the view and its parts (ipywidgets keeps every open widget alive)."""
        for child in (self.title, self.table, self.chart, self.notes, self.status, self.stop_button):
            child.close()
        super().close()

    @property
    def row_labels(self) -> list[str]:
        return [o.label for o in self.trace.ops] if self.trace else []

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self.trace) if self.trace else "plumbkit: tracing…")


def _why(err: BaseException) -> str:
    """One line for an operation that ended without a result."""
    if isinstance(err, KeyboardInterrupt):
        return "interrupted before anything was measured"
    if isinstance(err, Cancelled):
        return f"{err.reason} before anything was measured"
    return str(err)
