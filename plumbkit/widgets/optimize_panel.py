"""The optimize panel: one click runs the full optimization (with progress), then shows predicted
and measured throughput side by side, the LP allocation, the cache decision and the changes, and
exports the optimized pipeline as the user's own cell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ipywidgets as w

from ..engine.optimization import Plan, optimize
from ..export.source import CodegenError
from ..render.html import plan_html
from . import lab
from .common import background


class OptimizePanel(w.VBox):
    """Optimize button with progress; results; Export (code box, save to .py)."""

    def __init__(self, pipeline: Any, *, cell_source: str | None = None, seconds: float = 4.0,
                 cores: int | None = None, memory_budget: float | None = None):
        self.pipeline, self.cell_source = pipeline, cell_source
        self.options = dict(seconds=seconds, cores=cores, memory_budget=memory_budget)
        self.plan: Plan | None = None
        self._job = None
        lab.frontend()  # connect to JupyterLab now, so Export can insert a cell on the first click
        self.button = w.Button(description="Optimize", button_style="success", icon="rocket")
        self.button.on_click(lambda _: self.run())
        self.progress = w.FloatProgress(value=0.0, min=0.0, max=1.0, layout=w.Layout(width="300px"))
        self.message = w.Label("")
        self.result = w.HTML()
        self.export_button = w.Button(description="Export", icon="download", disabled=True)
        self.export_button.on_click(lambda _: self.export())
        self.code = w.Textarea(layout=w.Layout(width="100%", height="160px"))
        self.filename = w.Text(value="optimized_pipeline.py", layout=w.Layout(width="220px"))
        self.save_button = w.Button(description="Save .py", disabled=True)
        self.save_button.on_click(lambda _: self.save())
        super().__init__([w.HBox([self.button, self.progress, self.message]), self.result,
                          w.HBox([self.export_button, self.filename, self.save_button]), self.code])

    def run(self) -> None:
        if self._job is not None and self._job.running:
            return
        self.button.disabled = True

        def work() -> Plan:
            return optimize(self.pipeline, on_progress=self._on_progress, **self.options)
        self._job = background(work, on_done=self._done)

    def _on_progress(self, message: str, fraction: float) -> None:
        self.progress.value, self.message.value = fraction, message

    def _done(self, job) -> None:
        self.button.disabled = False
        if job.error is not None:
            self.message.value = f"error: {job.error_text}"
            return
        self.plan = job.result
        self.result.value = plan_html(self.plan)
        self.export_button.disabled = self.cell_source is None
        self.message.value = "done"

    def wait(self, timeout: float | None = None) -> Plan | None:
        if self._job is not None:
            self._job.wait(timeout)
        return self.plan

    def export(self) -> str:
        """Put the rewritten cell in the copyable box and, in JupyterLab, insert it as a new cell
        below (through JupyterLab's commands: a widget callback cannot use ``set_next_input``,
        ipython/ipython#4983). Elsewhere ``%plumb export`` adds the cell from its own execution."""
        if self.plan is None or self.cell_source is None:
            return ""
        try:
            code = self.plan.rewrite_source(self.cell_source)
        except CodegenError as err:
            code = f"# plumbkit could not rewrite this cell: {err}\n# changes:\n" + "\n".join(
                f"#  - {c}" for c in self.plan.changes)
        self.code.value = code
        self.save_button.disabled = False
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
