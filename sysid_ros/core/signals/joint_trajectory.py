"""Joint trajectories as ros2_control's joint trajectory controller interpolates them.

Between points: linear in position when the points carry no velocities, cubic Hermite when they do
(quintic is not needed here). Before the first point the trajectory starts from the state it was
received in; after the last point it holds the last position at rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DataError


@dataclass(frozen=True)
class Trajectory:
    """Waypoints `positions[k]` (and optional `velocities[k]`, `efforts[k]`) at `times_s[k]` after `start_ns`."""

    joint_names: tuple[str, ...]
    start_ns: int
    times_s: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None = None
    efforts: np.ndarray | None = None

    def __post_init__(self) -> None:
        times = np.asarray(self.times_s, dtype=np.float64)
        shape = (len(times), len(self.joint_names))
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        object.__setattr__(self, "times_s", times)
        for name in ("positions", "velocities", "efforts"):
            value = getattr(self, name)
            if value is None:
                continue
            array = np.asarray(value, dtype=np.float64)
            if array.shape != shape:
                raise DataError(f"trajectory {name} have shape {array.shape}, expected {shape}")
            if not np.all(np.isfinite(array)):
                raise DataError(f"trajectory {name} are not all finite")
            object.__setattr__(self, name, array)
        if len(times) == 0:
            raise DataError("trajectory has no points")
        if not np.all(np.isfinite(times)) or times[0] < 0 or np.any(np.diff(times) <= 0):
            raise DataError("trajectory times must be finite, >= 0 and strictly increasing")

    @property
    def end_ns(self) -> int:
        return self.start_ns + int(round(self.times_s[-1] * 1e9))

    def sample(
        self, time_ns: int, start_position: np.ndarray, start_velocity: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Reference (position, velocity, effort) at `time_ns`, starting from the given state at `start_ns`."""
        t = (time_ns - self.start_ns) * 1e-9
        zeros = np.zeros(len(self.joint_names))
        times = self.times_s
        if t >= times[-1]:
            last_eff = self.efforts[-1] if self.efforts is not None else zeros
            return self.positions[-1].copy(), zeros, last_eff.copy()
        k = int(np.searchsorted(times, t, side="right"))  # segment k-1 .. k
        if k == 0:
            t0, t1 = 0.0, times[0]
            p0, p1 = start_position, self.positions[0]
            v0 = start_velocity if self.velocities is not None else None
            v1 = self.velocities[0] if self.velocities is not None else None
            e0 = e1 = self.efforts[0] if self.efforts is not None else zeros
        else:
            t0, t1 = times[k - 1], times[k]
            p0, p1 = self.positions[k - 1], self.positions[k]
            v0 = self.velocities[k - 1] if self.velocities is not None else None
            v1 = self.velocities[k] if self.velocities is not None else None
            e0 = self.efforts[k - 1] if self.efforts is not None else zeros
            e1 = self.efforts[k] if self.efforts is not None else zeros
        h = t1 - t0
        s = 0.0 if h <= 0 else (t - t0) / h
        effort = e0 + (e1 - e0) * s
        if v0 is None or h <= 0:
            velocity = (p1 - p0) / h if h > 0 else zeros
            return p0 + (p1 - p0) * s, velocity, effort
        h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
        d00, d10, d01, d11 = 6 * s**2 - 6 * s, 3 * s**2 - 4 * s + 1, -6 * s**2 + 6 * s, 3 * s**2 - 2 * s
        position = h00 * p0 + h10 * h * v0 + h01 * p1 + h11 * h * v1
        velocity = (d00 * p0 + d01 * p1) / h + d10 * v0 + d11 * v1
        return position, velocity, effort
