"""Gains into a controller manager's parameter file: the block to paste, or the user's file updated in place.

`parameter_block` gives `NAME: {ros__parameters: {gains: {<joint>: {p: .., d: .., ...}}}}` in a style's own
names (see `core.gains.controller_styles`); `persist` writes the same values into an existing controllers YAML,
keeping its comments, key order and flow style (ruamel.yaml round trip) and a backup of the file as it was;
`prepare_persist` does all of that but the final rename before a robot is touched (`apply --persist`).
"""

from __future__ import annotations

import copy
import io
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import (
    applies_to,
    check_yaml_text,
    create_new,
    parameter_blocks,
    parameter_sections,
    pending_beside,
    read_bytes,
    resolve_target,
)
from .controller_styles import ControllerStyle, integral_switches, split_name, switched_on, to_controller
from .pid import GainGuard


def with_switches(
    parameters: Mapping[str, Any], style: ControllerStyle, found: Mapping[str, Any] | None = None
) -> dict[str, Any]:
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
    """The controller's parameter-file block holding `parameters` in `style`'s names (GainsError for a value
    the tuner's guard refuses: a file never holds a gain the tuner would not send)."""
    GainGuard().check_parameters(parameters)
    return {controller: {"ros__parameters": {"gains": gains_tree(with_switches(parameters, style), style)}}}


MAX_CONTROLLERS_BYTES = 1 << 20
"""A controllers file (a real one is a few kB; the round-trip loader takes ~15 s per MiB on 2 cores)."""


def _round_trip():
    from ruamel.yaml import YAML

    yaml = YAML()  # round trip: comments, order and flow style survive
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def _section(document: Any, controller: str, path: Path) -> tuple[Any, Any]:
    """(parent, key) of the one `controller: ros__parameters:` mapping (its parent holds it under `key`)."""
    sections = [
        (name, parent, key)
        for name, parent, key in parameter_sections(document)
        if applies_to(name, controller) and isinstance(parent[key]["ros__parameters"], Mapping)
    ]
    if len(sections) == 1:
        return sections[0][1:]
    if sections:
        names = ", ".join(name for name, _, _ in sections)
        raise ConfigError(f"{len(sections)} blocks apply to {controller} ({names}): keep one", file=str(path))
    others = [
        name for name, _ in parameter_blocks(document) if name.rsplit("/", 1)[-1] == controller.rsplit("/", 1)[-1]
    ]
    hint = f" (found {', '.join(others)}: pass the controller's full name)" if others else ""
    raise ConfigError(f"no `{controller}: ros__parameters:` section to update{hint}", file=str(path))


def _load(text: str, path: Path) -> Any:
    """The round-trip document of a controllers file's text (checked first: no alias bomb)."""
    from ruamel.yaml.error import YAMLError

    check_yaml_text(text, "controllers file", file=str(path))
    try:
        return _round_trip().load(text)
    except YAMLError as exc:
        raise ConfigError(f"the controllers file is not valid YAML: {exc}".splitlines()[0], file=str(path)) from None


def _references(document: Any) -> dict[int, int]:
    """How many places of the document hold each mapping or list (an anchored block used twice: 2)."""
    counts: dict[int, int] = {}
    stack = [document]
    while stack:
        item = stack.pop()
        children = item.values() if isinstance(item, Mapping) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (Mapping, list)):
                counts[id(child)] = counts.get(id(child), 0) + 1
                if counts[id(child)] == 1:
                    stack.append(child)
    return counts


def _plain(value: Any) -> Any:
    """A deep copy without anchors: the controller's own block, no longer shared."""
    from ruamel.yaml.comments import CommentedBase

    copied = copy.deepcopy(value)
    stack = [copied]
    while stack:
        item = stack.pop()
        if isinstance(item, CommentedBase) and getattr(item, "anchor", None) is not None:
            item.yaml_set_anchor(None)
        if isinstance(item, Mapping):
            stack.extend(v for v in item.values() if isinstance(v, (Mapping, list)))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, (Mapping, list)))
    return copied


def _own(parent: Any, key: Any, counts: dict[int, int], default: Any = None) -> tuple[Any, list[str]]:
    """`parent[key]` made this controller's own: a block shared with another place (an anchor and its alias,
    a `<<:` merge) is replaced here by a plain copy, so the edit changes no one else. Returns the block and
    what was un-shared."""
    if key not in parent:
        parent[key] = {} if default is None else default
        return parent[key], []
    value = parent[key]
    merged = hasattr(parent, "_ok") and key not in parent._ok  # ruamel: a key that only a `<<:` merge gives
    if isinstance(value, Mapping) and (counts.get(id(value), 0) > 1 or merged):
        parent[key] = _plain(value)
        return parent[key], [str(key)]
    return value, []


