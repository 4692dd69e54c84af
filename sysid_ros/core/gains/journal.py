"""The gains journal: every gain change is on disk, synced, before it is sent, so it can always be undone.

An append-only file of JSON lines. A change is written `pending` (previous and new values) before anything
is sent, then `applied` (a tuning session records each set of trial gains as `applied` before sending
it), then `kept` or `rolled_back`, or `overridden` when the controller's gains changed under us (a reload)
and a roll-back would have restored stale values. After a crash, `unfinished()` names every change that
was not finished: the previous values to restore are in it, exactly as read before. Values are numbers
(infinite allowed: a controller's "no clamp"; NaN never), or the bool/string of an anti-windup switch.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, GainsError

STATES = ("pending", "applied", "canary", "kept", "rolled_back", "failed", "overridden")
FINAL = ("kept", "rolled_back", "failed", "overridden")


@dataclass(frozen=True)
class GainChange:
    """One change of a controller's gains: the exact previous and new parameter values."""

    change_id: str
    controller: str
    previous: dict[str, float | bool | str]
    new: dict[str, float | bool | str]
    state: str = "pending"
    reason: str = ""
    time_s: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ConfigError(f"unknown journal state {self.state!r}")
        if set(self.previous) != set(self.new):
            raise GainsError(
                f"a change must name the same parameters before and after: "
                f"{sorted(set(self.previous) ^ set(self.new))}",
                controller=self.controller,
            )
        for name, value in {**self.previous, **self.new}.items():
            if not isinstance(value, (bool, str)) and not (isinstance(value, (int, float)) and not math.isnan(value)):
                raise GainsError(
                    f"{name} is not a number (or a switch's bool or string): {value!r}", controller=self.controller
                )


class GainsJournal:
    """Append-only, fsync'd record of gain changes at `path`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def record(self, change: GainChange) -> GainChange:
        """Append one state of a change and sync it to disk before returning."""
        line = json.dumps(
            {
                "change_id": change.change_id,
                "controller": change.controller,
                "state": change.state,
                "previous": change.previous,
                "new": change.new,
                "reason": change.reason,
                "time_s": change.time_s,
            }
        )  # NaN refused above; inf as Infinity
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return change

    def advance(self, change: GainChange, state: str, reason: str = "") -> GainChange:
        """Record `change` in a new state."""
        return self.record(
            GainChange(change.change_id, change.controller, change.previous, change.new, state, reason or change.reason)
        )

    def changes(self) -> dict[str, GainChange]:
        """The latest state of every change, in the order they began; a torn last line (a crash) is skipped."""
        latest: dict[str, GainChange] = {}
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        for number, line in enumerate(lines, 1):
            try:
                entry = json.loads(line)
                latest[entry["change_id"]] = GainChange(**entry)
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                if number < len(lines):  # only the last line may be torn by a crash mid-write
                    raise GainsError(f"journal line {number} is damaged: {exc}", journal=str(self.path)) from exc
        return latest

    def unfinished(self) -> list[GainChange]:
        """Changes neither kept nor rolled back: after a crash, each one's `previous` must be restored."""
        return [c for c in self.changes().values() if c.state not in FINAL]
