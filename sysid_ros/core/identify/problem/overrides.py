"""Point a problem at other data (the bags just recorded) without editing its file.

A bag given in place of the problem's data replaces only the path: the entry's other settings (command topic,
the controller's joint order, feedback topic, control, trims, segments) stay, for they describe the robot and its
recorder, not one recording. With as many new paths as entries each takes its entry's settings; otherwise each
takes the settings every entry shares, and a setting the entries disagree on is dropped with one logged line.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path

from ...errors import ConfigError, SysidRosError
from ...files import load_yaml
from .file import CONTROLS, DataSource, Problem

log = logging.getLogger(__name__)

SETTINGS = tuple(f.name for f in fields(DataSource) if f.name != "path")
"""A data entry's settings that a replaced path keeps."""


def carried_settings(entries: Sequence[DataSource], count: int) -> tuple[list[dict], list[str]]:
    """The settings each of `count` new paths takes from `entries`, and the settings dropped (entries disagree)."""
    if not entries:
        return [{} for _ in range(count)], []
    if len(entries) == count:
        return [{k: getattr(e, k) for k in SETTINGS} for e in entries], []
    shared = {
        k: getattr(entries[0], k) for k in SETTINGS if all(getattr(e, k) == getattr(entries[0], k) for e in entries)
    }
    return [dict(shared) for _ in range(count)], [k for k in SETTINGS if k not in shared]


def recorded_topics(path: Path) -> set[str] | None:
    """The topics a rosbag2 directory's metadata lists, or None (not a rosbag2 directory, or unreadable: the
    loader says what is wrong)."""
    try:
        meta = load_yaml(path / "metadata.yaml", "metadata.yaml")["rosbag2_bagfile_information"]
        return {t["topic_metadata"]["name"] for t in meta["topics_with_message_count"]}
    except (SysidRosError, OSError, KeyError, TypeError):
        return None


def with_data(
    problem: Problem, training: Sequence[str | Path] = (), validation: Sequence[str | Path] = (), control: str = "auto"
) -> Problem:
    """`problem` with its training and/or validation data replaced by these bags or .npz files, each keeping the
    settings of the entry it replaces (see the module doc); `control` other than `auto` overrides the entries'."""
    if control not in CONTROLS:
        raise ConfigError(f"control must be one of {CONTROLS}, not {control!r}")

    def sources(paths: Sequence[str | Path], entries: Sequence[DataSource], what: str) -> tuple[DataSource, ...]:
        settings, dropped = carried_settings(entries, len(paths))
        if dropped:
            log.warning(
                "%s: %d new path(s) for %d entries that differ in %s: those settings are dropped (the "
                "defaults apply); give the entries' settings in the problem file to keep them",
                what,
                len(paths),
                len(entries),
                ", ".join(dropped),
            )
        out = []
        for p, kept in zip(paths, settings):
            if control != "auto" or "control" not in kept:
                kept["control"] = control
            if kept["control"] == "effort":  # the measured effort is replayed: no command topic is read
                kept.update(command_topic=None, command_joints=None)
            topic = kept.get("command_topic")
            listed = recorded_topics(Path(p).expanduser())
            if topic and listed is not None and topic not in listed:
                log.warning(
                    "%s: %s records no %s (the replaced entry's command topic): its own recorded commands are "
                    "used (command_topic and command_joints dropped for it)",
                    what,
                    p,
                    topic,
                )
                kept.update(command_topic=None, command_joints=None)
            out.append(DataSource(Path(p).expanduser().resolve(), **kept))
        return tuple(out)

    changes = {}
    if training:
        changes["training"] = sources(training, problem.training, "training")
    if validation:  # held-out bags of the same robot: the validation entries' settings, else the training's
        changes["validation"] = sources(validation, problem.validation or problem.training, "validation")
    return replace(problem, **changes) if changes else problem
