"""fleet.html: the fleet document as one offline report page (`core/report`): the robots' status, the fleet
per parameter, the drift, and per parameter every robot's value with its 95 % interval against the fleet
median and spread, outliers and drifted robots marked."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..report import Page, figure

COLORS = {"ok": "#1f77b4", "outlier": "#d62728", "drifted": "#ff7f0e"}


def _plot(page: Page, name: str, stats: dict[str, Any], robots: dict[str, Any], drifted: set[str]) -> None:
    base, _, index = name.partition("[")
    pick = (lambda v: v[int(index[:-1])] if isinstance(v, list) else v) if index else (lambda v: v)
    ok = [(r, d["parameters"][base]) for r, d in robots.items() if d["status"] == "ok" and base in d["parameters"]]
    names = [r for r, _ in ok]
    values = [float(pick(p["value"])) for _, p in ok]
    halves = [float(pick(p["half_width_95"])) for _, p in ok]
    colors = [
        COLORS["outlier"] if r in stats["outliers"] else COLORS["drifted"] if r in drifted else COLORS["ok"]
        for r in names
    ]
    fig = figure(
        f"{name}: value and 95 % interval per robot (red: outlier, orange: drifted; band: median +- spread)",
        "robot",
        name,
        height=320,
    )
    fig.add_scatter(
        x=names,
        y=values,
        mode="markers",
        name=name,
        marker={"color": colors, "size": 9},
        error_y={"type": "data", "color": "#555", "array": [h if math.isfinite(h) else 0.0 for h in halves]},
    )
    med, spread = stats["median"], stats["spread"]
    fig.add_hline(y=med, line_dash="dash", annotation_text=f"median {med:.6g}")
    if spread > 0:
        fig.add_hrect(y0=med - spread, y1=med + spread, fillcolor="#888", opacity=0.15, line_width=0)
    page.plot(fig)


def fleet_page(doc: dict[str, Any]) -> Page:
    fleet, robots, drift = doc["fleet"], doc["robots"], doc.get("drift")
    c = fleet["counts"]
    page = Page("Fleet identification")
    page.verdict(
        f"{c['ok']} ok, {c['suspect']} suspect, {c['failed']} failed ({c['resumed']} resumed)",
        "ok" if c["ok"] == len(robots) else "bad",
        [
            f"{r}: {d['status']}: {d.get('reason') or '; '.join(d['warnings'])}"
            for r, d in robots.items()
            if d["status"] != "ok"
        ],
    )
    page.text(f"Manifest {fleet['manifest']}; engine {fleet['engine']}; {fleet['start']} to {fleet['end']}.")
    page.heading("Robots")
    page.table(
        ["robot", "status", "reason / warnings", "outlier in", "drifted"],
        [
            [
                r,
                d["status"] + (" (resumed)" if d["resumed"] else ""),
                d.get("reason") or "; ".join(d["warnings"]),
                ", ".join(d["outlier_in"]),
                ", ".join(d.get("drifted", [])),
            ]
            for r, d in robots.items()
        ],
        [d["status"] != "ok" or bool(d["outlier_in"]) or bool(d.get("drifted")) for d in robots.values()],
    )
    page.heading("Fleet per parameter")
    page.text(fleet["outlier_rule"])
    page.table(
        ["parameter", "robots", "median", "spread (1.4826 MAD)", "outliers"],
        [[k, s["robots"], s["median"], s["spread"], ", ".join(s["outliers"])] for k, s in doc["parameters"].items()],
        [bool(s["outliers"]) for s in doc["parameters"].values()],
    )
    if drift is not None:
        page.heading(f"Drift against {drift['baseline']}")
        page.text(fleet["drift_rule"])
        page.table(
            ["robot", "parameter", "before", "now", "moved", "allowed"],
            [
                [r, k, d["before"], d["now"], d["moved"], d["allowed"]]
                for r, ps in drift["drifted"].items()
                for k, d in ps.items()
            ],
        )
        page.items(
            [f"compared: {', '.join(drift['compared']) or 'none'}"]
            + [f"not compared: {r}: {why}" for r, why in drift["not_compared"].items()]
        )
    drifted = set((drift or {}).get("drifted", {}))
    for name, stats in doc["parameters"].items():
        _plot(page, name, stats, robots, drifted)
    return page


def write_fleet_html(doc: dict[str, Any], path: str | Path) -> Path:
    return fleet_page(doc).write(path)
