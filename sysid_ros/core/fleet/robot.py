"""One robot's job, run on whichever worker the engine picks: identify, write the results with their
provenance into `<out>/<robot>/` atomically, and return a plain summary. Never raises for the robot's own
faults (a bad bag, a refused problem): they become a `failed` outcome, so the rest of the fleet goes on.

A robot whose inputs hash the same as its finished result's is not identified again (resume).
"""

from __future__ import annotations

import importlib
import math
import os
import resource
import shutil
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, SysidRosError
from ..files import load_yaml
from ..identify import identify, load_problem, results_document, set_rollout_threads, with_data, write_results
from ..identify.problem import model_cache
from .manifest import RobotJob
from .provenance import input_hashes, software, utc_now

PROVENANCE = "provenance.yaml"
PARTIAL = ".partial-"  # a results folder being written: `.<robot>.partial-<pid>`, renamed when complete


def _plain_parameters(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> value, 95 % half-width and identifiable, from an identified.yaml document."""
    out = {}
    for name, p in (doc.get("parameters") or {}).items():
        if p.get("frozen"):
            continue
        value, half = p["value"], p["half_width_95"]
        out[name] = {
            "value": value,
            "half_width_95": half if isinstance(half, list) or math.isfinite(half) else float("inf"),
            "identifiable": bool(p.get("identifiable", True)),
        }
    return out


def _status(verdict: str) -> str:
    return "ok" if verdict == "ok" else "suspect"


def _resumed(final: Path, inputs: dict) -> dict[str, Any] | None:
    """The finished result's outcome when its inputs are these, else None."""
    try:
        prov = load_yaml(final / PROVENANCE, "provenance")
        doc = load_yaml(final / "identified.yaml", "identified results")
    except ConfigError:
        return None
    if not isinstance(prov, dict) or prov.get("inputs") != inputs or not isinstance(doc, dict):
        return None
    return {
        "status": _status(prov.get("verdict", "ok")),
        "verdict": prov.get("verdict", "ok"),
        "warnings": list(prov.get("warnings") or []),
        "parameters": _plain_parameters(doc),
        "provenance": prov,
        "resumed": True,
    }


def _replace_dir(tmp: Path, final: Path) -> None:
    """Put a complete results folder in place; an older one is moved aside first, then removed."""
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)


WARM_MODULES = (
    "sysid_ros.core.identify.pipeline",
    "sysid_ros.core.identify.output.write",
    "plotly.graph_objects",
    "plotly.offline",
)
"""What a robot's job imports (mujoco.sysid, scipy, the report's plotly): ~2 s in a fresh process."""


def warm_worker(problem_files: Sequence[str | Path], cores: int) -> dict[str, Any]:
    """Prepare a worker for the fleet's robots before its first one: import what a job imports, compile
    each problem's model into this process's cache (`model_cache`), so that no robot pays for either, and
    give its rollouts `cores` threads (its share of the machine). A problem that does not load is left for
    its robots' jobs to report."""
    set_rollout_threads(cores)

    for module in WARM_MODULES:
        importlib.import_module(module)
    compiles = model_cache.stats["compiles"]
    for path in list(dict.fromkeys(map(str, problem_files)))[: model_cache.MAXSIZE]:
        try:
            model_cache.compiled_model(load_problem(path))
        except Exception:
            pass
    return {
        "models_compiled": model_cache.stats["compiles"] - compiles,
        "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def robot_problem(job: RobotJob):
    """The robot's problem: its file with the robot's own bags. A robot that names its own `train:` without
    `validate:` is validated on nothing, never on the shared problem's held-out data (another robot's, or a
    path that only made sense next to the shared file)."""
    problem = load_problem(job.problem)
    if job.training and not job.validation:
        problem = replace(problem, validation=())
    return with_data(problem, job.training, job.validation, job.control)


def identify_robot(job: RobotJob, out_dir: str | Path, engine: str = "serial", force: bool = False) -> dict[str, Any]:
    """Identify one robot into `<out_dir>/<name>/`; a plain dict (status ok|suspect|failed, reason,
    verdict, warnings, parameters, provenance, resumed) that pickles across any engine. Results of other
    inputs already in that folder fail the robot unless `force` (they are replaced only when told)."""
    out = Path(out_dir)
    final = out / job.name
    started, t0, cpu0 = utc_now(), time.perf_counter(), time.process_time()
    prov: dict[str, Any] = {
        "robot": job.name,
        "tags": dict(job.tags),
        "engine": engine,
        **software(),
        "pid": os.getpid(),
        "start": started,
    }
    tmp = out / f".{job.name}{PARTIAL}{os.getpid()}"
    try:
        problem = robot_problem(job)
        if job.training and not job.validation:
            prov["validation"] = "none: the robot names its own training data and no validate:"
        inputs = input_hashes(problem, job.problem)
        prov["inputs"] = inputs
        resumed = _resumed(final, inputs)
        if resumed is not None:
            return {"name": job.name, "reason": "", **resumed, "seconds": time.perf_counter() - t0}
        if final.exists() and not force:
            raise ConfigError(f"{final} holds results of other inputs; --force replaces them")
        compiles = model_cache.stats["compiles"]
        result = identify(problem)
        prov["model_compiled"] = model_cache.stats["compiles"] > compiles  # False: this worker's copy reused
        shutil.rmtree(tmp, ignore_errors=True)
        write_results(result, tmp)
        doc = results_document(result)
        verdict, warnings = doc.get("verdict", "ok"), list(doc.get("warnings") or [])
        prov.update(
            verdict=verdict,
            warnings=warnings,
            end=utc_now(),
            seconds=time.perf_counter() - t0,
            cpu_seconds=time.process_time() - cpu0,  # this process, all its threads
            peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        )  # this worker so far
        (tmp / PROVENANCE).write_text(yaml.safe_dump(prov, sort_keys=False))
        _replace_dir(tmp, final)
        return {
            "name": job.name,
            "status": _status(verdict),
            "reason": "",
            "verdict": verdict,
            "warnings": warnings,
            "parameters": _plain_parameters(doc),
            "provenance": prov,
            "resumed": False,
            "seconds": time.perf_counter() - t0,
        }
    except Exception as exc:  # this robot's fault, whatever it is, must not stop the fleet
        reason = str(exc) if isinstance(exc, SysidRosError) else f"{type(exc).__name__}: {exc}"
        prov.update(end=utc_now(), seconds=time.perf_counter() - t0)
        return {
            "name": job.name,
            "status": "failed",
            "reason": reason.splitlines()[0] if reason else "failed",
            "verdict": None,
            "warnings": [],
            "parameters": {},
            "provenance": prov,
            "resumed": False,
            "seconds": time.perf_counter() - t0,
        }
    finally:  # also on an interrupt: no half-written results folder stays behind
        shutil.rmtree(tmp, ignore_errors=True)
