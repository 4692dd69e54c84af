"""Identify a fleet: every robot of a manifest through one engine, then `fleet.yaml` and `fleet.html`.

Bad input (the manifest, the output folder, the baseline) is refused before any robot runs. A robot's
own failure is recorded and the others go on. Results are written per robot as each finishes, so an
interrupt keeps every finished robot, and running the same command again skips them (resume).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, SysidRosError
from ..files import folder_lock, load_yaml, model_path, refuse_inputs_inside, remove_stale, replace_file
from ..identify import load_problem
from .engines import Startup, check_engine, local_workers, map_jobs
from .html import write_fleet_html
from .manifest import Manifest, RobotJob, load_manifest
from .provenance import data_files, software, utc_now
from .robot import identify_robot, warm_worker
from .statistics import MIN_ROBOTS, Z_THRESHOLD, components, drift, fleet_statistics, parameter_table

FLEET_YAML, FLEET_HTML = "fleet.yaml", "fleet.html"
OUTLIER_RULE = (
    f"robust z = (x - fleet median) / max(1.4826 MAD, median standard error of the estimates); "
    f"outlier when |z| > {Z_THRESHOLD} (with at least {MIN_ROBOTS} robots identified ok)"
)
DRIFT_RULE = "drifted when the 95 % intervals of now and the baseline do not overlap: |now - before| > h_now + h_before"


def load_baseline(folder: str | Path) -> dict[str, Any]:
    """The fleet.yaml of an earlier run, its shape checked before any robot runs (ConfigError naming the
    robot and parameter at fault: a value that is not a finite number is never silently left unjudged)."""
    path = Path(folder) / FLEET_YAML
    try:
        doc = load_yaml(path, "baseline fleet.yaml")
    except ConfigError as exc:
        raise ConfigError(f"no readable fleet run to compare with: {exc}", baseline=str(folder)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("robots"), dict):
        raise ConfigError("not a fleet.yaml (no robots)", baseline=str(path))
    for robot, entry in doc["robots"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("parameters") or {}, dict):
            raise ConfigError(f"robot {robot!r} is not a mapping with parameters", baseline=str(path))
        for name, p in (entry.get("parameters") or {}).items():
            try:
                parts = list(components(str(name), p["value"], p["half_width_95"]))
            except (TypeError, KeyError, ValueError):
                parts = []
            if not parts or any(math.isnan(h) or not math.isfinite(v) for _, v, h in parts):
                raise ConfigError(
                    f"robot {robot!r} parameter {name!r}: value and half_width_95 must be finite "
                    f"numbers, got {str(p)[:80]}",
                    baseline=str(path),
                )
    return doc


def _data_bytes(robot: RobotJob) -> int:
    """The size of a robot's bags (its own, else its problem's): roughly how long its job takes."""
    try:
        paths = [*robot.training, *robot.validation]
        if not robot.training or not robot.validation:
            problem = load_problem(robot.problem)
            paths += [
                s.path
                for s in (
                    *(() if robot.training else problem.training),
                    *(() if robot.validation else problem.validation),
                )
            ]
        return sum(f.stat().st_size for p in paths for f in data_files(p))
    except (SysidRosError, OSError):  # its job fails soon and says why
        return 0


def longest_first(robots: Sequence[RobotJob]) -> tuple[RobotJob, ...]:
    """The robots by the size of their data, largest first (ties: manifest order), so that no worker
    starts a long job when the others are about to finish."""
    return tuple(sorted(robots, key=lambda r: -_data_bytes(r)))


def _failure(name: str, exc: BaseException) -> dict[str, Any]:
    """A robot whose job escaped its worker (the worker process died, the engine lost it)."""
    reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return {
        "name": name,
        "status": "failed",
        "reason": reason,
        "verdict": None,
        "warnings": [],
        "parameters": {},
        "provenance": {},
        "resumed": False,
        "seconds": 0.0,
    }


def fleet_document(
    outcomes: dict[str, dict], meta: dict[str, Any], baseline: dict[str, Any] | None, baseline_dir: str | None
) -> dict[str, Any]:
    """The content of fleet.yaml."""
    stats = fleet_statistics(parameter_table(outcomes))
    moved = drift(outcomes, baseline) if baseline is not None else None
    robots = {}
    for name, o in outcomes.items():
        params = {}
        for pname, p in o["parameters"].items():
            params[pname] = {
                **p,
                **(
                    {"z": stats[pname]["z"].get(name), "outlier": name in stats[pname]["outliers"]}
                    if pname in stats
                    else {}
                ),
            }
        robots[name] = {
            "status": o["status"],
            **({"reason": o["reason"]} if o["reason"] else {}),
            "verdict": o["verdict"],
            "warnings": o["warnings"],
            "resumed": o["resumed"],
            "results": name if o["status"] != "failed" else None,
            "seconds": round(o["seconds"], 3),
            "parameters": params,
            "outlier_in": sorted(k for k, s in stats.items() if name in s["outliers"]),
            **({"drifted": sorted(moved["drifted"].get(name) or {})} if moved else {}),
            "provenance": o["provenance"],
        }
    counts = {s: sum(o["status"] == s for o in outcomes.values()) for s in ("ok", "suspect", "failed")}
    counts["resumed"] = sum(bool(o["resumed"]) for o in outcomes.values())
    return {
        "fleet": {**meta, "counts": counts, "outlier_rule": OUTLIER_RULE, "drift_rule": DRIFT_RULE},
        "parameters": {k: {kk: vv for kk, vv in s.items() if kk != "z"} for k, s in stats.items()},
        "robots": robots,
        **({"drift": {"baseline": baseline_dir, **moved}} if moved is not None else {}),
    }


def run_inputs(fleet: Manifest, baseline: str | Path | None = None) -> list[Path]:
    """Every file and folder the run reads: the manifest, each robot's problem, model and bags, the baseline."""
    found = [fleet.path, *([Path(baseline)] if baseline is not None else [])]
    for robot in fleet.robots:
        found += [robot.problem, *robot.training, *robot.validation]
        try:
            problem = load_problem(robot.problem)
            found += [s.path for s in (*problem.training, *problem.validation)]
            found.append(model_path(problem.model))
        except (SysidRosError, OSError):  # its job fails and says why
            pass
    return found


