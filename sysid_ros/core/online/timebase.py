"""Samples on a uniform time grid: a controller's log (rows 8-14 ms apart) resampled before the filter.

The window's Savitzky-Golay filter assumes equal steps. Taken at the median step, a 100 Hz log with steps of
8-14 ms misplaces each position by up to 4 ms of motion (4 mrad at 1 rad/s), which the second derivative
turns into accelerations off by metres per second squared: on a UR10e-like log the payload mass scattered
0.3-0.5 kg between windows where the same rows on a uniform grid scatter 5 g. Positions are interpolated
by a cubic spline (its error is far below encoder noise at 100 Hz), the effort linearly (it goes through
the smoothing filter next), onto multiples of the median step counted from time zero, so successive windows
share their grid times (and an arm's cached regressor rows).
"""

from __future__ import annotations

import numpy as np
from scipy.interpolate import CubicSpline

UNIFORM_TOLERANCE = 0.05  # a step within this share of the median is uniform enough: no resampling
REPEAT_FRACTION = 0.25  # a sample closer than this share of the median step to the previous one is a repeat


def on_uniform_grid(
    time_ns: np.ndarray, q: np.ndarray, tau: np.ndarray, tolerance: float = UNIFORM_TOLERANCE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(times, positions, efforts) on a uniform grid: the samples as given when their steps are uniform to
    `tolerance`, else resampled (see the module docstring); repeats (a step under `REPEAT_FRACTION` of the
    median) and rows with a non-finite value are dropped first. Times must increase; q and tau are (N,) or (N, J)."""
    t = np.asarray(time_ns, dtype=np.int64)
    steps = np.diff(t)
    if len(steps) < 3:
        return t, q, tau
    period = float(np.median(steps))
    if np.max(np.abs(steps - period)) <= tolerance * period:
        return t, q, tau
    q, tau = np.asarray(q, dtype=float), np.asarray(tau, dtype=float)
    finite = np.isfinite(q.reshape(len(t), -1)).all(axis=1) & np.isfinite(tau.reshape(len(t), -1)).all(axis=1)
    keep = np.r_[True, steps >= REPEAT_FRACTION * period] & finite
    if keep.sum() < 4:
        return time_ns, q, tau
    t, q, tau = t[keep], q[keep], tau[keep]
    step_ns = max(1, int(round(period / 1000.0))) * 1000  # a whole number of microseconds: stable across windows
    first = -(-int(t[0]) // step_ns) * step_ns
    grid = np.arange(first, int(t[-1]) + 1, step_ns, dtype=np.int64)
    rel = (t - t[0]) * 1e-9
    at = (grid - t[0]) * 1e-9
    q_grid = CubicSpline(rel, q, axis=0)(at)
    tau2 = tau.reshape(len(t), -1)
    tau_grid = np.column_stack([np.interp(at, rel, tau2[:, j]) for j in range(tau2.shape[1])])
    return grid, q_grid, tau_grid.reshape((len(grid),) + np.shape(tau)[1:])
