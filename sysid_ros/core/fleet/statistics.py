"""Fleet statistics over the robots identified `ok`: per parameter the median and spread, robust-z
outliers, and drift against an earlier fleet run.

Outliers (Iglewicz & Hoaglin's modified z-score): z = (x - median) / scale with scale = 1.4826 MAD (the
standard deviation for normal data), floored at the median standard error of the robots' own estimates
(95 % half-width / 1.96) so that a fleet more alike than its measurements can tell apart flags nobody.
|z| > 3.5 is an outlier; with fewer than 3 robots nothing is flagged.

Drift: a parameter of a robot has drifted when its 95 % interval and the baseline run's no longer overlap,
|now - before| > half-width now + half-width before (for two independent estimates with equal intervals
that is 2.8 standard errors of the difference: about 1 false flag in 200 parameters). Parameters without
a finite interval (not identifiable) are not judged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

Z_THRESHOLD = 3.5
MIN_ROBOTS = 3
MAD_TO_SIGMA = 1.4826


def components(name: str, value: Any, half: Any) -> Iterable[tuple[str, float, float]]:
    """A parameter as scalar components: `mass`, or `mass_com[0]` ... for vector parameters."""
    if isinstance(value, list):
        halves = half if isinstance(half, list) else [half] * len(value)
        for k, (v, h) in enumerate(zip(value, halves)):
            yield f"{name}[{k}]", float(v), float(h)
    else:
        yield name, float(value), float(half)


def parameter_table(outcomes: dict[str, dict]) -> dict[str, dict[str, tuple[float, float]]]:
    """parameter -> robot -> (value, 95 % half-width), over the robots identified ok."""
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for robot, outcome in outcomes.items():
        if outcome["status"] != "ok":
            continue
        for name, p in outcome["parameters"].items():
            for key, v, h in components(name, p["value"], p["half_width_95"]):
                table.setdefault(key, {})[robot] = (v, h)
    return table


def fleet_statistics(
    table: dict[str, dict[str, tuple[float, float]]], threshold: float = Z_THRESHOLD
) -> dict[str, dict[str, Any]]:
    """parameter -> {robots, median, spread (1.4826 MAD), scale, z per robot, outliers}."""
    stats = {}
    for name, per_robot in table.items():
        robots = sorted(per_robot)
        values = np.array([per_robot[r][0] for r in robots])
        halves = np.array([per_robot[r][1] for r in robots])
        median = float(np.median(values))
        spread = MAD_TO_SIGMA * float(np.median(np.abs(values - median)))
        finite = halves[np.isfinite(halves)]
        floor = float(np.median(finite)) / 1.96 if finite.size else 0.0
        scale = max(spread, floor)
        z = {r: (float(v - median) / scale if scale > 0 else 0.0) for r, v in zip(robots, values)}
        flagged = sorted(r for r in robots if len(robots) >= MIN_ROBOTS and abs(z[r]) > threshold)
        stats[name] = {
            "robots": len(robots),
            "median": median,
            "spread": spread,
            "scale": scale,
            "z": z,
            "outliers": flagged,
        }
    return stats


def drift(outcomes: dict[str, dict], baseline: dict[str, Any]) -> dict[str, Any]:
    """Against a baseline fleet.yaml document: {drifted: robot -> parameter -> detail, compared, not_compared}."""
    before_robots = baseline.get("robots") or {}
    drifted: dict[str, dict[str, Any]] = {}
    compared, not_compared = [], {}
    for robot, outcome in sorted(outcomes.items()):
        before = before_robots.get(robot)
        if outcome["status"] != "ok":
            not_compared[robot] = f"not identified ok now ({outcome['status']})"
            continue
        if not before or before.get("status") != "ok":
            not_compared[robot] = "no ok result in the baseline"
            continue
        compared.append(robot)
        old = {
            k: (v, h)
            for name, p in (before.get("parameters") or {}).items()
            for k, v, h in components(name, p["value"], p["half_width_95"])
        }
        for name, p in outcome["parameters"].items():
            for key, v, h in components(name, p["value"], p["half_width_95"]):
                if key not in old:
                    continue
                v0, h0 = old[key]
                if not (math.isfinite(h) and math.isfinite(h0)):
                    continue
                moved = v - v0
                if abs(moved) > h + h0:
                    drifted.setdefault(robot, {})[key] = {
                        "before": v0,
                        "now": v,
                        "moved": moved,
                        "allowed": h + h0,
                        "relative": moved / v0 if v0 else None,
                    }
    return {"drifted": drifted, "compared": compared, "not_compared": not_compared}
