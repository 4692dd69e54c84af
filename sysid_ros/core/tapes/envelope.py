"""A joint's safety envelope, and the checks that keep designed tapes and live motion inside it.

`check_tape` proves a designed tape stays inside (before anything moves); `check_sample` is the per-sample
guard a recorder applies to live feedback and aborts on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from ..errors import ConfigError, EnvelopeError
from .tape import Tape, probe_times, sample

# With no acceleration limit, smooth tapes are designed to reach top speed in 0.15 s along a smoothstep
# (peak acceleration 1.5 v / 0.15 s = 10 v per second); an operator who knows better sets max_accel_rad_s2.
DEFAULT_RISE_S = 0.15


@dataclass(frozen=True)
class Envelope:
    """Where one joint may go: |q - origin_rad| <= travel_rad, speed, torque and optional acceleration limits."""

    origin_rad: float
    travel_rad: float
    max_speed_rad_s: float
    max_torque_nm: float
    max_accel_rad_s2: float | None = None

    def __post_init__(self) -> None:
        for name in ("origin_rad", "travel_rad", "max_speed_rad_s", "max_torque_nm", "max_accel_rad_s2"):
            value = getattr(self, name)
            if value is None and name == "max_accel_rad_s2":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
                raise ConfigError(f"envelope {name} must be a number, got {value!r}", parameter=name)
            value = float(value)
            if not math.isfinite(value):
                raise ConfigError(f"envelope {name} must be finite, got {value}", parameter=name)
            if name != "origin_rad" and value <= 0.0:
                raise ConfigError(f"envelope {name} must be positive, got {value}", parameter=name)
            object.__setattr__(self, name, value)

    @property
    def lower_rad(self) -> float:
        return self.origin_rad - self.travel_rad

    @property
    def upper_rad(self) -> float:
        return self.origin_rad + self.travel_rad

    @property
    def design_accel_rad_s2(self) -> float:
        """The acceleration smooth tapes are designed for: the limit if set, else top speed in DEFAULT_RISE_S."""
        if self.max_accel_rad_s2 is not None:
            return self.max_accel_rad_s2
        return 1.5 * self.max_speed_rad_s / DEFAULT_RISE_S

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object], joint: str | None = None) -> Envelope:
        """An envelope from a plain mapping (a YAML block); unknown or missing keys raise ConfigError."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"an envelope must be a mapping, got {type(data).__name__}", joint=joint)
        known = ("origin_rad", "travel_rad", "max_speed_rad_s", "max_torque_nm", "max_accel_rad_s2")
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(f"unknown envelope keys {unknown}; expected {list(known)}", joint=joint)
        missing = [k for k in known[:4] if k not in data]
        if missing:
            raise ConfigError(f"envelope is missing {missing}", joint=joint)
        try:
            return cls(**{k: data[k] for k in known if k in data})  # type: ignore[arg-type]
        except ConfigError as exc:
            raise ConfigError(str(exc), joint=joint) from exc


def _exceeds(values: np.ndarray, limit: float) -> np.ndarray:
    """Where |values| is above `limit`, with a rounding allowance of one part in 1e9."""
    return np.abs(values) > limit * (1.0 + 1e-9) + 1e-12


def _raise_first(
    tape: Tape, joint: str, limit: str, unit: str, values: np.ndarray, t_s: np.ndarray, bound: float
) -> None:
    over = np.flatnonzero(_exceeds(values, bound))
    if len(over) == 0:
        return
    first, peak = over[0], int(np.argmax(np.abs(values)))
    raise EnvelopeError(
        f"tape leaves the {limit} limit: {abs(values[first]):.6g} {unit} > {bound:.6g} {unit} first at "
        f"t={t_s[first]:.4f} s (peak {abs(values[peak]):.6g} {unit} at t={t_s[peak]:.4f} s)",
        tape=tape.name,
        joint=joint,
        limit=limit,
        value=float(abs(values[first])),
        time_s=float(t_s[first]),
    )


