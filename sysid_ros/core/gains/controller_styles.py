"""How ros2_control controllers name their PID parameters, and which naming a controller uses.

Inside sysid_ros a joint's gains are always `gains.<joint>.p|i|d|i_clamp|ff_velocity_scale` (our names);
a style translates them to a controller's own. The styles, as the upstream parameter definitions declare
them (ros-controls/ros2_controllers, `generate_parameter_library` YAML, per joint under `gains.<joint>.`):

- `jtc`: Jazzy joint_trajectory_controller before control_toolbox 5 (jazzy 08384a2c4,
  joint_trajectory_controller/src/joint_trajectory_controller_parameters.yaml): p i d i_clamp ff_velocity_scale.
- `pid_controller`: Jazzy pid_controller (jazzy b0128fed7, pid_controller/src/pid_controller.yaml): p i d
  antiwindup (bool) i_clamp_max i_clamp_min feedforward_gain angle_wraparound save_i_term.
- `jtc_toolbox5`: the JTC with control_toolbox >= 5 PID names (master 94e74de35): p i d ff_velocity_scale
  u_clamp_max u_clamp_min i_clamp_max i_clamp_min antiwindup_strategy tracking_time_constant error_deadband.
- `pid_controller_toolbox5`: pid_controller with control_toolbox >= 5 (master 94e74de35): p i d u_clamp_max
  u_clamp_min i_clamp_max i_clamp_min antiwindup_strategy tracking_time_constant error_deadband
  feedforward_gain angle_wraparound save_i_term activate_state_publisher.

Our symmetric `i_clamp` is the pair `i_clamp_max = +c`, `i_clamp_min = -c` where the controller has a pair.
The anti-windup switch (`antiwindup` or `antiwindup_strategy`) is left as found unless a change needs
integral action (i > 0) while it is off; then it is switched on in the same atomic change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import GainsError
from .pid import parameter_name

PAIR = ("i_clamp_max", "-i_clamp_min")  # "-": the controller holds the negated value


@dataclass(frozen=True)
class IntegralSwitch:
    """A controller's anti-windup switch: its parameter, the values meaning off, and the value we switch it to."""

    name: str
    off: tuple[Any, ...]
    on: Any
    allowed: tuple[Any, ...]


@dataclass(frozen=True)
class ControllerStyle:
    """One naming: the per-joint parameters a controller of this kind declares and how ours map to them."""

    name: str
    declares: tuple[str, ...]  # per joint, under gains.<joint>.
    renames: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # our gain -> theirs ("-x": negated)
    switch: IntegralSwitch | None = None

    def theirs(self, gain: str) -> tuple[str, ...]:
        return self.renames.get(gain, (gain,))


ANTIWINDUP = IntegralSwitch("antiwindup", (False,), True, (False, True))
STRATEGY = IntegralSwitch(
    "antiwindup_strategy", ("none",), "conditional_integration", ("none", "conditional_integration", "back_calculation")
)
TOOLBOX5 = (
    "p",
    "i",
    "d",
    "u_clamp_max",
    "u_clamp_min",
    "i_clamp_max",
    "i_clamp_min",
    "antiwindup_strategy",
    "tracking_time_constant",
    "error_deadband",
)

STYLES: dict[str, ControllerStyle] = {
    s.name: s
    for s in (
        ControllerStyle("jtc", ("p", "i", "d", "i_clamp", "ff_velocity_scale")),
        ControllerStyle(
            "pid_controller",
            ("p", "i", "d", "antiwindup", "i_clamp_max", "i_clamp_min", "feedforward_gain"),
            {"i_clamp": PAIR, "ff_velocity_scale": ("feedforward_gain",)},
            ANTIWINDUP,
        ),
        ControllerStyle("jtc_toolbox5", TOOLBOX5 + ("ff_velocity_scale",), {"i_clamp": PAIR}, STRATEGY),
        ControllerStyle(
            "pid_controller_toolbox5",
            TOOLBOX5 + ("feedforward_gain", "save_i_term"),
            {"i_clamp": PAIR, "ff_velocity_scale": ("feedforward_gain",)},
            STRATEGY,
        ),
    )
}
ALIASES = {"gains": "jtc"}  # the name sysid_ros used before it knew the other styles
SWITCHES = {s.name: s for s in (ANTIWINDUP, STRATEGY)}
# The parameter types the definitions give (everything else in `declares` is a double).
TYPES = {"antiwindup": "bool", "antiwindup_strategy": "string", "save_i_term": "bool"}