@dataclass(frozen=True)
class PendingPersist:
    """A controllers file update made ready by `prepare_persist`: its backup and its new version written beside
    it, waiting for `commit` (a rename) or `discard`."""

    path: Path
    target: Path
    original: bytes
    new: Path
    backup: Path
    controller: str
    parameters: dict[str, Any]
    style: ControllerStyle

    def commit(self) -> Path:
        """Put the new version in place; returns the backup's path. A file changed since it was prepared (an
        edit while the canary ran) is updated again from what it holds now."""
        try:
            unchanged = read_bytes(self.target, "controllers file", MAX_CONTROLLERS_BYTES) == self.original
        except (ConfigError, OSError):
            unchanged = False
        if not unchanged or not self.new.exists():
            self.discard()
            return persist(self.path, self.controller, self.parameters, self.style)
        try:
            os.replace(self.new, self.target)
        except OSError as exc:
            self.discard()
            raise ConfigError(
                f"cannot put the new version in place: {exc.strerror or exc}", file=str(self.path)
            ) from None
        return self.backup

    def discard(self) -> None:
        """Remove the new version and its backup, unless committed (then a no-op: the backup stays)."""
        if self.new.exists():
            self.new.unlink(missing_ok=True)
            self.backup.unlink(missing_ok=True)


def _updated(
    original: bytes, path: Path, controller: str, parameters: Mapping[str, Any], style: ControllerStyle
) -> bytes:
    """The controllers file `original` with `parameters` written into `controller`'s block (see `persist`)."""
    try:
        document = _load(original.decode("utf-8"), path)
    except UnicodeDecodeError:
        raise ConfigError("the controllers file is not UTF-8 text", file=str(path)) from None
    parent, key = _section(document, controller, path)
    counts = _references(document)
    node, unshared = _own(parent, key, counts)
    section, more = _own(node, "ros__parameters", counts)
    gains, gains_shared = _own(section, "gains", counts)
    unshared += more + gains_shared
    found = {f"gains.{j}.{k}": v for j, block in gains.items() if isinstance(block, Mapping) for k, v in block.items()}
    for joint, values in gains_tree(with_switches(parameters, style, found), style).items():
        block, joint_shared = _own(gains, joint, counts)
        unshared += joint_shared
        for name, value in values.items():
            block[name] = value
    text = io.StringIO()
    _round_trip().dump(document, text)
    return text.getvalue().encode()


def prepare_persist(
    path: str | Path, controller: str, parameters: Mapping[str, Any], style: ControllerStyle
) -> PendingPersist:
    """Everything `persist` needs, done before anything is applied to a robot: the gains checked by the tuner's
    guard, the file read and its `controller` block found, the file and its folder writable (a read-only mode,
    an immutable file or folder, a read-only file system: refused, root included), and the backup and the new
    version written and synced beside it (so the folder takes new files and the filesystem has room for both).
    ConfigError or GainsError naming the file otherwise, with nothing left behind."""
    GainGuard().check_parameters(parameters, file=str(path))
    path = Path(path)
    target = resolve_target(path, through_link=True)
    original = read_bytes(target, "controllers file", MAX_CONTROLLERS_BYTES)
    new_text = _updated(original, path, controller, parameters, style)
    mode = stat.S_IMODE(target.stat().st_mode)
    if not mode & stat.S_IWUSR:
        raise ConfigError(f"is read-only (mode {mode:04o}): not changed; make it writable first", file=str(target))
    for what, where in (("the file", target), ("its folder", target.parent)):
        if not os.access(where, os.W_OK):
            raise ConfigError(
                f"{what} cannot be written (a read-only file system, or immutable): not changed", file=str(where)
            )
    backup = None
    try:
        for number in range(1000):
            candidate = target.with_name(f"{target.name}.bak" + (f".{number}" if number else ""))
            try:
                backup = create_new(candidate, original, mode)
                break
            except FileExistsError:
                continue
        else:
            raise ConfigError("1000 backups exist already: remove old ones", file=str(path))
        new = pending_beside(target, new_text, mode)
    except OSError as exc:
        if backup is not None:
            backup.unlink(missing_ok=True)
        doing = "the new version" if backup is not None else "a backup"
        raise ConfigError(
            f"cannot write {doing} beside it: {exc.strerror or exc}: not changed", file=str(path)
        ) from None
    return PendingPersist(path, target, original, new, backup, controller, dict(parameters), style)


def persist(path: str | Path, controller: str, parameters: Mapping[str, Any], style: ControllerStyle) -> Path:
    """Write `parameters` into the `controller` block of the controllers YAML at `path`, in place.

    Only the named gains (and an anti-windup switch integral action needs) change; everything else, comments
    included, stays as it was. A block the controller shares with others (`gains: *shared`, `<<: *base`)
    becomes its own copy first, so no other controller changes. The file is replaced whole (a new version
    written beside it and renamed over it; mode kept); a link to it is written through, to the file it names.
    The file as it was is kept as `<file>.bak` (or `.bak.N`, never overwritten); returns that backup's path.
    Gains the tuner's guard refuses, a file that cannot be read, written or has no such block: refused, the file
    untouched (`prepare_persist`, which `apply --persist` calls before anything is applied).
    """
    return prepare_persist(path, controller, parameters, style).commit()
