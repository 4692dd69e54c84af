"""An identification report as one self-contained HTML file: tables and inline SVG plots, no scripts,
no CDN (the library's report loads plotly from a CDN and is blank offline)."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from .pipeline import IdentificationResult

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def _decimate(x: np.ndarray, ys: Sequence[np.ndarray], max_points: int = 600) -> tuple[np.ndarray, list[np.ndarray]]:
    step = max(1, int(math.ceil(len(x) / max_points)))
    return x[::step], [y[::step] for y in ys]


def svg_plot(x: np.ndarray, series: Sequence[tuple[str, np.ndarray]], title: str, xlabel: str, ylabel: str,
             width: int = 640, height: int = 220, log_y: bool = False) -> str:
    """A line plot as inline SVG (axes with min/max ticks, a legend)."""
    x = np.asarray(x, dtype=float)
    xs, ys = _decimate(x, [np.asarray(s, dtype=float) for _, s in series])
    if log_y:
        ys = [np.log10(np.maximum(y, 1e-300)) for y in ys]
    finite = np.concatenate([y[np.isfinite(y)] for y in ys]) if ys else np.zeros(1)
    y0, y1 = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if y1 - y0 < 1e-15:
        y0, y1 = y0 - 1.0, y1 + 1.0
    x0, x1 = (float(xs.min()), float(xs.max())) if xs.size else (0.0, 1.0)
    if x1 - x0 < 1e-15:
        x1 = x0 + 1.0
    left, right, top, bottom = 70, 10, 24, 36
    pw, ph = width - left - right, height - top - bottom

    def px(v: np.ndarray) -> np.ndarray:
        return left + (v - x0) / (x1 - x0) * pw

    def py(v: np.ndarray) -> np.ndarray:
        return top + (1 - (v - y0) / (y1 - y0)) * ph

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="{left}" y="15" font-weight="bold">{html.escape(title)}</text>',
             f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>']
    fmt = (lambda v: f"1e{v:.1f}") if log_y else (lambda v: f"{v:.4g}")
    parts += [f'<text x="{left - 4}" y="{top + 4}" text-anchor="end">{fmt(y1)}</text>',
              f'<text x="{left - 4}" y="{top + ph}" text-anchor="end">{fmt(y0)}</text>',
              f'<text x="{left}" y="{height - 20}">{x0:.4g}</text>',
              f'<text x="{left + pw}" y="{height - 20}" text-anchor="end">{x1:.4g}</text>',
              f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle">{html.escape(xlabel)}</text>',
              f'<text x="12" y="{top + ph / 2}" transform="rotate(-90 12 {top + ph / 2})" '
              f'text-anchor="middle">{html.escape(ylabel)}</text>']
    for k, ((label, _), y) in enumerate(zip(series, ys)):
        ok = np.isfinite(y)
        pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px(xs[ok]), py(y[ok])))
        color = COLORS[k % len(COLORS)]
        dash = ' stroke-dasharray="4 2"' if k else ""
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.2"{dash} points="{pts}"/>')
        parts.append(f'<text x="{left + pw - 4}" y="{top + 14 + 13 * k}" text-anchor="end" '
                     f'fill="{color}">{html.escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _num(v: float) -> str:
    return "inf" if not math.isfinite(v) else f"{v:.6g}"


def _vec(v: Sequence[float] | None) -> str:
    return "" if v is None else ", ".join(_num(x) for x in v)


def render_report(result: "IdentificationResult") -> str:
    """The report as an HTML string."""
    e = html.escape
    rows = []
    for p in result.parameters:
        flag = "" if p.identifiable else ' style="background:#fdd"'
        rows.append(f"<tr{flag}><td>{e(p.name)}</td><td>{e(p.kind)} {e(p.target)}</td><td>{_vec(p.value)}</td>"
                    f"<td>&plusmn; {_vec(p.half_width_95)}</td><td>{_vec(p.start)}</td><td>{_vec(p.warm_start)}</td>"
                    f"<td>[{_vec(p.min_value)}] &ndash; [{_vec(p.max_value)}]</td>"
                    f"<td>{'frozen' if p.frozen else ('yes' if p.identifiable else 'NO')}</td></tr>")
    metric_rows = []
    for key, value in result.metrics.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}: {v * 1e3:.4g} mrad" if key.endswith("_rad") else f"{k}: {v}"
                              for k, v in value.items())
        metric_rows.append(f"<tr><td>{e(key)}</td><td>{e(str(value))}</td></tr>")
    plots = []
    if result.objective:
        it = np.arange(len(result.objective), dtype=float)
        plots.append(svg_plot(it, [("cost", np.asarray(result.objective))], "Cost per iteration", "iteration",
                              "log10 cost", log_y=True))
    for tr in result.traces:
        for j, joint in enumerate(tr.joints):
            plots.append(svg_plot(tr.time_s, [("measured", tr.measured[:, j]), ("predicted", tr.predicted[:, j])],
                                  f"{tr.split}: {tr.segment}, {joint}", "time [s]", "position [rad]"))
            plots.append(svg_plot(tr.time_s, [("measured - predicted", (tr.measured[:, j] - tr.predicted[:, j]) * 1e3)],
                                  f"{tr.split}: {tr.segment}, {joint} error", "time [s]", "error [mrad]",
                                  height=140))
    notes = "".join(f"<li>{e(n)}</li>" for n in result.notes)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Identification report: {e(result.problem.name)}</title>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #bbb;padding:3px 8px;text-align:left}} svg{{display:block;margin:6px 0}}</style>
</head><body>
<h1>Identification report: {e(result.problem.name)}</h1>
<p>Model <code>{e(result.problem.model)}</code>, joints {e(", ".join(result.problem.joints))},
optimizer {e(result.problem.optimizer.backend)}.</p>
<h2>Parameters</h2>
<table><tr><th>name</th><th>what</th><th>value</th><th>95 % half-width</th><th>start</th><th>warm start</th>
<th>bounds</th><th>identifiable</th></tr>{''.join(rows)}</table>
<h2>Metrics</h2><table>{''.join(metric_rows)}</table>
{f'<h2>Notes</h2><ul>{notes}</ul>' if notes else ''}
<h2>Measured vs predicted</h2>
{''.join(plots)}
</body></html>
"""


def write_report(result: "IdentificationResult", path: str | Path) -> Path:
    """Write the offline HTML report."""
    path = Path(path)
    path.write_text(render_report(result))
    return path
