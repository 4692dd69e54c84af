"""Real loggers' time bases: repeated rows, jittered stamps, a recoverable device clock, or a stated resampling.

A logger that polls a robot faster than the robot publishes writes rows that repeat the previous state
exactly, and stamps each row when it polled (jitter), not when the robot measured. When every new state
advances a whole number of a base period (the device clock, e.g. 1 ms), the ticks are recovered and the
samples placed on them; missed ticks are filled (positions by a cubic spline, velocities linearly, effort
held). When no such clock is in the data, the samples are resampled onto a uniform grid (the same
interpolation) and the interpolation error is stated. A log on a steady clock that missed ticks (every step a
whole number of periods) keeps its rows, repeats included, and gets the missed ticks filled. Either way every
window cut from the result has the same number of samples, which `mujoco.sysid` needs (it stacks the windows'
residuals). Integer nanoseconds throughout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.interpolate import CubicSpline

from ..signals import JointSamples, grid_points

UNIFORM_TOLERANCE = 0.01
"""Steps within this fraction of the median step count as already uniform (nothing is done)."""
CLOCK_RESIDUAL_LIMIT = 0.4
"""A device clock is accepted when every stamp lies within this fraction of the period of its tick."""


@dataclass(frozen=True)
class TimeBaseFix:
    """What was done to one sample set's time base: `kind` is `uniform`, `device_clock` or `resampled`."""

    kind: str
    repeated_rows: int
    period_ns: int
    filled: int = 0
    jitter_ns: int = 0
    step_range_ns: tuple[int, int] = (0, 0)
    interpolation_error: float = 0.0

    def describe(self, where: str) -> str:
        """One line for `inspect` and the identification result."""
        lo, hi = (s * 1e-6 for s in self.step_range_ns)
        head = f"{where}: " + (
            f"{self.repeated_rows} rows repeated the previous state exactly (dropped); " if self.repeated_rows else ""
        )
        if self.kind == "device_clock":
            return (
                head + f"stamp steps {lo:.2f}-{hi:.2f} ms; device clock recovered: every new state advances "
                f"a whole number of {self.period_ns * 1e-6:.4g} ms ticks (stamps within "
                f"{self.jitter_ns * 1e-6:.3f} ms of their tick); samples placed on it, {self.filled} missed "
                "ticks filled (positions cubic, velocities linear; effort held)"
            )
        if self.kind == "resampled":
            return (
                head + f"stamp steps {lo:.2f}-{hi:.2f} ms and no device clock in the data: resampled onto a "
                f"uniform {self.period_ns * 1e-6:.4g} ms grid (positions by a cubic spline, velocities linearly, "
                "effort held); "
                f"interpolation error (leave-one-out RMS, includes noise) {self.interpolation_error:.2g} rad"
            )
        return head + f"steps of whole {self.period_ns * 1e-6:.4g} ms periods"


def repeated_rows(samples: JointSamples) -> np.ndarray:
    """Rows (after the first) whose every field equals the previous row's exactly."""
    same = np.ones(max(len(samples) - 1, 0), dtype=bool)
    for name in ("position", "velocity", "effort"):
        values = getattr(samples, name)
        if values is not None:
            same &= np.all(values[1:] == values[:-1], axis=1)
    return np.r_[False, same]


def _device_ticks(time_ns: np.ndarray, period_ns: int | None) -> tuple[np.ndarray, int, int] | None:
    """(tick index of each stamp, period, largest distance from its tick) when the stamps sit on a clock."""
    rel = (time_ns - time_ns[0]).astype(np.float64)
    if period_ns:
        p = float(period_ns)
    else:  # single-tick steps: the difference of two jitters is symmetric, so their median is the period
        steps = np.diff(rel)
        p = float(np.median(steps))
        p = float(np.median(steps[(steps > 0.5 * p) & (steps < 1.5 * p)]))
    a, span = 0.0, 64
    while True:  # refine on growing spans, so that a small period error never slips a whole tick
        span = min(span, len(rel))
        k = np.round((rel[:span] - a) / p)
        if len(np.unique(k)) < 3:
            return None
        p, a = np.polyfit(k, rel[:span], 1)
        if span == len(rel):
            break
        span *= 4
    if period_ns is None:
        nice = round(p / 1000.0) * 1000.0  # a device period is a whole number of microseconds
        p = nice if nice > 0 and abs(nice - p) < 1e-4 * p else p
    ticks = np.round((rel - a) / p).astype(np.int64)
    worst = float(np.max(np.abs(rel - a - ticks * p)))
    if worst > CLOCK_RESIDUAL_LIMIT * p or np.any(np.diff(ticks) < 1):
        return None
    return ticks - ticks[0], int(round(p)), int(round(worst))


