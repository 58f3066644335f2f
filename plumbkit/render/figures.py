"""Matplotlib figures of plumbkit's results, for notebooks and scripts (presentation only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..engine.optimization import Plan
    from ..engine.stepping import Walk
    from ..engine.trace_result import Trace


def walk_figure(bottleneck: "Walk", randoms: "Sequence[Walk]" = (), *, title: str = "") -> "Figure":
    """Throughput per step: the bottleneck walk against random walks (paper Figure 6)."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(bottleneck.throughputs, "o-", color="#d62728", label="bottleneck steps (measured)")
    for i, op in enumerate(bottleneck.operators, start=1):
        ax.annotate(str(op), (i, bottleneck.throughputs[i]), fontsize=7, rotation=20)
    for k, w in enumerate(randoms):
        ax.plot(w.throughputs, ".--", color="#1f77b4", alpha=0.7, label="random steps (measured)" if k == 0 else None)
    ax.plot(bottleneck.allocation_bounds, ":", color="black", label="allocation bound (of each trace)")
    ax.set_xlabel("step")
    ax.set_ylabel("minibatches / s")
    ax.set_title(title or "bottleneck steps vs random steps")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def throughput_figure(trace: "Trace") -> "Figure":
    """Throughput over time during a trace, and each operator's CPU share."""
    import matplotlib.pyplot as plt
    from .table import throughput_series
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
    series = throughput_series(trace)
    times = [s.t for s in trace.raw.snapshots[1:len(series) + 1]]
    left.plot(times, series)
    left.set_xlabel("seconds")
    left.set_ylabel("minibatches / s")
    left.set_title("throughput while tracing")
    ops = [o for o in trace.ops if not o.injected]
    bottleneck = trace.bottleneck.name if trace.bottleneck else None
    right.barh([o.label for o in ops], [100 * o.cpu_share for o in ops],
               color=["#d62728" if o.name == bottleneck else "#1f77b4" for o in ops])
    right.invert_yaxis()
    right.set_xlabel("% of process CPU")
    right.set_title("CPU share (bottleneck in red)")
    fig.tight_layout()
    return fig


def baseline_figure(plan: "Plan") -> "Figure":
    """Each configuration's own prediction (made before any rewrite) and its measured throughput
    (median under one protocol) as paired bars; a configuration without a prediction (AUTOTUNE
    picks its parallelism at run time) has its measured bar alone."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    names = list(plan.baselines)
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], [plan.predictions.get(n, 0.0) for n in names], width=0.4,
           color="#aec7e8", label="predicted (before the fact)")
    ax.bar([i + 0.2 for i in x], [plan.baselines[n] for n in names], width=0.4,
           color="#1f77b4", label="measured (median)")
    for i, n in enumerate(names):
        if n not in plan.predictions:
            ax.text(i - 0.2, 0, "no\nprediction", ha="center", va="bottom", fontsize=6, color="#555")
    ax.set_xticks(list(x), names, fontsize=8, rotation=15)
    ax.set_ylabel("minibatches / s")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
