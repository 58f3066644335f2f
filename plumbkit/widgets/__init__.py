"""plumbkit's notebook widgets (the only modules, with plumbkit.magics, that import ipywidgets)."""

from __future__ import annotations

from typing import Any, MutableMapping

import ipywidgets as w

from .live import LiveTraceWidget
from .offload_panel import OffloadPanel
from .optimize_panel import OptimizePanel
from .stepping import SteppingWidget


class PlumbWidget(w.Tab):
    """What ``%%plumb`` shows: the live trace, stepping, and the optimize panel in tabs."""

    def __init__(self, pipeline: Any, *, seconds: float = 10.0, cores: int | None = None,
                 max_batches: int | None = None, memory_budget: float | None = None,
                 cell_source: str | None = None, namespace: MutableMapping[str, Any] | None = None):
        self.live = LiveTraceWidget(pipeline, seconds=seconds, cores=cores, max_batches=max_batches)
        step_seconds = max(1.0, min(3.0, seconds / 3))
        self.stepping = SteppingWidget(pipeline, namespace=namespace, seconds=step_seconds)
        self.optimize = OptimizePanel(pipeline, cell_source=cell_source, seconds=max(2.0, min(5.0, seconds / 2)),
                                      cores=cores, memory_budget=memory_budget)
        self.offload = OffloadPanel(pipeline, cell_source=cell_source, seconds=max(0.5, min(1.5, seconds / 6)))
        super().__init__(children=[self.live, self.stepping, self.optimize, self.offload])
        for i, title in enumerate(("Trace (live)", "Step", "Optimize", "Offload")):
            self.set_title(i, title)

    @property
    def trace(self):
        return self.live.trace

    def wait(self, timeout: float | None = None):
        return self.live.wait(timeout)

    def _repr_pretty_(self, printer, cycle) -> None:
        self.live._repr_pretty_(printer, cycle)


__all__ = ["PlumbWidget", "LiveTraceWidget", "OffloadPanel", "SteppingWidget", "OptimizePanel"]
