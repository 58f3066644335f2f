"""The stepping widget: bottleneck steps vs random steps, plotted step by step (paper Figure 6)."""

from __future__ import annotations

import html
from typing import Any, MutableMapping

import ipywidgets as w

from ..engine.measuring import measure
from ..engine.stepping import Walk, step_from
from ..tfdata.graph import resolve_pipeline
from .common import background, svg_lines


class SteppingWidget(w.VBox):
    """Buttons for one bottleneck step, one random step, or walking both N steps.

    The pipeline after the last step is stored in ``namespace[var_name]``.
    """

    def __init__(self, pipeline: Any, *, namespace: MutableMapping[str, Any] | None = None,
                 var_name: str = "plumbed_ds", seconds: float = 2.0, seed: int = 0):
        self.pipeline = pipeline
        self.namespace = namespace if namespace is not None else {}
        self.var_name = var_name
        self.seconds = seconds
        self.walks = {"bottleneck": Walk(policy="bottleneck"), "random": Walk(policy="random")}
        self._rng_seed = seed
        self._job = None
        self.bottleneck_button = w.Button(description="Bottleneck step", button_style="danger")
        self.random_button = w.Button(description="Random step")
        self.steps = w.BoundedIntText(value=4, min=1, max=50, description="N", layout=w.Layout(width="120px"))
        self.walk_button = w.Button(description="Walk both N steps")
        self.bottleneck_button.on_click(lambda _: self._run(lambda: self._one("bottleneck")))
        self.random_button.on_click(lambda _: self._run(lambda: self._one("random")))
        self.walk_button.on_click(lambda _: self._run(self._both))
        self.chart = w.HTML()
        self.chart.add_class("plumbkit-step-chart")
        self.history = w.HTML()
        self.history.add_class("plumbkit-step-history")
        self.status = w.Label(f"each step traces for {seconds:g} s; the newest pipeline is stored as `{var_name}`")
        super().__init__([w.HBox([self.bottleneck_button, self.random_button, self.steps, self.walk_button]),
                          self.status, self.chart, self.history])

    # -- actions ---------------------------------------------------------------------------
    def _run(self, fn) -> None:
        if self._job is not None and self._job.running:
            self.status.value = "busy: a step is still running"
            return
        self._set_busy(True)
        self._job = background(fn, on_done=self._done)

    def _set_busy(self, busy: bool) -> None:
        for b in (self.bottleneck_button, self.random_button, self.walk_button):
            b.disabled = busy

    def _done(self, job) -> None:
        self._set_busy(False)
        self.status.value = f"error: {job.error_text}" if job.error is not None else "ready"
        self.redraw()

    def wait(self, timeout: float | None = None) -> None:
        if self._job is not None:
            self._job.wait(timeout)

    def _start_of(self, walk: Walk):
        if walk.start is None:
            self.status.value = f"tracing the starting pipeline ({walk.policy} walk)…"
            walk.start = measure(resolve_pipeline(self.pipeline), seconds=self.seconds)
        last = walk.steps[-1] if walk.steps else None
        ds = last.dataset if last else resolve_pipeline(self.pipeline)
        before = (last.after if last and last.after else walk.start)
        return ds, before

    def _one(self, policy: str) -> None:
        import random
        walk = self.walks[policy]
        ds, before = self._start_of(walk)
        self.status.value = f"{policy} step {len(walk.steps) + 1}…"
        rng = random.Random(self._rng_seed + len(walk.steps))
        s = step_from(ds, before, policy=policy, rng=rng, seconds=self.seconds, cores=None)
        walk.steps.append(s)
        self.namespace[self.var_name] = s.dataset
        self.redraw()

    def _both(self) -> None:
        for _ in range(int(self.steps.value)):
            for policy in ("bottleneck", "random"):
                self._one(policy)

    # -- drawing ---------------------------------------------------------------------------
    def redraw(self) -> None:
        series = {f"{p} walk": wk.throughputs for p, wk in self.walks.items() if wk.throughputs}
        self.chart.value = svg_lines(series, x_label="step →", y_label="minibatches/s (measured)")
        rows = []
        for p, wk in self.walks.items():
            chosen = ", ".join(f"{i + 1}: {html.escape(str(o))}" for i, o in enumerate(wk.operators))
            rows.append(f"<div><b>{p}</b>: {chosen or '—'}</div>")
        self.history.value = "".join(rows)
