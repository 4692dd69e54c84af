"""ROS 2 parameter files (`<node>: ros__parameters: ...`) read into flat `a.b.c` names, without rclpy."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .reading import load_yaml


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted names, as ROS 2 names parameters (`gains: {hinge: {p: 1}}` -> `gains.hinge.p`)."""
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, item in value.items():
        out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def parameter_sections(document: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(node path, the mapping holding the node, the node's key in it) of every node with `ros__parameters`,
    in file order, nested namespaces joined."""
    found = []
    if isinstance(document, Mapping):
        for key, value in document.items():
            if not isinstance(value, Mapping):
                continue
            name = f"{prefix}/{str(key).strip('/')}"
            if "ros__parameters" in value:
                found.append((name, document, key))
            else:
                found.extend(parameter_sections(value, name))
    return found


def parameter_blocks(document: Any) -> list[tuple[str, Any]]:
    """(node path, ros__parameters) of every block in a parameter file, in file order, nested namespaces joined."""
    return [(name, parent[key]["ros__parameters"]) for name, parent, key in parameter_sections(document)]


def applies_to(block: str, node: str) -> bool:
    """Whether a file's block names `node` as ROS 2 matches it: `name`, `/**/name`, or `/ns/name` for `/ns/name`."""
    parts, wanted = block.strip("/").split("/"), node.strip("/").split("/")
    if parts[-1] != wanted[-1]:
        return False
    return parts == wanted or parts == ["**", wanted[-1]]


def load_ros_parameters(path: Path, node_name: str) -> dict[str, Any]:
    """The flat parameters a file gives `node_name`: every block that applies (`/**`, `name`, `/ns/name`,
    `/**/name`) in file order, later blocks overriding earlier ones as ROS 2 applies them."""
    document = load_yaml(path, "parameter file") or {}
    blocks = [block for name, block in parameter_blocks(document) if name == "/**" or applies_to(name, node_name)]
    if not blocks or not all(isinstance(block, (dict, type(None))) for block in blocks):
        raise ConfigError(f"no ros__parameters for node {node_name!r}", file=str(path))
    values: dict[str, Any] = {}
    for block in blocks:
        values.update(flatten(block or {}))
    return values
