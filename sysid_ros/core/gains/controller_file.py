"""Gains into a controller manager's parameter file: the block to paste, or the user's file updated in place.

`parameter_block` gives `NAME: {ros__parameters: {gains: {<joint>: {p: .., d: .., ...}}}}` in a style's own
names (see `core.gains.controller_styles`); `persist` writes the same values into an existing controllers YAML,
keeping its comments, key order and flow style (ruamel.yaml round trip) and a backup of the file as it was.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files.ros_params import applies_to, parameter_blocks
from .controller_styles import ControllerStyle, integral_switches, split_name, switched_on, to_controller


def with_switches(parameters: Mapping[str, Any], style: ControllerStyle,
                  found: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`parameters` plus the anti-windup switch turned on for joints given integral action while it is off
    in `found` (our names; a switch missing from `found` counts as off, the upstream default)."""
    names = [n for n in integral_switches(style, parameters) if n not in parameters]
    off = style.switch.off[0] if style.switch else None
    return {**parameters, **switched_on(style, {n: (found or {}).get(n, off) for n in names})}


def gains_tree(parameters: Mapping[str, Any], style: ControllerStyle) -> dict[str, dict[str, Any]]:
    """{joint: {their gain name: value}} for our `gains.<joint>.<gain>` values."""
    tree: dict[str, dict[str, Any]] = {}
    for name, value in to_controller(parameters, style).items():
        joint, leaf = split_name(name)
        tree.setdefault(joint, {})[leaf] = value
    return tree


def parameter_block(parameters: Mapping[str, Any], controller: str, style: ControllerStyle) -> dict[str, Any]:
    """The controller's parameter-file block holding `parameters` in `style`'s names."""
    return {controller: {"ros__parameters": {"gains": gains_tree(with_switches(parameters, style), style)}}}


def _round_trip():
    from ruamel.yaml import YAML

    yaml = YAML()  # round trip: comments, order and flow style survive
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def _section(document: Any, controller: str, path: Path) -> Any:
    sections = [(name, block) for name, block in parameter_blocks(document) if applies_to(name, controller)
                and isinstance(block, Mapping)]
    if len(sections) == 1:
        return sections[0][1]
    if sections:
        names = ", ".join(name for name, _ in sections)
        raise ConfigError(f"{len(sections)} blocks apply to {controller} ({names}): keep one", file=str(path))
    others = [name for name, _ in parameter_blocks(document) if name.rsplit("/", 1)[-1] == controller.rsplit("/", 1)[-1]]
    hint = f" (found {', '.join(others)}: pass the controller's full name)" if others else ""
    raise ConfigError(f"no `{controller}: ros__parameters:` section to update{hint}", file=str(path))


def _load(path: Path) -> tuple[Any, Any]:
    """The round-trip document of a controllers file and the `controller` section's ros__parameters."""
    from ruamel.yaml.error import YAMLError

    try:
        return _round_trip().load(path.read_text())
    except (OSError, YAMLError) as exc:
        raise ConfigError(f"cannot read the controllers file: {exc}".splitlines()[0], file=str(path)) from exc


def check_target(path: str | Path, controller: str) -> None:
    """Raise ConfigError unless `path` is a readable controllers file with a `controller` block."""
    _section(_load(Path(path)), controller, Path(path))


def persist(path: str | Path, controller: str, parameters: Mapping[str, Any], style: ControllerStyle) -> Path:
    """Write `parameters` into the `controller` block of the controllers YAML at `path`, in place.

    Only the named gains (and an anti-windup switch integral action needs) change; everything else, comments
    included, stays as it was. The file as it was is kept as `<file>.bak` (or `.bak.N`, never overwritten);
    returns that backup's path. A file that cannot be read or has no such block is left untouched.
    """
    path = Path(path)
    document = _load(path)
    section = _section(document, controller, path)
    gains = section.setdefault("gains", {})
    found = {f"gains.{j}.{k}": v for j, block in gains.items() if isinstance(block, Mapping) for k, v in block.items()}
    for joint, values in gains_tree(with_switches(parameters, style, found), style).items():
        block = gains.setdefault(joint, {})
        for key, value in values.items():
            block[key] = value
    backup = path.with_name(path.name + ".bak")
    number = 0
    while backup.exists():
        number += 1
        backup = path.with_name(f"{path.name}.bak.{number}")
    shutil.copy2(path, backup)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w") as f:
        _round_trip().dump(document, f)
    temporary.replace(path)
    return backup
