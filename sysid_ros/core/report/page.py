"""One report page: headings, a verdict, tables and plotly plots, written as a single offline HTML file.

plotly.js (4.8 MB, the copy shipped with the plotly package that `mujoco[sysid]` installs) is embedded once
per page; each plot is a `Plotly.newPlot` call on a div of class `sysid-plot`. Arrays go in as float32, which
plotly writes base64-packed, and long series are thinned to `MAX_POINTS`, so a page stays some 100 kB
above the library. Chosen over matplotlib by `bench/bench_report.py` (see docs/reports.md).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..files import replace_file

MAX_POINTS = 1000
"""Points kept per plotted series (a report plot is ~1000 px wide; stride thinning keeps the shape)."""

PLOT_CLASS = "sysid-plot"

_STYLE = """body{font-family:sans-serif;margin:1.2em 2em;color:#222}
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #bbb;padding:3px 8px;text-align:left}
.verdict{padding:.6em 1em;border-radius:4px;margin:.6em 0;font-size:1.1em}
.ok{background:#dfd}.warn{background:#ffe6b3}.bad{background:#fdd}.none{background:#eee}
.bad-row{background:#fdd}.sysid-plot{width:100%;max-width:1100px}"""


def thin(x: np.ndarray, *ys: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, ...]:
    """Every k-th sample of x and ys so that at most `max_points` remain."""
    step = max(1, math.ceil(len(x) / max_points))
    return (np.asarray(x)[::step],) + tuple(np.asarray(y)[::step] for y in ys)


def figure(title: str, xlabel: str, ylabel: str, height: int = 300, log_x: bool = False, log_y: bool = False):
    """An empty plotly figure with the report's layout."""
    import plotly.graph_objects as go

    axis = dict(gridcolor="#eee", showline=True, linecolor="#888", automargin=True)
    fig = go.Figure(
        layout=dict(  # one layout dict: each update_* call validates the whole layout again
            title={"text": title, "font": {"size": 14}},
            height=height,
            margin=dict(l=70, r=20, t=40, b=45),
            template="none",
            font=dict(family="sans-serif", size=11),
            plot_bgcolor="white",  # a template: 6.5 kB a plot
            legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
            xaxis=dict(axis, title=xlabel, zeroline=False, type="log" if log_x else None),
            yaxis=dict(axis, title=ylabel, zerolinecolor="#ccc", type="log" if log_y else None),
        )
    )
    return fig


def line(
    fig,
    x: Sequence[float],
    y: Sequence[float],
    name: str,
    dash: str | None = None,
    color: str | None = None,
    mode: str = "lines",
    width: float = 1.3,
    **extra: Any,
):
    """Add a series: thinned to `MAX_POINTS` when a line, float32, evenly spaced x as a start and a step."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if mode == "lines":
        x, y = thin(x, y)
    steps = np.diff(x)
    if len(x) > 2 and np.ptp(steps) <= 1e-4 * abs(steps[0]) and steps[0] != 0:
        axis = dict(x0=float(x[0]), dx=float(steps[0]))  # evenly spaced: plotly rebuilds x, half the bytes
    else:
        axis = dict(x=x.astype(np.float32))
    fig.add_scatter(
        **axis,
        y=y.astype(np.float32),
        name=name,
        mode=mode,
        marker=dict(color=color),
        line=dict(dash=dash, color=color, width=width),
        **extra,
    )
    return fig


Window = tuple[float, float, str]


def back_to_back(times: Sequence[np.ndarray], names: Sequence[str]) -> tuple[np.ndarray, list[Window]]:
    """Several windows' time axes laid back to back (each from 0, one sample step apart) and each window's
    (start, end, name), for one plot over all of them."""
    out, windows, offset = [], [], 0.0
    for t, name in zip(times, names):
        t = np.asarray(t, dtype=float)
        if not len(t):
            continue
        t = t - t[0] + offset
        out.append(t)
        windows.append((float(t[0]), float(t[-1]), name))
        offset = float(t[-1]) + (float(np.median(np.diff(t))) if len(t) > 1 else 0.0)
    return (np.concatenate(out) if out else np.zeros(0)), windows


def mark_windows(fig, windows: Sequence[Window]) -> None:
    """Shade every other window, a dotted line at each start, and its name on top (set at once: plotly's
    add_vrect/add_vline validate every shape again on each call, quadratic in the number of windows)."""
    shapes, notes = [], []
    for k, (a, b, name) in enumerate(windows):
        if len(windows) > 1:
            if k % 2:
                shapes.append(
                    dict(
                        type="rect",
                        xref="x",
                        yref="y domain",
                        x0=a,
                        x1=b,
                        y0=0,
                        y1=1,
                        fillcolor="#888",
                        opacity=0.08,
                        line_width=0,
                        layer="below",
                    )
                )
            shapes.append(
                dict(
                    type="line",
                    xref="x",
                    yref="y domain",
                    x0=a,
                    x1=a,
                    y0=0,
                    y1=1,
                    line=dict(width=0.6, dash="dot", color="#888"),
                )
            )
        notes.append(
            dict(
                x=a,
                y=1,
                xref="x",
                yref="paper",
                text=name,
                showarrow=False,
                xanchor="left",
                yanchor="bottom",
                font=dict(size=9, color="#666"),
            )
        )
    fig.update_layout(shapes=list(fig.layout.shapes) + shapes, annotations=list(fig.layout.annotations) + notes)


class Page:
    """A report page built top to bottom; `write` puts it on disk in one piece."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.parts: list[str] = [f"<h1>{html.escape(title)}</h1>"]
        self.figures: list = []  # the plotly figures, in order (bench/bench_report.py draws them with matplotlib)

    def heading(self, text: str, level: int = 2) -> None:
        self.parts.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def text(self, text: str) -> None:
        self.parts.append(f"<p>{html.escape(text)}</p>")

    def items(self, lines: Sequence[str]) -> None:
        if lines:
            self.parts.append("<ul>" + "".join(f"<li>{html.escape(str(s))}</li>" for s in lines) + "</ul>")

    def verdict(self, headline: str, level: str, lines: Sequence[str] = ()) -> None:
        """A coloured box: level is ok, warn, bad or none (no verdict given)."""
        body = "".join(f"<li>{html.escape(str(s))}</li>" for s in lines)
        self.parts.append(
            f'<div class="verdict {level}"><b>{html.escape(headline)}</b>'
            + (f"<ul>{body}</ul>" if body else "")
            + "</div>"
        )

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]], flagged: Sequence[bool] = ()) -> None:
        head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
        body = []
        for k, row in enumerate(rows):
            cls = ' class="bad-row"' if k < len(flagged) and flagged[k] else ""
            body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>")
        self.parts.append(f"<table><tr>{head}</tr>{''.join(body)}</table>")

    def plot(self, fig) -> None:
        """A plotly figure, drawn by the embedded plotly.js when the page opens."""
        self.figures.append(fig)
        div = f"plot{self.plots}"
        fig_json = fig.to_json(engine="json")
        self.parts.append(
            f'<div id="{div}" class="{PLOT_CLASS}"></div>'
            f"<script>(function(){{var f={fig_json};"
            f'Plotly.newPlot("{div}",f.data,f.layout,{{responsive:true,displaylogo:false}});}})();'
            f"</script>"
        )

    @property
    def plots(self) -> int:
        return len(self.figures)

    def render(self) -> str:
        from plotly.offline import get_plotlyjs

        script = f"<script>{get_plotlyjs()}</script>" if self.plots else ""
        return (
            f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(self.title)}</title>'
            f"<style>{_STYLE}</style>{script}</head><body>\n" + "\n".join(self.parts) + "\n</body></html>\n"
        )

    def write(self, path: str | Path) -> Path:
        """Write the page whole or not at all (`replace_file`: the old one intact on a failure)."""
        replace_file(path, self.render().encode("utf-8"))
        return Path(path)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "inf" if math.isinf(value) else ("-" if math.isnan(value) else f"{value:.6g}")
    if isinstance(value, (list, tuple)):
        return ", ".join(_cell(v) for v in value)
    return "-" if value is None else str(value)
