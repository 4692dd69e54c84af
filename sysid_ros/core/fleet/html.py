"""fleet.html: the fleet document as one self-contained page (plotly's JavaScript embedded, nothing loaded
from the network): per parameter every robot's value with its 95 % interval against the fleet median and
spread, outliers and drifted robots marked; tables of failures, outliers and drift."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any


def _num(v: Any) -> str:
    return "-" if v is None else ("inf" if not math.isfinite(float(v)) else f"{float(v):.6g}")


def _figure(name: str, stats: dict[str, Any], robots: dict[str, Any], drift: dict[str, Any] | None) -> str:
    import plotly.graph_objects as go

    base, _, index = name.partition("[")
    ok = [(r, d) for r, d in robots.items() if d["status"] == "ok" and base in d["parameters"]]
    pick = (lambda v: v[int(index[:-1])] if isinstance(v, list) else v) if index else (lambda v: v)
    names = [r for r, _ in ok]
    values = [pick(d["parameters"][base]["value"]) for _, d in ok]
    halves = [pick(d["parameters"][base]["half_width_95"]) for _, d in ok]
    halves = [h if math.isfinite(h) else 0.0 for h in halves]
    drifted = set((drift or {}).get("drifted", {}))
    colors = ["#d62728" if r in stats["outliers"] else "#ff7f0e" if r in drifted else "#1f77b4" for r in names]
    fig = go.Figure(go.Scatter(x=names, y=values, mode="markers", marker={"color": colors, "size": 9},
                               error_y={"type": "data", "array": halves, "visible": True}, name=name))
    med, spread = stats["median"], stats["spread"]
    fig.add_hline(y=med, line_dash="dash", annotation_text=f"median {med:.6g}")
    if spread > 0:
        fig.add_hrect(y0=med - spread, y1=med + spread, fillcolor="#888", opacity=0.15, line_width=0)
    fig.update_layout(title=f"{name}: value and 95 % interval per robot (red: outlier, orange: drifted; band: "
                            "median +- spread)", height=340, margin={"l": 60, "r": 20, "t": 50, "b": 40})
    return fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})


def render_fleet_html(doc: dict[str, Any]) -> str:
    from plotly.offline import get_plotlyjs

    e = html.escape
    fleet, robots, drift = doc["fleet"], doc["robots"], doc.get("drift")
    rows = "".join(
        f"<tr><td>{e(r)}</td><td>{e(d['status'])}{' (resumed)' if d['resumed'] else ''}</td>"
        f"<td>{e(d.get('reason', ''))}{e('; '.join(d['warnings']))}</td>"
        f"<td>{e(', '.join(d['outlier_in']))}</td><td>{e(', '.join(d.get('drifted', [])))}</td></tr>"
        for r, d in robots.items())
    stat_rows = "".join(f"<tr><td>{e(k)}</td><td>{s['robots']}</td><td>{_num(s['median'])}</td>"
                        f"<td>{_num(s['spread'])}</td><td>{e(', '.join(s['outliers']))}</td></tr>"
                        for k, s in doc["parameters"].items())
    drift_rows = "".join(f"<tr><td>{e(r)}</td><td>{e(k)}</td><td>{_num(d['before'])}</td><td>{_num(d['now'])}</td>"
                         f"<td>{_num(d['moved'])}</td><td>{_num(d['allowed'])}</td></tr>"
                         for r, ps in (drift or {}).get("drifted", {}).items() for k, d in ps.items())
    drift_html = ("" if drift is None else
                  f"<h2>Drift against {e(str(drift['baseline']))}</h2><p>{e(fleet['drift_rule'])}</p>"
                  f"<table><tr><th>robot</th><th>parameter</th><th>before</th><th>now</th><th>moved</th>"
                  f"<th>allowed</th></tr>{drift_rows}</table>"
                  f"<p>compared: {e(', '.join(drift['compared']))}; not compared: "
                  f"{e('; '.join(f'{r}: {why}' for r, why in drift['not_compared'].items()))}</p>")
    figures = "".join(_figure(k, s, robots, drift) for k, s in doc["parameters"].items())
    c = fleet["counts"]
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Fleet identification</title>
<script type="text/javascript">{get_plotlyjs()}</script>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #bbb;padding:3px 8px;text-align:left}}</style></head><body>
<h1>Fleet identification</h1>
<p>Manifest <code>{e(fleet['manifest'])}</code>; engine {e(fleet['engine'])}; {c['ok']} ok, {c['suspect']} suspect,
{c['failed']} failed ({c['resumed']} resumed); {e(fleet['start'])} to {e(fleet['end'])}.</p>
<h2>Robots</h2><table><tr><th>robot</th><th>status</th><th>reason / warnings</th><th>outlier in</th>
<th>drifted</th></tr>{rows}</table>
<h2>Fleet per parameter</h2><p>{e(fleet['outlier_rule'])}</p>
<table><tr><th>parameter</th><th>robots</th><th>median</th><th>spread (1.4826 MAD)</th><th>outliers</th></tr>
{stat_rows}</table>
{drift_html}
{figures}
</body></html>
"""


def write_fleet_html(doc: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.write_text(render_fleet_html(doc))
    return path