def _on_grid(samples: JointSamples, time_ns: np.ndarray, grid_ns: np.ndarray) -> JointSamples:
    """Positions by a cubic spline onto `grid_ns` (a line through a missed tick puts a kink, i.e. an acceleration
    spike, into every derivative), velocities linearly, effort held (the last one in force)."""
    rel = (time_ns - time_ns[0]).astype(np.float64)
    at = (grid_ns - time_ns[0]).astype(np.float64)

    def lin(v: np.ndarray | None) -> np.ndarray | None:
        return None if v is None else np.column_stack([np.interp(at, rel, v[:, j]) for j in range(v.shape[1])])

    position = None
    if samples.position is not None:
        position = CubicSpline(rel, samples.position, axis=0)(at) if len(rel) > 3 else lin(samples.position)
    held = None
    if samples.effort is not None:
        held = samples.effort[np.clip(np.searchsorted(time_ns, grid_ns, side="right") - 1, 0, len(time_ns) - 1)]
    return JointSamples(samples.joint_names, grid_ns, position, lin(samples.velocity), held, samples.source)


def _loo_error(time_ns: np.ndarray, values: np.ndarray | None) -> float:
    """RMS of each interior sample minus the line through its neighbours (an upper bound incl. noise)."""
    if values is None or len(time_ns) < 3:
        return 0.0
    t = time_ns.astype(np.float64)
    w = ((t[1:-1] - t[:-2]) / (t[2:] - t[:-2]))[:, None]
    guess = values[:-2] * (1 - w) + values[2:] * w
    return float(np.sqrt(np.mean((values[1:-1] - guess) ** 2)))


def regularize(samples: JointSamples, period_ns: int | None = None) -> tuple[JointSamples, TimeBaseFix]:
    """Drop repeated rows and put the samples on a uniform time base (see the module doc).

    `period_ns` is the device period when known (otherwise estimated from the stamps).
    """
    if len(samples) < 3:
        return samples, TimeBaseFix("uniform", 0, 0)
    steps = np.diff(samples.time_ns)
    if np.any(steps <= 0):  # not ours to fix: `sysid_data.check_samples` refuses it with the time
        return samples, TimeBaseFix("uniform", 0, 0)
    median = int(np.median(steps))
    ratio = steps / max(median, 1)
    step_range = (int(steps.min()), int(steps.max()))
    if period_ns is None and np.all((np.abs(ratio - np.round(ratio)) <= UNIFORM_TOLERANCE) & (ratio > 0.5)):
        ticks = np.r_[0, np.cumsum(np.round(ratio).astype(np.int64))]
        if ticks[-1] == len(ticks) - 1:
            return samples, TimeBaseFix("uniform", 0, median, step_range_ns=step_range)
        # a steady clock that missed ticks: every state keeps its stamp and the missed ticks are filled in
        # equal steps (whatever takes derivatives reads one row as one period)
        whole = np.diff(ticks)
        grid_points(int(ticks[-1]) * median, median, "the record's steady clock", topic=samples.source or None)
        step = np.repeat(np.arange(len(whole)), whole)
        k = np.arange(int(ticks[-1])) - np.repeat(ticks[:-1], whole)
        t = samples.time_ns
        grid = np.r_[t[step] + (t[step + 1] - t[step]) * k // whole[step], t[-1]]
        off = int(np.max(np.abs(steps - whole * median)))
        return _on_grid(samples, t, grid), TimeBaseFix("device_clock", 0, median, len(grid) - len(t), off, step_range)
    repeated = repeated_rows(samples)  # only in an irregular log: a still robot repeats rows on a steady clock
    keep = np.flatnonzero(~repeated)
    s = (
        samples
        if not repeated.any()
        else JointSamples(
            samples.joint_names,
            samples.time_ns[keep],
            *(
                None if getattr(samples, f) is None else getattr(samples, f)[keep]
                for f in ("position", "velocity", "effort")
            ),
            samples.source,
        )
    )
    n_rep = int(repeated.sum())
    if len(s) < 3:
        return s, TimeBaseFix("uniform", n_rep, median, step_range_ns=step_range)
    median = int(np.median(np.diff(s.time_ns)))
    found = _device_ticks(s.time_ns, period_ns)
    if found is not None:
        ticks, p, worst = found
        grid_points(int(ticks[-1]) * p, p, "the record's device clock", topic=s.source or None)
        t0 = int(s.time_ns[0])
        placed = t0 + ticks * np.int64(p)
        grid = t0 + np.arange(int(ticks[-1]) + 1, dtype=np.int64) * np.int64(p)
        out = _on_grid(s, placed, grid)
        return out, TimeBaseFix("device_clock", n_rep, p, len(grid) - len(ticks), worst, step_range)
    p = period_ns or int(round(median / 1000.0)) * 1000 or median
    grid_points(int(s.time_ns[-1] - s.time_ns[0]), p, "resampling the record", topic=s.source or None)
    grid = s.time_ns[0] + np.arange((s.time_ns[-1] - s.time_ns[0]) // p + 1, dtype=np.int64) * np.int64(p)
    err = _loo_error(s.time_ns, s.position)
    return _on_grid(s, s.time_ns, grid), TimeBaseFix("resampled", n_rep, p, 0, 0, step_range, err)
