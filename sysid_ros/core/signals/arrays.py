"""The arrays that flow between stages: joint feedback and commands on an integer-nanosecond time base.

Times are int64 nanoseconds (never float seconds: epoch stamps as floats lose ~0.2 us and let held
commands slip by a step). Columns follow `joint_names`; a value not measured is NaN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import DataError


def _as_times(time_ns: np.ndarray) -> np.ndarray:
    times = np.asarray(time_ns)
    if times.dtype.kind not in "iu":
        raise DataError("times must be integer nanoseconds", dtype=str(times.dtype))
    return times.astype(np.int64, copy=False)


@dataclass(frozen=True, eq=False)
class JointSamples:
    """Joint feedback (position, velocity, effort) sampled at `time_ns`; any field may be absent (None)."""

    joint_names: tuple[str, ...]
    time_ns: np.ndarray
    position: np.ndarray | None = None
    velocity: np.ndarray | None = None
    effort: np.ndarray | None = None
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        object.__setattr__(self, "time_ns", _as_times(self.time_ns))
        shape = (len(self.time_ns), len(self.joint_names))
        for name in ("position", "velocity", "effort"):
            value = getattr(self, name)
            if value is None:
                continue
            array = np.asarray(value, dtype=np.float64)
            if array.shape != shape:
                raise DataError(f"{name} has shape {array.shape}, expected {shape}", source=self.source or None)
            object.__setattr__(self, name, array)

    def __len__(self) -> int:
        return len(self.time_ns)

    @property
    def time_s(self) -> np.ndarray:
        """Seconds since the first sample (float, for plotting and fitting; subtracted in integers)."""
        return (self.time_ns - self.time_ns[0]).astype(np.float64) * 1e-9 if len(self) else np.zeros(0)

    def column(self, field_name: str, joint: str) -> np.ndarray:
        """One joint's column of `position`, `velocity` or `effort`."""
        array = getattr(self, field_name)
        if array is None:
            raise DataError(f"no {field_name} in these samples", joint=joint, source=self.source or None)
        if joint not in self.joint_names:
            raise DataError("joint not in these samples", joint=joint, source=self.source or None)
        return array[:, self.joint_names.index(joint)]

    def select(self, joints: list[str] | tuple[str, ...]) -> JointSamples:
        """The same samples with columns for `joints`, in that order."""
        missing = [j for j in joints if j not in self.joint_names]
        if missing:
            raise DataError(f"joints not in these samples: {missing}", source=self.source or None)
        idx = [self.joint_names.index(j) for j in joints]

        def pick(a):
            return None if a is None else a[:, idx]

        return JointSamples(
            tuple(joints), self.time_ns, pick(self.position), pick(self.velocity), pick(self.effort), self.source
        )

    def slice(self, start: int, stop: int) -> JointSamples:
        """Rows start:stop."""

        def cut(a):
            return None if a is None else a[start:stop]

        return JointSamples(
            self.joint_names,
            self.time_ns[start:stop],
            cut(self.position),
            cut(self.velocity),
            cut(self.effort),
            self.source,
        )


@dataclass(frozen=True, eq=False)
class JointCommands:
    """Commands sent to the joints: `values[k]` holds from `time_ns[k]` until the next command.

    `interface` is `effort`, `position` or `velocity`; a trajectory is expanded to setpoints first.
    """

    joint_names: tuple[str, ...]
    time_ns: np.ndarray
    values: np.ndarray
    interface: str
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        object.__setattr__(self, "time_ns", _as_times(self.time_ns))
        values = np.asarray(self.values, dtype=np.float64)
        if values.shape != (len(self.time_ns), len(self.joint_names)):
            raise DataError(
                f"values have shape {values.shape}, expected {(len(self.time_ns), len(self.joint_names))}",
                source=self.source or None,
            )
        if self.interface not in ("effort", "position", "velocity"):
            raise DataError(f"unknown command interface {self.interface!r}", source=self.source or None)
        object.__setattr__(self, "values", values)

    def __len__(self) -> int:
        return len(self.time_ns)

    def held_at(self, time_ns: np.ndarray) -> np.ndarray:
        """The command in force at each of `time_ns` (sample-and-hold, compared in integers); NaN before the first."""
        times = _as_times(time_ns)
        idx = np.searchsorted(self.time_ns, times, side="right") - 1
        out = np.full((len(times), len(self.joint_names)), np.nan)
        ok = idx >= 0
        out[ok] = self.values[idx[ok]]
        return out