def get_style(name: str) -> ControllerStyle:
    style = STYLES.get(ALIASES.get(name, name))
    if style is None:
        raise GainsError(f"unknown controller parameter style {name!r}; expected auto or one of {sorted(STYLES)}")
    return style


def split_name(name: str) -> tuple[str, str] | None:
    """(joint, field) of any `gains.<joint>.<field>` parameter, else None."""
    if not name.startswith("gains."):
        return None
    joint, _, leaf = name[len("gains.") :].rpartition(".")
    return (joint, leaf) if joint and leaf else None


def detect_style(types: Mapping[str, str]) -> ControllerStyle:
    """The style whose per-joint parameters (with their types) every joint of the controller declares.

    `types`: the controller's parameter names and types ("double", "bool", "string", ...), as
    `list_parameters` + `describe_parameters` report them. When several styles fit (a transition release
    declares old and new names), the one with the most parameters wins; none fitting is refused, naming
    what was found.
    """
    joints: dict[str, dict[str, str]] = {}
    for name, kind in types.items():
        split = split_name(name)
        if split:
            joints.setdefault(split[0], {})[split[1]] = kind
    if not joints:
        raise GainsError(f"the controller has no gains.<joint>.* parameters (found {_shown(sorted(types))})")
    fits = [
        s
        for s in STYLES.values()
        if all(all(declared.get(f) == TYPES.get(f, "double") for f in s.declares) for declared in joints.values())
    ]
    if not fits:
        found = {j: sorted(fs) for j, fs in joints.items()}
        raise GainsError(
            f"unknown controller layout: gains.<joint>.* declares {found}, which is none of the known "
            f"styles {sorted(STYLES)}; set controller_style if it is one of them"
        )
    return max(fits, key=lambda s: len(s.declares))


def _shown(names: list[str], most: int = 20) -> str:
    return ", ".join(names[:most]) + (f", ... ({len(names)} in all)" if len(names) > most else "") or "nothing"


def is_switch(name: str) -> bool:
    split = split_name(name)
    return split is not None and split[1] in SWITCHES


def switch_refusal(name: str, value: Any) -> str | None:
    """Why `value` may not be set as the anti-windup switch `name`, or None when it may."""
    allowed = SWITCHES[split_name(name)[1]].allowed
    return (
        None
        if any(value == a and type(value) is type(a) for a in allowed)
        else (f"{name} must be one of {list(allowed)}, got {value!r}")
    )


def to_controller(values: Mapping[str, Any], style: ControllerStyle) -> dict[str, Any]:
    """Our `gains.<joint>.<gain>` values as the controller's own parameters (signs applied)."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        joint, gain = split_name(name) or (None, None)
        for target in style.theirs(gain) if joint else (name,):
            sign = -1.0 if target.startswith("-") else 1.0
            out[parameter_name(joint, target.lstrip("-")) if joint else name] = sign * value if sign < 0 else value
    return out


def from_controller(names: list[str], read: Mapping[str, Any], style: ControllerStyle) -> dict[str, Any]:
    """Our values of `names` from the controller's parameters `read` (a pair must agree: min = -max)."""
    out = {}
    for name in names:
        mapped = to_controller({name: 1.0}, style)
        values = {k: (sign * read[k] if sign < 0 else read[k]) for k, sign in mapped.items()}
        if len(set(values.values())) > 1:
            raise GainsError(f"the controller's {sorted(values)} do not hold one value for {name}: {values}")
        out[name] = next(iter(values.values()))
    return out


def integral_switches(style: ControllerStyle, new: Mapping[str, Any]) -> list[str]:
    """Our names of the anti-windup switches of the joints that `new` gives integral action (i > 0)."""
    if style.switch is None:
        return []
    joints = sorted({split_name(n)[0] for n, v in new.items() if split_name(n) and split_name(n)[1] == "i" and v > 0})
    return [parameter_name(j, style.switch.name) for j in joints]


def switched_on(style: ControllerStyle, found: Mapping[str, Any], read_only: set[str] = frozenset()) -> dict[str, Any]:
    """The switches in `found` (our names -> values) that are off and may be set: each with its on-value."""
    if style.switch is None:
        return {}
    return {n: style.switch.on for n, v in found.items() if v in style.switch.off and n not in read_only}
