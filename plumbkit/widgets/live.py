"""The live trace widget: one row per operator, the bottleneck highlighted, throughput over time,
a status line and a Stop button, updated while the pipeline runs (tracing off the main thread)."""

from __future__ import annotations

import html
import threading
import time
from typing import Any

import ipywidgets as w

from ..engine.trace_result import Trace
from ..engine.tracing import trace as trace_pipeline
from ..model.units import human_bytes
from ..render.table import COLUMNS, row_cells, throughput_series
from .common import background, svg_lines

#: Redraw at most this often (seconds): live, yet cheap for the kernel.
MIN_REDRAW_INTERVAL = 0.25


def _bar(fraction: float | None, color: str) -> str:
    if fraction is None:
        return "—"
    pct = max(0.0, min(1.0, fraction)) * 100
    return (f'<div style="width:50px;background:#eee;display:inline-block;vertical-align:middle">'
            f'<div style="width:{pct:.0f}%;background:{color};height:9px"></div></div> {pct:.0f}%')


def table_html(trace: Trace) -> str:
    """The operator table with CPU share and utilization bars; the bottleneck row highlighted."""
    bottleneck = trace.bottleneck.name if trace.bottleneck else None
    head = "".join(f"<th style='text-align:left;padding:2px 6px'>{html.escape(c)}</th>" for c in COLUMNS)
    rows = []
    for o in trace.ops:
        cells = row_cells(o)
        cells_html = [html.escape(c) for c in cells]
        cells_html[COLUMNS.index("CPU")] = _bar(o.cpu_share, "#1f77b4")
        cells_html[COLUMNS.index("util")] = _bar(o.utilization, "#ff7f0e")
        is_b = o.name == bottleneck
        style = "background:#ffd6d6;font-weight:bold" if is_b else ""
        mark = "▶" if is_b else ""
        tds = "".join(f"<td style='padding:2px 6px;white-space:nowrap'>{c}</td>" for c in cells_html)
        title = html.escape(o.note or o.cache_note)
        rows.append(f"<tr class='plumbkit-row{' plumbkit-bottleneck' if is_b else ''}' "
                    f"style='{style}' title='{title}'><td title='bottleneck'>{mark}</td>{tds}</tr>")
    return (f"<table class='plumbkit-table' style='border-collapse:collapse;font-size:12px'>"
            f"<thead><tr><th></th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def status_text(trace: Trace, state: str) -> str:
    snaps = trace.raw.snapshots
    if not snaps:
        return f"{state}…"
    last = snaps[-1]
    cpu = 100 * last.cpu / last.t if last.t > 0 else 0.0
    b = trace.bottleneck
    return (f"{state} · {last.t:.1f} s · {trace.throughput:.1f} minibatches/s · process CPU {cpu:.0f}% "
            f"of one core · memory {human_bytes(last.rss)}"
            + (f" · bottleneck {b.label}" if b else ""))


class LiveTraceWidget(w.VBox):
    """Traces ``pipeline`` in the background and shows it live. ``trace`` holds the latest result."""

    def __init__(self, pipeline: Any, *, seconds: float = 10.0, cores: int | None = None,
                 max_batches: int | None = None, start: bool = True):
        self.pipeline = pipeline
        self.trace: Trace | None = None
        self.error: str | None = None
        self._tracer = None
        self._last_draw = 0.0
        self._lock = threading.Lock()
        self.title = w.HTML("<b>plumbkit</b> · tracing…")
        self.table = w.HTML()
        self.chart = w.HTML()
        self.notes = w.HTML()
        self.status = w.Label("starting…")
        self.stop_button = w.Button(description="Stop", icon="stop", button_style="warning")
        self.stop_button.on_click(lambda _: self.stop())
        super().__init__([self.title, self.status, self.table, self.chart, self.notes, self.stop_button])
        self._kwargs = dict(seconds=seconds, cores=cores, max_batches=max_batches)
        self._job = None
        if start:
            self.start()

    # -- running ---------------------------------------------------------------------------
    def start(self) -> None:
        def run() -> Trace:
            return trace_pipeline(self.pipeline, on_update=self._on_update, tracer_ready=self._ready, **self._kwargs)
        self._job = background(run, on_done=self._finished)

    def _ready(self, tracer) -> None:
        self._tracer = tracer

    def stop(self) -> None:
        """End the trace cleanly; what was measured is kept."""
        if self._tracer is not None:
            self._tracer.stop()

    def wait(self, timeout: float | None = None) -> Trace | None:
        """Block until the trace ends (for scripts and tests); returns the final Trace."""
        if self._job is not None:
            self._job.wait(timeout)
        return self.trace

    @property
    def running(self) -> bool:
        return self._job is not None and self._job.running

    # -- drawing ---------------------------------------------------------------------------
    def _on_update(self, trace: Trace) -> None:
        now = time.monotonic()
        if now - self._last_draw < MIN_REDRAW_INTERVAL:
            return
        self._last_draw = now
        self.trace = trace
        try:
            self.render(trace, "tracing")
        except Exception as err:  # noqa: BLE001 - a drawing problem must never stop the trace
            self.status.value = f"(display error: {err})"

    def _finished(self, job) -> None:
        if job.error is not None:
            self.error = job.error_text
            self.title.value = f"<b>plumbkit</b> · <span style='color:#b00'>{html.escape(job.error_text)}</span>"
        else:
            self.trace = job.result
            self.render(job.result, f"done ({job.result.ended})")
        self.stop_button.disabled = True

    def render(self, trace: Trace, state: str) -> None:
        with self._lock:
            self.title.value = f"<b>plumbkit</b> · {html.escape(state)}"
            self.status.value = status_text(trace, state)
            self.table.value = table_html(trace)
            self.chart.value = svg_lines({"minibatches/s": throughput_series(trace)},
                                         x_label="time →", y_label="throughput over time")
            notes = []
            try:
                notes.append(f"LP upper bound with {trace.cores} cores: {trace.lp_bound():.1f} "
                             f"minibatches/s (prediction)")
            except Exception:  # noqa: BLE001 - no bound yet (nothing measured): say nothing
                pass
            notes += list(trace.notes)
            self.notes.value = "".join(f"<div>• {html.escape(n)}</div>" for n in notes)

    @property
    def row_labels(self) -> list[str]:
        return [o.label for o in self.trace.ops] if self.trace else []

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self.trace) if self.trace else "plumbkit: tracing…")
