"""A node's parameters from one table (as ros2_controllers' generate_parameter_library declares them): each with
its descriptor (range, read-only, the choices in its description) and one check, run at set time and at configure.

- `read_only`: a start-up value only (a node's interfaces are built from it: `joints`).
- Otherwise a parameter is read at configure and refused while the node is configured (inactive or active):
  the node would report the new value while it still enforces the old one. Clean up, set, configure again.
  `live` ones are read when they are used (the tape to play, the proposal to apply) and may change any time.
- Numbers carry a range (rclpy refuses out-of-range and NaN values at set time); a parameter for which NaN means
  "not set" (an envelope limit) cannot carry a range descriptor, and the same bounds are checked here.
- A start-up value rclpy refuses at declaration (out of range, wrong type) would crash the node: it is declared
  with its default instead and the refusal kept, so `check()` (at configure) fails and says why until a good value
  is set; a set-parameters callback never sees start-up values, so `check()` looks at every one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter


@dataclass(frozen=True)
class Spec:
    """One parameter: name, default (a `Parameter.Type` for an array without one), what it means, its limits."""

    name: str
    default: Any
    description: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    read_only: bool = False
    live: bool = False

    @property
    def unset_is_nan(self) -> bool:
        """A bounded parameter whose default NaN means "not set" (an envelope limit): no range descriptor."""
        return self.low is not None and isinstance(self.default, float) and math.isnan(self.default)

    def descriptor(self) -> ParameterDescriptor:
        text = self.description + (f" (one of: {', '.join(self.choices)})" if self.choices else "")
        descriptor = ParameterDescriptor(description=text, read_only=self.read_only)
        if self.low is not None and not self.unset_is_nan:
            if isinstance(self.default, bool):
                pass
            elif isinstance(self.default, int):
                descriptor.integer_range = [IntegerRange(from_value=int(self.low), to_value=int(self.high), step=0)]
            elif isinstance(self.default, float):
                descriptor.floating_point_range = [
                    FloatingPointRange(from_value=float(self.low), to_value=float(self.high), step=0.0)
                ]
        if self.choices:
            descriptor.additional_constraints = f"one of: {', '.join(self.choices)}"
        return descriptor

    def refusal(self, value: Any) -> str:
        """Why `value` cannot be this parameter's, or ''."""
        if self.choices and value not in self.choices:
            return f"{self.name} must be one of {', '.join(self.choices)}, not {value!r}"
        if self.low is None or isinstance(value, (bool, str, list, tuple)) or value is None:
            return ""
        if not (isinstance(value, (int, float)) and math.isfinite(value) and self.low <= value <= self.high):
            return f"{self.name} must be in [{self.low:g}, {self.high:g}], not {value}"
        return ""


class ParameterTable:
    """Declares a node's `Spec`s and refuses, at set time and at configure, what the node cannot apply.

    `configured()` says whether the node has read its configure-time parameters (a lifecycle node: inactive or
    active); while it has, those are refused. `renamed` (old -> new name): a start-up value under an old name is
    refused with the new one (rclpy would silently ignore it: it is not declared).
    """

    def __init__(
        self,
        node: Node,
        specs: Iterable[Spec],
        configured: Callable[[], bool] = lambda: False,
        renamed: Mapping[str, str] | None = None,
    ) -> None:
        self.node, self.configured = node, configured
        self.specs: dict[str, Spec] = {}
        self.startup_refusals: dict[str, str] = {  # until a good value is set
            old: f"start-up value refused: {old} is renamed {new}"
            for old, new in (renamed or {}).items()
            if old in node._parameter_overrides
        }
        self.add(specs)
        node.add_on_set_parameters_callback(self._on_set)

    def add(self, specs: Iterable[Spec]) -> None:
        """Declare `specs` not yet declared (rows that depend on others: each joint's envelope)."""
        for spec in specs:
            if not self.node.has_parameter(spec.name):
                self._declare(spec)
                self.specs[spec.name] = spec

    def _declare(self, spec: Spec) -> None:
        descriptor = spec.descriptor()
        unset_array = isinstance(spec.default, Parameter.Type)
        if unset_array:  # settable until it holds a value: an array no file set becomes an empty one
            descriptor.read_only = False
        try:
            value = self.node.declare_parameter(spec.name, spec.default, descriptor).value
        except (InvalidParameterValueException, InvalidParameterTypeException):
            given = self.node._parameter_overrides[spec.name].value  # what rclpy refused to declare
            why = spec.refusal(given) or f"{spec.name} must be a {type(spec.default).__name__}, not {given!r}"
            self.startup_refusals[spec.name] = f"start-up value refused: {why}"
            value = self.node.declare_parameter(spec.name, spec.default, descriptor, ignore_override=True).value
        if unset_array:
            if value is None:
                self.node.set_parameters([Parameter(spec.name, spec.default, [])])
            descriptor = spec.descriptor()
            descriptor.type = spec.default.value
            self.node.set_descriptor(spec.name, descriptor)
        elif not spec.unset_is_nan or not (isinstance(value, float) and math.isnan(value)):
            why = spec.refusal(value)
            if why:
                self.startup_refusals[spec.name] = f"start-up value refused: {why}"

    def value(self, name: str) -> Any:
        return self.node.get_parameter(name).value

    def check(self) -> None:
        """At configure: ValueError naming every start-up value refused and every value that cannot apply."""
        problems = list(self.startup_refusals.values())
        for spec in self.specs.values():
            value = self.value(spec.name)
            if not (spec.unset_is_nan and isinstance(value, float) and math.isnan(value)):
                problems.append(spec.refusal(value))
        problems = [p for p in problems if p]
        if problems:
            raise ValueError("; ".join(problems))

    def _on_set(self, params: list[Parameter]) -> SetParametersResult:
        for param in params:
            spec = self.specs.get(param.name)
            if spec is None:
                continue
            why = ""
            if not spec.live and not spec.read_only and self.configured():
                why = (
                    f"{param.name} is read at configure and the node is configured: deactivate and clean it up, "
                    f"set it, configure again (refused so the value reported is the one in force)"
                )
            elif spec.unset_is_nan and isinstance(param.value, float) and math.isnan(param.value):
                why = f"{param.name} cannot be unset (NaN) once given"
            why = why or spec.refusal(param.value)
            if why:
                return SetParametersResult(successful=False, reason=why)
        for param in params:  # every value good: a refused start-up value is replaced (if another callback agrees)
            self.startup_refusals.pop(param.name, None)
        return SetParametersResult(successful=True)


def lifecycle_configured(node: Any) -> Callable[[], bool]:
    """`configured()` for a lifecycle node: it is inactive or active (configure has read its parameters)."""
    return lambda: node._state_machine.current_state[1] in ("inactive", "active")


ENVELOPE_LIMITS = {
    "origin_rad": (-10.0, 10.0),
    "travel_rad": (1e-6, 2 * math.pi),
    "max_speed_rad_s": (1e-6, 100.0),
    "max_torque_nm": (1e-6, 1e4),
    "max_accel_rad_s2": (0.0, 1e5),
}


def envelope_specs(joints: Iterable[str]) -> list[Spec]:
    """`envelope.<joint>.*` of each joint: NaN until set (configure refuses unset limits), bounded once set."""
    return [
        Spec(
            f"envelope.{joint}.{field}",
            0.0 if field == "max_accel_rad_s2" else math.nan,
            f"{joint}'s envelope" + (" (0: no limit)" if field == "max_accel_rad_s2" else ""),
            low,
            high,
        )
        for joint in joints
        for field, (low, high) in ENVELOPE_LIMITS.items()
    ]
