"""Shared pieces of the widgets: running engine operations (in the background for a click, in the
cell's own thread for a one-shot ``%%plumb --optimize``), and tiny SVG charts."""

from __future__ import annotations

import html
import threading
import traceback
from typing import Any, Callable, Sequence

from ..engine.scheduler import CANCELLED, Handle

#: Shown beside Cancel while a one-shot cell runs: front-end clicks wait until the cell ends
#: (ipywidgets#1349), so there a kernel interrupt is the way to stop.
INTERRUPT_HINT = "running in this cell: interrupt the kernel (■) to cancel; what was measured is kept"
#: What a stop button says while the cell runs (it could not answer a click until the cell ends).
INTERRUPT_LABEL = "interrupt ■ to stop"


def in_cell_mode(button, in_cell: bool, label: str, tooltip: str) -> None:
    """A stop button for the mode it is in: clickable for background work; in a one-shot cell
    disabled and saying that a kernel interrupt stops it (clicks wait for the cell, ipywidgets#1349)."""
    button.description = INTERRUPT_LABEL if in_cell else label
    button.tooltip = INTERRUPT_HINT if in_cell else tooltip
    button.disabled = in_cell


class Background:
    """Work running in a daemon thread; keeps its result or its error (never lost, never raised)."""

    result: Any
    error: BaseException | None
    error_text: str
    thread: threading.Thread

    def _run(self) -> None:
        try:
            self.result = self._fn_call()
        except BaseException as err:  # noqa: BLE001 - shown in the widget
            self.error = err
            self.error_text = "".join(traceback.format_exception_only(type(err), err)).strip()
        finally:
            if self._on_done is not None:
                self._on_done(self)

    def wait(self, timeout: float | None = None) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()

    @property
    def running(self) -> bool:
        return self.thread.is_alive()


def background(fn: Callable[[], Any], on_done: Callable[[Background], None] | None = None) -> Background:
    """Start ``fn`` off the main thread so the cell returns and buttons answer at once."""
    job = Background()
    job.result, job.error, job.error_text, job._on_done = None, None, "", on_done
    job._fn_call = fn
    job.thread = threading.Thread(target=job._run, daemon=True, name="plumbkit-widget")
    job.thread.start()
    return job


class Runner:
    """Runs one engine operation at a time for a panel and lets its Cancel button stop it.

    ``start(fn)`` runs in a daemon thread (a button click: the cell has returned, buttons
    answer); ``run_here(fn)`` runs in the calling thread (a one-shot cell, where Ctrl-C lands).
    Either way the operation is attached to :attr:`handle`, so :meth:`cancel` reaches it even
    while it waits for another measurement to finish.
    """

    def __init__(self, *, preemptible: bool = False):
        self.handle = Handle(preemptible=preemptible)
        self.job: Background | None = None
        self.here = False  # running in the cell's own thread (clicks wait for the cell)

    def start(self, fn: Callable[[], Any], on_done: Callable[[Background], None] | None = None) -> Background:
        def bound() -> Any:
            with self.handle.bound():
                return fn()
        self.job = background(bound, on_done=on_done)
        return self.job

    def run_here(self, fn: Callable[[], Any]) -> Any:
        self.here = True
        try:
            with self.handle.bound():
                return fn()
        finally:
            self.here = False

    def cancel(self, reason: str = CANCELLED) -> None:
        self.handle.cancel(reason)

    @property
    def running(self) -> bool:
        return self.here or (self.job is not None and self.job.running)

    def wait(self, timeout: float | None = None) -> bool:
        return self.job.wait(timeout) if self.job is not None else True


def svg_lines(series: dict[str, Sequence[float]], *, width: int = 420, height: int = 140,
              colors: Sequence[str] = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd"),
              x_label: str = "", y_label: str = "", marked: bool = False) -> str:
    """A small line chart as inline SVG (cheap to redraw several times a second); ``marked``
    draws each point with its value (for a few measured points, e.g. a walk's steps)."""
    values = [v for s in series.values() for v in s]
    if not values:
        return f'<svg width="{width}" height="{height}"></svg>'
    top = max(values) * 1.1 or 1.0
    n = max(len(s) for s in series.values())
    pad, floor, ceiling = 34, height - 18, 26  # the plot below the series' names

    def point(i: int, v: float) -> tuple[float, float]:
        return pad + (width - pad - 8) * (i / max(1, n - 1)), floor - (floor - ceiling) * (v / top)

    def xy(i: int, v: float) -> str:
        x, y = point(i, v)
        return f"{x:.1f},{y:.1f}"

    parts = [f'<svg width="{width}" height="{height}" style="font:10px sans-serif">',
             f'<line x1="{pad}" y1="{floor}" x2="{width - 8}" y2="{floor}" stroke="#999"/>',
             f'<line x1="{pad}" y1="{ceiling}" x2="{pad}" y2="{floor}" stroke="#999"/>',
             f'<text x="2" y="{point(0, top / 1.1)[1] + 3:.1f}">{top / 1.1:.0f}</text>',  # at the highest value
             f'<text x="{pad}" y="{height - 4}">{html.escape(x_label)}</text>',
             f'<text x="{width - 150}" y="{height - 4}">{html.escape(y_label)}</text>']
    for k, ((name, s), color) in enumerate(zip(series.items(), colors)):
        points = " ".join(xy(i, v) for i, v in enumerate(s))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}"/>')
        for i, v in enumerate(s if marked else ()):
            x, y = point(i, v)
            last = i == n - 1 and n > 1  # its label left of the point, inside the chart
            anchor = ' text-anchor="end"' if last else ""
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>'
                         f'<text x="{x - 4 if last else x + 4:.1f}" y="{y - 4:.1f}" fill="{color}"'
                         f'{anchor}>{v:,.0f}</text>')
        parts.append(f'<text x="{pad + 8 + 110 * k}" y="18" fill="{color}">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)