def run_fleet(
    manifest: str | Path,
    out_dir: str | Path,
    *,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    baseline: str | Path | None = None,
    force: bool = False,
    progress: Callable[[dict], None] | None = None,
) -> dict[str, Any]:
    """Identify every robot of the manifest into `out_dir/<robot>/`; write and return the fleet document.
    A robot whose folder holds results of other inputs fails unless `force`; of the same inputs, resumes.
    Refused before anything is written: an `out_dir` that holds (or lies inside) one of the run's inputs, or
    that another run is writing into (`folder_lock`)."""
    fleet = load_manifest(manifest)
    before = load_baseline(baseline) if baseline is not None else None
    out = Path(out_dir).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise ConfigError("the output is a file, not a folder", out=str(out))
    check_engine(engine, workers, address)
    refuse_inputs_inside(out, run_inputs(fleet, baseline))
    created = not out.exists()
    try:
        with folder_lock(out):
            remove_stale(out)  # folders an interrupted (killed) run was writing
            return _run(fleet, out, engine, workers, address, before, baseline, force, progress)
    except ConfigError:  # e.g. the engine did not start (no Ray cluster at the address): leave nothing
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        raise


def _run(
    fleet: Manifest,
    out: Path,
    engine: str,
    workers: int | None,
    address: str | None,
    before: dict[str, Any] | None,
    baseline: str | Path | None,
    force: bool,
    progress: Callable[[dict], None] | None,
) -> dict[str, Any]:
    start, t0 = utc_now(), time.perf_counter()
    outcomes: dict[str, dict] = {}
    job = partial(identify_robot, out_dir=str(out), engine=engine, force=force)
    warm = partial(warm_worker, tuple(dict.fromkeys(str(r.problem) for r in fleet.robots)))
    robots = longest_first(fleet.robots)
    startup: list[Startup] = []
    last = None  # when the last robot's outcome arrived: the engine's shutdown after it is not the jobs' time
    for k, result, exc in map_jobs(
        job, robots, engine=engine, workers=workers, address=address, warm=warm, on_start=startup.append
    ):
        last = time.perf_counter()
        outcome = result if exc is None else _failure(robots[k].name, exc)
        outcomes[robots[k].name] = outcome
        if progress is not None:
            progress(outcome)
    outcomes = {r.name: outcomes[r.name] for r in fleet.robots}  # manifest order
    done = time.perf_counter()
    jobs_done = done if last is None else last
    ready = startup[0].seconds if startup else 0.0
    capped = local_workers(workers)[1] if engine == "local" else ""
    meta = {
        "manifest": str(fleet.path),
        "out": str(out),
        "engine": engine,
        "workers": workers,
        **({"workers_capped": capped} if capped else {}),
        "address": address,
        "start": start,
        "end": utc_now(),
        "seconds": round(done - t0, 3),
        "software": software(),
        "startup": {
            "seconds": round(startup[0].seconds, 3) if startup else None,
            "workers": [dict(w) for w in startup[0].workers] if startup else [],
        },
        "jobs_seconds": round(max(jobs_done - t0 - ready, 0.0), 3),
        "shutdown_seconds": round(done - jobs_done, 3),
    }
    doc = fleet_document(outcomes, meta, before, None if baseline is None else str(Path(baseline).resolve()))
    replace_file(out / FLEET_YAML, yaml.safe_dump(doc, sort_keys=False).encode())
    write_fleet_html(doc, out / FLEET_HTML)
    return doc