def check_tape(tape: Tape, envelopes: Mapping[str, Envelope], *, step_s: float = 1e-3) -> None:
    """Raise EnvelopeError unless `tape` stays inside every joint's envelope.

    The tape is sampled every `step_s` and inside every knot segment (`tapes.probe_times`), so sharp
    steps and short ramps are seen at their peaks however short they are.

    Position tapes are checked for travel, speed and (when the envelope limits it) acceleration; effort
    tapes for torque (where an effort tape takes the joint depends on the plant, so its travel is
    guarded live by `check_sample`). Either must start and end at rest.
    """
    if not (math.isfinite(step_s) and step_s > 0.0):
        raise ConfigError(f"step_s must be positive and finite, got {step_s}")
    t_s = probe_times(tape, step_s)
    got = sample(tape, t_s)
    for j, joint in enumerate(tape.joints):
        envelope = envelopes.get(joint)
        if envelope is None:
            raise EnvelopeError("no envelope for a joint the tape moves", tape=tape.name, joint=joint)
        if tape.interface == "effort":
            checks = [("torque", "N m", got.effort[:, j], envelope.max_torque_nm)]
            rest = [("torque", got.effort[:, j], envelope.max_torque_nm)]
        else:
            checks = [
                ("travel", "rad", got.position[:, j] - envelope.origin_rad, envelope.travel_rad),
                ("speed", "rad/s", got.velocity[:, j], envelope.max_speed_rad_s),
            ]
            if envelope.max_accel_rad_s2 is not None:
                checks.append(("acceleration", "rad/s^2", got.acceleration[:, j], envelope.max_accel_rad_s2))
            rest = [
                ("speed", got.velocity[:, j], envelope.max_speed_rad_s),
                ("acceleration", got.acceleration[:, j], envelope.design_accel_rad_s2),
            ]
        for limit, unit, values, bound in checks:
            bad = np.flatnonzero(~np.isfinite(values))
            if len(bad):
                raise EnvelopeError(
                    f"tape {limit} is not finite", tape=tape.name, joint=joint, limit=limit, time_s=float(t_s[bad[0]])
                )
            _raise_first(tape, joint, limit, unit, values, t_s, bound)
        for what, values, scale in rest:
            for index in (0, -1):
                if abs(values[index]) > 1e-9 * scale:
                    raise EnvelopeError(
                        f"tape does not start and end at rest: {what} {values[index]:.3g}",
                        tape=tape.name,
                        joint=joint,
                        limit="rest",
                        value=float(values[index]),
                        time_s=float(t_s[index]),
                    )


def check_sample(
    envelope: Envelope,
    position_rad: float | None = None,
    velocity_rad_s: float | None = None,
    effort_nm: float | None = None,
    *,
    travel_margin_rad: float = 0.0,
    speed_margin_frac: float = 0.0,
    torque_margin_frac: float = 0.0,
) -> str | None:
    """Why one live feedback sample is outside the envelope (plus margins), or None if it is inside.

    None or NaN means not measured and is not judged; an infinite value is outside. Margins widen the
    limits to absorb measurement noise: travel by `travel_margin_rad`, speed and torque by a fraction.
    """
    for name, margin in (
        ("travel_margin_rad", travel_margin_rad),
        ("speed_margin_frac", speed_margin_frac),
        ("torque_margin_frac", torque_margin_frac),
    ):
        if not (math.isfinite(margin) and margin >= 0.0):
            raise ConfigError(f"{name} must be finite and >= 0, got {margin}", parameter=name)
    if position_rad is not None and not math.isnan(position_rad):
        offset = position_rad - envelope.origin_rad
        allowed = envelope.travel_rad + travel_margin_rad
        if not abs(offset) <= allowed:
            return (
                f"position {position_rad:.6g} rad is {abs(offset):.6g} rad from origin "
                f"{envelope.origin_rad:.6g} rad, beyond travel {envelope.travel_rad:.6g} + margin "
                f"{travel_margin_rad:.6g} rad"
            )
    if velocity_rad_s is not None and not math.isnan(velocity_rad_s):
        allowed = envelope.max_speed_rad_s * (1.0 + speed_margin_frac)
        if not abs(velocity_rad_s) <= allowed:
            return f"speed {abs(velocity_rad_s):.6g} rad/s beyond {allowed:.6g} rad/s"
    if effort_nm is not None and not math.isnan(effort_nm):
        allowed = envelope.max_torque_nm * (1.0 + torque_margin_frac)
        if not abs(effort_nm) <= allowed:
            return f"torque {abs(effort_nm):.6g} N m beyond {allowed:.6g} N m"
    return None
