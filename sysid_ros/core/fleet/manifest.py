"""A fleet manifest: which robots, each with its problem file (or the fleet's shared problem with this
robot's bags), and optional tags. Paths are relative to the manifest.

    problem: pendulum_problem.yaml          # optional: shared by robots that name no problem of their own
    robots:
      - {name: r1, problem: r1.yaml}
      - {name: r2, train: [bags/r2_train], validate: [bags/r2_val], control: effort, tags: {site: lab}}

Only the manifest's own shape is checked here; a robot's files are its job's business (a missing bag
fails that robot, not the fleet).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import load_yaml
from ..identify import CONTROLS

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
RESERVED = {"fleet.yaml", "fleet.html"}
"""Names of the fleet's own files in its --out: no robot's results folder may take them."""
ROBOT_KEYS = {"name", "problem", "train", "validate", "control", "tags"}


@dataclass(frozen=True)
class RobotJob:
    """One robot's identification: its problem file, and bags that replace the problem's (if any)."""

    name: str
    problem: Path
    training: tuple[Path, ...] = ()
    validation: tuple[Path, ...] = ()
    control: str = "auto"
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Manifest:
    path: Path
    robots: tuple[RobotJob, ...]


def _paths(value: Any, base: Path, what: str, robot: str) -> tuple[Path, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(p, str) and p for p in items):
        raise ConfigError(f"{what} must be a path or a list of paths", robot=robot)
    return tuple((base / Path(p).expanduser()).resolve() for p in items)


def _robot(entry: Any, base: Path, shared: Path | None, index: int) -> RobotJob:
    if not isinstance(entry, dict):
        raise ConfigError(f"robot entry {index} must be a mapping with a name, got {entry!r}")
    name = entry.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name) or len(name) > 100:
        raise ConfigError(
            f"robot entry {index} needs a name of letters, digits, '_', '.', '-' (at most 100; it "
            f"names its results folder), got {str(name)[:60]!r}"
        )
    if name.lower() in RESERVED:
        raise ConfigError(
            f"robot entry {index} is named {name!r}, which the fleet's own files use "
            f"({', '.join(sorted(RESERVED))}): rename it"
        )
    unknown = sorted(set(entry) - ROBOT_KEYS)
    if unknown:
        raise ConfigError(f"unknown keys {unknown}; a robot takes {sorted(ROBOT_KEYS)}", robot=name)
    problem = _paths(entry["problem"], base, "problem", name)[0] if entry.get("problem") else shared
    if problem is None:
        raise ConfigError("names no problem file and the manifest has no shared 'problem'", robot=name)
    control = entry.get("control", "auto")
    if control not in CONTROLS:
        raise ConfigError(f"control must be one of {CONTROLS}, got {control!r}", robot=name)
    tags = entry.get("tags") or {}
    if not isinstance(tags, dict) or not all(isinstance(v, (str, int, float, bool)) for v in tags.values()):
        raise ConfigError(
            "tags must be a mapping of names to plain values (e.g. {model: pendulum, site: lab})", robot=name
        )
    return RobotJob(
        name,
        problem,
        _paths(entry.get("train") or [], base, "train", name),
        _paths(entry.get("validate") or [], base, "validate", name),
        control,
        {str(k): str(v) for k, v in tags.items()},
    )


def load_manifest(path: str | Path) -> Manifest:
    """Read and check a manifest (ConfigError naming the robot entry at fault)."""
    path = Path(path).expanduser().resolve()
    doc = load_yaml(path, "fleet manifest")
    if not isinstance(doc, dict) or not isinstance(doc.get("robots"), list) or not doc["robots"]:
        raise ConfigError("a fleet manifest needs 'robots:', a non-empty list", file=str(path))
    unknown = sorted(set(doc) - {"robots", "problem"})
    if unknown:
        raise ConfigError(f"unknown keys in the fleet manifest: {unknown}", file=str(path))
    base = path.parent
    shared = _paths(doc["problem"], base, "problem", "(shared)")[0] if doc.get("problem") else None
    robots = tuple(_robot(entry, base, shared, k) for k, entry in enumerate(doc["robots"]))
    seen: set[str] = set()
    for robot in robots:
        if robot.name in seen:
            raise ConfigError("two robots share this name", robot=robot.name, file=str(path))
        seen.add(robot.name)
    return Manifest(path, robots)
