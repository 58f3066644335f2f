"""An offload plan as text and as HTML: the decision, the cut, and throughput against workers
(predicted line, measured points), with the cost of every cut considered."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from ..model.units import human_bytes

if TYPE_CHECKING:
    from ..engine.offload_plan import OffloadPlan


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.2f} ms"


def offload_text(plan: "OffloadPlan") -> str:
    d = plan.distribute
    lines = [f"plumbkit offload: {plan.decision.upper()} — {plan.reason}",
             f"  target {plan.target:.1f} minibatches/s ({plan.target_source}); consumer ceiling "
             f"{plan.ideal:.1f}, local {plan.local:.1f} (measured, client on {plan.setting.client_cores:g} "
             f"core{'s' * (plan.setting.client_cores != 1)})"]
    if d is not None:
        lines.append(f"  distribute() after {d.cut_label}: sharding {d.sharding}, job {d.job_name!r}, "
                     f"compression {d.compression}, client prefetch AUTOTUNE; "
                     f"recommended workers: {plan.workers}")
    if plan.predicted:
        lines.append(f"  workers  predicted  measured   bound   (measured with 0 and {plan.workers_available}; "
                     f"beyond, predictions)")
        for p in plan.predicted:
            m = plan.measured.get(p.workers)
            lines.append(f"  {p.workers:7d}  {p.throughput:9.1f}  {'' if m is None else f'{m:8.1f}':>8}   {p.bound}")
    if plan.cuts:
        lines.append("  cuts (per minibatch; remote = workers' compute):")
        for c in plan.cuts:
            served = ", ".join(f"{v:.1f} with {n} worker{'s' * (n != 1)}" for n, v in c.measured.items())
            lines.append(f"    after {c.label}: remote {_ms(c.remote_cpu)}, send {_ms(c.send_cpu)}, serving "
                         f"{_ms(c.service_cpu)} + dispatcher {_ms(c.dispatcher_cpu)}, receive {_ms(c.receive_cpu)}, "
                         f"client ops {_ms(c.client_cpu)}, {human_bytes(c.bytes_per_minibatch)} moved; "
                         f"measured {served}")
    for label, why in plan.invalid.items():
        lines.append(f"    not after {label}: {why}")
    lines += [f"  note: {n}" for n in plan.notes]
    return "\n".join(lines)


def curve_svg(plan: "OffloadPlan", *, width: int = 360, height: int = 170) -> str:
    """Throughput against workers: the predicted line, measured dots, the target dashed."""
    points = [(p.workers, p.throughput) for p in plan.predicted]
    measured = sorted(plan.measured.items())
    if not points:
        return ""
    top = max([y for _, y in points] + [y for _, y in measured] + [plan.target]) * 1.15 or 1.0
    right = max(x for x, _ in points) or 1
    pad_l, pad_b = 44, 22

    def xy(x: float, y: float) -> tuple[float, float]:
        return (pad_l + (width - pad_l - 10) * x / right, height - pad_b - (height - pad_b - 10) * y / top)

    line = " ".join(f"{a:.1f},{b:.1f}" for a, b in (xy(x, y) for x, y in points))
    parts = [f'<svg width="{width}" height="{height}" style="font:10px sans-serif">',
             f'<line x1="{pad_l}" y1="{height - pad_b}" x2="{width - 10}" y2="{height - pad_b}" stroke="#999"/>',
             f'<line x1="{pad_l}" y1="10" x2="{pad_l}" y2="{height - pad_b}" stroke="#999"/>',
             f'<text x="2" y="14">{top / 1.15:.0f}</text>',
             f'<text x="2" y="{height - pad_b}">0</text>',
             '<text x="2" y="28" fill="#666">/s</text>',
             f'<text x="{width - 50}" y="{height - 2}">workers</text>']
    for x, _ in points:
        px, _y = xy(x, 0)
        parts.append(f'<text x="{px - 3:.1f}" y="{height - pad_b + 11}">{x}</text>')
    ty = xy(0, plan.target)[1]
    parts.append(f'<line x1="{pad_l}" y1="{ty:.1f}" x2="{width - 10}" y2="{ty:.1f}" stroke="#2ca02c" '
                 f'stroke-dasharray="4,3"/><text x="{width - 60}" y="{ty - 3:.1f}" fill="#2ca02c">target</text>')
    parts.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{line}"/>')
    for x, y in measured:
        px, py = xy(x, y)
        parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="#d62728">'
                     f'<title>measured {y:.1f}</title></circle>')
    parts.append(f'<text x="{pad_l + 6}" y="20" fill="#1f77b4">predicted</text>'
                 f'<text x="{pad_l + 70}" y="20" fill="#d62728">measured</text></svg>')
    return "".join(parts)


def offload_html(plan: "OffloadPlan") -> str:
    d = plan.distribute
    color = {"offload": "#2ca02c", "do not offload": "#1f77b4"}.get(plan.decision, "#d62728")
    head = (f"<div style='font-size:14px'><b style='color:{color}'>{html.escape(plan.decision.upper())}</b> — "
            f"{html.escape(plan.reason)}</div>")
    facts = (f"<div>target {plan.target:,.1f} minibatches/s ({html.escape(plan.target_source)}); consumer "
             f"ceiling {plan.ideal:,.1f}; local {plan.local:,.1f} (measured)</div>")
    cut = ""
    if d is not None:
        cut = (f"<div>cut: <code>distribute()</code> after <b>{html.escape(d.cut_label)}</b> — sharding "
               f"{d.sharding}, job <code>{html.escape(str(d.job_name))}</code>, compression {d.compression}, "
               f"client-side prefetch; <b>{plan.workers}</b> worker(s) recommended</div>")
    rows = "".join(
        f"<tr><td>{p.workers}</td><td>{p.throughput:,.1f}</td>"
        f"<td>{'' if plan.measured.get(p.workers) is None else f'{plan.measured[p.workers]:,.1f}'}</td>"
        f"<td>{html.escape(p.bound)}</td></tr>" for p in plan.predicted)
    table = ("<table style='font-size:12px'><tr><th>workers</th><th>predicted</th><th>measured</th>"
             f"<th>bound</th></tr>{rows}</table>")
    cuts = "".join(
        f"<tr><td>{html.escape(c.label)}</td><td>{_ms(c.remote_cpu)}</td><td>{_ms(c.send_cpu)}</td>"
        f"<td>{_ms(c.service_cpu)} + {_ms(c.dispatcher_cpu)}</td><td>{_ms(c.receive_cpu)}</td>"
        f"<td>{_ms(c.client_cpu)}</td><td>{human_bytes(c.bytes_per_minibatch)}</td>"
        f"<td>{', '.join(f'{v:,.1f} ({n})' for n, v in c.measured.items())}</td></tr>" for c in plan.cuts)
    cut_table = ("<table style='font-size:12px'><tr><th>cut after</th><th>remote</th><th>send</th>"
                 "<th>serving + dispatcher</th><th>receive</th>"
                 "<th>client ops</th><th>moved</th><th>served, measured (workers)</th></tr>" + cuts + "</table>"
                 if plan.cuts else "")
    invalid = "".join(f"<li>not after {html.escape(k)}: {html.escape(v)}</li>" for k, v in plan.invalid.items())
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in plan.notes)
    return (f"<div class='plumbkit-offload'>{head}{facts}{cut}"
            f"<div style='display:flex;gap:16px;align-items:flex-start'>{curve_svg(plan)}{table}</div>"
            f"{cut_table}" + (f"<ul>{invalid}</ul>" if invalid else "")
            + (f"<div><b>notes</b><ul>{notes}</ul></div>" if notes else "") + "</div>")


__all__ = ["curve_svg", "offload_html", "offload_text"]
