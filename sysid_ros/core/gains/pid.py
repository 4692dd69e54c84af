"""PID gains as ros2_control names them (`gains.<joint>.p|i|d|i_clamp|ff_velocity_scale`) and their guard."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from ..errors import GainsError

GAIN_FIELDS = ("p", "i", "d", "i_clamp", "ff_velocity_scale")


@dataclass(frozen=True)
class PidGains:
    """One joint's PID gains: effort = ff_velocity_scale * v_ref + p e + i integral(e) + d de."""

    p: float = 0.0
    i: float = 0.0
    d: float = 0.0
    i_clamp: float = 0.0
    ff_velocity_scale: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def replace(self, **changes: float) -> PidGains:
        return PidGains(**{**self.as_dict(), **changes})


def gain_refusal(name: str, value: object, upper: float = math.inf) -> str | None:
    """Why `value` cannot be gain `name`: a gain is a finite number in [0, upper]. None when it can."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return f"gain {name} must be a finite number, got {value!r}"
    if value < 0.0 or value > upper:
        return f"gain {name}={value} outside the guard [0, {upper}]"
    return None


@dataclass(frozen=True)
class GainGuard:
    """Largest value each gain may take; every gain must also be finite and >= 0."""

    p_max: float = 1e5
    i_max: float = 1e5
    d_max: float = 1e4
    i_clamp_max: float = 1e3
    ff_velocity_scale_max: float = 1e3

    def reason_to_refuse(self, name: str, value: float) -> str | None:
        """Why `value` may not be set as gain `name` (p, i, d, ...), or None when it may."""
        if name not in GAIN_FIELDS:
            return f"unknown gain {name!r}; expected one of {', '.join(GAIN_FIELDS)}"
        return gain_refusal(name, value, getattr(self, f"{name}_max"))

    def check(self, gains: PidGains, joint: str = "") -> None:
        """Raise GainsError naming the joint and gain when any gain is outside the guard."""
        for f in fields(gains):
            reason = self.reason_to_refuse(f.name, getattr(gains, f.name))
            if reason:
                raise GainsError(reason, joint=joint or None)

    def parameter_refusal(self, name: str, value: object) -> str | None:
        """Why `value` cannot be controller parameter `name` (`gains.<joint>.<gain>`), or None when it can."""
        split = split_parameter_name(name)
        if split is None:
            return f"{name} is not a gain parameter (gains.<joint>.<gain>)"
        return gain_refusal(name, value, getattr(self, f"{split[1]}_max"))

    def check_parameters(self, parameters: Mapping[str, object], **where: object) -> None:
        """Raise GainsError for the first of `parameters` (our `gains.<joint>.<gain>` names) the guard refuses:
        what a proposal or a controllers file may hold is what the tuner itself may send."""
        for name, value in parameters.items():
            reason = self.parameter_refusal(str(name), value)
            if reason:
                raise GainsError(reason, **where)


def clamp_for_tuning(i_clamp: float, cap_nm: float) -> float:
    """An integral clamp as the tuner models it: an infinite one (control_toolbox >= 5's default, no clamp)
    is taken at the joint's torque cap, beyond which the drive's output saturates anyway."""
    return i_clamp if math.isfinite(i_clamp) else cap_nm


def parameter_name(joint: str, gain: str) -> str:
    """The controller parameter that holds `gain` of `joint`, as ros2_control names it."""
    return f"gains.{joint}.{gain}"


def split_parameter_name(name: str) -> tuple[str, str] | None:
    """(joint, gain) for a `gains.<joint>.<gain>` parameter name, else None."""
    if not name.startswith("gains."):
        return None
    joint, _, gain = name[len("gains.") :].rpartition(".")
    return (joint, gain) if joint and gain in GAIN_FIELDS else None
