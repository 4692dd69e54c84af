"""ROS 2 parameter files (`<node>: ros__parameters: ...`) read into flat `a.b.c` names, without rclpy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted names, as ROS 2 names parameters (`gains: {hinge: {p: 1}}` -> `gains.hinge.p`)."""
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, item in value.items():
        out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def load_ros_parameters(path: Path, node_name: str) -> dict[str, Any]:
    """The flat parameters a file gives `node_name`: its own section (`name`, `/name` or `/**/name`), else `/**`."""
    try:
        document = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read parameter file: {exc}", file=str(path)) from exc
    section = (document.get(node_name) or document.get(f"/{node_name}") or document.get(f"/**/{node_name}")
               or document.get("/**"))
    if not isinstance(section, dict) or "ros__parameters" not in section:
        raise ConfigError(f"no ros__parameters for node {node_name!r}", file=str(path))
    return flatten(section["ros__parameters"])
