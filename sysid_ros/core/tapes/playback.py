"""Playing a tape on a robot, ROS-free: the command due at each instant, and the guard on live feedback.

A `Playback` knows the tape, each joint's envelope and the safety margins. The recorder node asks it for
the command due now, hands it every feedback sample, and stops the robot the moment it returns a reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, EnvelopeError
from .envelope import Envelope, check_sample, check_tape
from .tape import Tape, duration_s, sample, to_commands


@dataclass(frozen=True)
class SafetyMargins:
    """How far live feedback may stray past the envelope before motion stops, and how old it may get."""

    travel_margin_rad: float = 0.05
    speed_margin_frac: float = 0.25
    torque_margin_frac: float = 0.0
    stale_after_s: float = 0.1

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"safety margin {name} must be finite and >= 0, got {value}", parameter=name)
        if self.stale_after_s <= 0:
            raise ConfigError("stale_after_s must be > 0", parameter="stale_after_s")


class Playback:
    """One play of `tape` from `start_ns`; refuses a tape outside the envelope before anything moves."""

    def __init__(self, tape: Tape, envelopes: Mapping[str, Envelope], margins: SafetyMargins, start_ns: int) -> None:
        missing = [j for j in tape.joints if j not in envelopes]
        if missing:
            raise EnvelopeError(f"no envelope for joints {missing}", tape=tape.name)
        check_tape(tape, envelopes)  # raises EnvelopeError naming the joint, the limit, the value and the time
        self.tape = tape
        self.envelopes = {j: envelopes[j] for j in tape.joints}
        self.margins = margins
        self.start_ns = int(start_ns)
        self.duration_s = duration_s(tape)
        self.end_ns = self.start_ns + int(math.ceil(self.duration_s * 1e9))
        self.commands = to_commands(tape, self.start_ns)  # the tape on its command grid, computed once

    def elapsed_s(self, now_ns: int) -> float:
        return (now_ns - self.start_ns) * 1e-9

    def progress(self, now_ns: int) -> float:
        return min(1.0, max(0.0, self.elapsed_s(now_ns) / self.duration_s)) if self.duration_s > 0 else 1.0

    def finished(self, now_ns: int) -> bool:
        return now_ns >= self.end_ns

    def command(self, now_ns: int) -> np.ndarray:
        """The command due at `now_ns`: the tape's latest grid command (positions, or torques for an effort tape)."""
        k = int(np.searchsorted(self.commands.time_ns, now_ns, side="right")) - 1
        return self.commands.values[min(max(k, 0), len(self.commands) - 1)]

    def reference(self, times_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions and velocities at `times_s` from the start (a trajectory controller's waypoints)."""
        got = sample(self.tape, times_s)
        if got.position is None:
            raise ConfigError("an effort tape has no positions to send as a trajectory", tape=self.tape.name)
        return got.position, got.velocity

    def check(
        self, names: Sequence[str], position: Sequence[float], velocity: Sequence[float], effort: Sequence[float]
    ) -> str | None:
        """Why this feedback sample must stop the motion (names the joint), or None."""
        index = {name: k for k, name in enumerate(names)}
        m = self.margins
        for joint, envelope in self.envelopes.items():
            k = index.get(joint)
            if k is None:
                return f"joint {joint}: missing from feedback"
            values = [v[k] if k < len(v) else None for v in (position, velocity, effort)]
            if any(v is not None and math.isnan(v) for v in values) or values[0] is None:
                return f"joint {joint}: feedback is not a number"
            reason = check_sample(
                envelope,
                *values,
                travel_margin_rad=m.travel_margin_rad,
                speed_margin_frac=m.speed_margin_frac,
                torque_margin_frac=m.torque_margin_frac,
            )
            if reason:
                return f"joint {joint}: {reason}"
        return None


def envelopes_from_parameters(joints: Sequence[str], values: Mapping[str, object]) -> dict[str, Envelope]:
    """Envelopes from flat parameters `envelope.<joint>.origin_rad|travel_rad|max_speed_rad_s|max_torque_nm|...`."""
    out = {}
    for joint in joints:
        fields_ = {k.split(".")[-1]: v for k, v in values.items() if k.startswith(f"envelope.{joint}.")}
        if "max_accel_rad_s2" in fields_ and not fields_["max_accel_rad_s2"]:
            fields_["max_accel_rad_s2"] = None  # 0 in a parameter file means "no limit"
        needed = ("origin_rad", "travel_rad", "max_speed_rad_s", "max_torque_nm")
        missing = [f for f in needed if f not in fields_]
        unknown = sorted(set(fields_) - set(needed) - {"max_accel_rad_s2"})
        if missing or unknown:
            raise ConfigError(f"envelope of joint {joint}: missing {missing}, unknown {unknown}", joint=joint)
        out[joint] = Envelope(**fields_)
    return out
