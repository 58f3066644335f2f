"""The offload panel: one click measures the pipeline against a tf.data service and shows the
decision, the cut, and predicted (line) vs measured (dots) throughput against workers; Export
writes ``distribute()`` into the user's cell with the dispatcher as a parameter.

With no dispatcher given, plumbkit starts a one-worker service on this machine for the
measurement and stops it afterwards (the plan still sizes workers for the target).
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from ..engine.offload import offload
from ..engine.offload_plan import OffloadPlan
from ..export.source import CodegenError
from ..render.offload import offload_html
from .common import background


class OffloadPanel(w.VBox):
    """Target and worker bound; "Plan offload" with progress; the plan; Export (code box)."""

    def __init__(self, pipeline: Any, *, dispatcher: Any = None, target: float | None = None,
                 client_cores: list[int] | None = None, cell_source: str | None = None, seconds: float = 1.0):
        self.pipeline, self.cell_source = pipeline, cell_source
        self.options = dict(dispatcher=dispatcher, client_cores=client_cores, seconds=seconds)
        self.plan: OffloadPlan | None = None
        self._job = None
        self.target = w.FloatText(value=target or 0.0, description="target /s", layout=w.Layout(width="180px"),
                                  tooltip="minibatches/s the consumer needs (0: its measured ceiling)")
        self.max_workers = w.BoundedIntText(value=32, min=1, max=4096, description="≤ workers",
                                            layout=w.Layout(width="160px"))
        self.button = w.Button(description="Plan offload", button_style="info", icon="server")
        self.button.on_click(lambda _: self.run())
        self.progress = w.FloatProgress(value=0.0, min=0.0, max=1.0, layout=w.Layout(width="220px"))
        self.message = w.Label("")
        self.result = w.HTML()
        self.export_button = w.Button(description="Export", icon="download", disabled=True)
        self.export_button.on_click(lambda _: self.export())
        self.code = w.Textarea(layout=w.Layout(width="100%", height="140px"))
        super().__init__([w.HBox([self.target, self.max_workers, self.button, self.progress, self.message]),
                          self.result, self.export_button, self.code])

    def run(self) -> None:
        """Measure and plan in the background (the cell returns; the panel fills in)."""
        if self._job is not None and self._job.running:
            return
        self.button.disabled = True
        target = self.target.value or None
        max_workers = int(self.max_workers.value)

        def work() -> OffloadPlan:
            return offload(self.pipeline, target=target, max_workers=max_workers,
                           on_progress=self._on_progress, **self.options)
        self._job = background(work, on_done=self._done)

    def _on_progress(self, message: str, fraction: float) -> None:
        self.progress.value, self.message.value = fraction, message

    def _done(self, job) -> None:
        self.button.disabled = False
        if job.error is not None:
            self.message.value = f"error: {job.error_text}"
            return
        self.plan = job.result
        self.result.value = offload_html(self.plan)
        self.export_button.disabled = self.cell_source is None or self.plan.distribute is None
        self.message.value = self.plan.decision

    def wait(self, timeout: float | None = None) -> OffloadPlan | None:
        if self._job is not None:
            self._job.wait(timeout)
        return self.plan

    def export(self) -> str:
        """The user's cell with ``distribute()`` at the cut, in the copyable box."""
        if self.plan is None or self.cell_source is None:
            return ""
        try:
            code = self.plan.rewrite_source(self.cell_source)
        except CodegenError as err:
            code = f"# plumbkit could not rewrite this cell: {err}\n# plan: {self.plan.reason}"
        self.code.value = code
        self.message.value = "the served cell is in the box (the dispatcher's address is a parameter)"
        return code


__all__ = ["OffloadPanel"]
