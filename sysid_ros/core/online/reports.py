"""What the online estimator reports: the current estimate, its events, and each window's fit."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Estimate:
    """The current estimate: per parameter its value (provisional before the first confident window, NaN
    before any window), the confidence of the latest window, the confidence weight accumulated behind the
    value, and `std`, the standard error of the latest window that entered it (a blend of many windows is
    known better: this is the conservative end).

    For ROS, `as_key_values()` fills a diagnostic_msgs/DiagnosticStatus (one per joint, in a
    DiagnosticArray); `as_array()` fills a std_msgs/Float64MultiArray laid out as [values..., confidence...,
    weight...] (dim[0] label "field" size 3, dim[1] label "parameter" size P, parameter order = `names`).
    """

    time_ns: int
    joint: str
    names: tuple[str, ...]
    values: tuple[float, ...]
    confidence: tuple[float, ...]
    weight: tuple[float, ...]
    excitation_requested: bool = False
    std: tuple[float, ...] = ()  # per parameter: the standard error of the latest window that entered the value

    def value(self, name: str) -> float:
        return self.values[self.names.index(name)]

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.names, self.values))

    def as_key_values(self) -> list[tuple[str, str]]:
        out = [
            ("joint", self.joint),
            ("time_ns", str(self.time_ns)),
            ("excitation_requested", str(self.excitation_requested).lower()),
        ]
        std = self.std or (float("nan"),) * len(self.names)
        for n, v, c, w, s in zip(self.names, self.values, self.confidence, self.weight, std):
            out += [
                (f"{n}.value", repr(v)),
                (f"{n}.confidence", f"{c:.4f}"),
                (f"{n}.weight", f"{w:.4f}"),
                (f"{n}.std", repr(s)),
            ]
        return out

    def as_array(self) -> np.ndarray:
        return np.concatenate([self.values, self.confidence, self.weight]).astype(np.float64)


@dataclass(frozen=True)
class ChangeDetected:
    """Confident windows far from the estimate, confirmed: a change. The named parameters were
    replaced by the window's values; for one window length every confident window replaces (settling),
    then a `ParameterChange` reports each parameter that ended up different."""

    time_ns: int
    joint: str
    parameters: tuple[str, ...]
    previous: tuple[float, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class ParameterChange:
    """After settling: this parameter's estimate moved from `previous` (before the change) to `value`;
    `weight` is the confidence accumulated behind the new value."""

    time_ns: int
    joint: str
    parameter: str
    previous: float
    value: float
    weight: float


@dataclass(frozen=True)
class ExcitationRequest:
    """These parameters have had low confidence for `low_for_s`: the motion should excite them."""

    time_ns: int
    joint: str
    parameters: tuple[str, ...]
    low_for_s: float


@dataclass(frozen=True)
class ExcitationRecovered:
    """Every parameter an `ExcitationRequest` named is confident again: the task may resume."""

    time_ns: int
    joint: str


@dataclass(frozen=True)
class InputPaused:
    """The input guard (guard.py) found stale or implausible input (`kind`: stale_effort, position_jump,
    dead_input; `reason` says which joint and how): nothing is fitted across it, estimates are held and not
    published until `InputResumed`."""

    time_ns: int
    joint: str
    kind: str
    reason: str


@dataclass(frozen=True)
class InputResumed:
    """A full window of good input followed the last fault: estimation goes on (paused `paused_s`)."""

    time_ns: int
    joint: str
    paused_s: float


Event = ChangeDetected | ParameterChange | ExcitationRequest | ExcitationRecovered | InputPaused | InputResumed


def event_record(event: Event) -> dict:
    """An event as plain data (`type`, then its fields; tuples as lists): what the node publishes on
    `~/events` (as YAML) and `sysid-ros online` prints and writes."""
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(event).items()}
    return {"type": type(event).__name__, **fields}


ACCEPTED, REPLACED, DISCARDED, PENDING, SETTLING = "accepted", "replaced", "discarded", "pending", "settling"


@dataclass(frozen=True)
class WindowFit:
    """One window's fit: values, standard errors, confidence, rows used, and what was done with each."""

    time_ns: int
    values: np.ndarray
    std: np.ndarray
    confidence: np.ndarray
    rows_used: int
    decisions: tuple[str, ...]
    note: str = ""
    residual_scale: np.ndarray | None = None  # per joint: long-run std of the fit's residual (N m)
