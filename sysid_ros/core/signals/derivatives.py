"""Joint velocity and acceleration from sampled positions: local polynomial fits, never raw differences.

Differencing a noisy angle twice multiplies its noise by about sqrt(6)/h^2 (0.5 mrad at 2 ms becomes
~300 rad/s^2), and least squares then shrinks every inertial parameter toward zero. A Savitzky-Golay
filter fits a polynomial to each window and differentiates the fit. Samples within half a window of
either end, or of a missing (NaN) position, are marked invalid and set to NaN rather than extrapolated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from scipy.signal import savgol_coeffs, savgol_filter

from ..errors import DataError
from .arrays import JointSamples

SAVGOL = "savgol"
FINITE_DIFFERENCES = "finite_differences"


@dataclass(frozen=True, eq=False)
class Derivatives:
    """Filtered position, velocity and acceleration on the sample grid; `valid` marks usable samples.

    Arrays are (N,) or (N, J) like the input. `qd_noise_gain` and `qdd_noise_gain` are the standard
    deviations of the velocity and acceleration produced by unit white position noise;
    `position_noise_rad` is the white noise estimated in the raw positions (NaN if too short to tell);
    `position_raw` keeps those positions, for filtering both sides of a fit (`hold_differences`).
    """

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    valid: np.ndarray
    dt_s: float
    method: str
    window_samples: int
    polyorder: int
    qd_noise_gain: float
    qdd_noise_gain: float
    position_noise_rad: float | np.ndarray = float("nan")
    position_raw: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.q)

    @property
    def filter_window_s(self) -> float:
        return self.window_samples * self.dt_s

    def column(self, j: int) -> Derivatives:
        """One joint's (N,) derivatives out of an (N, J) set."""
        if self.q.ndim != 2:
            raise DataError("these derivatives are one joint's already")
        noise = self.position_noise_rad
        raw = None if self.position_raw is None else self.position_raw[:, j]
        return replace(
            self,
            q=self.q[:, j],
            qd=self.qd[:, j],
            qdd=self.qdd[:, j],
            valid=self.valid[:, j],
            position_noise_rad=float(noise[j]) if np.ndim(noise) else noise,
            position_raw=raw,
        )


def window_samples(filter_window_s: float, dt_s: float, polyorder: int) -> int:
    """The odd number of samples closest to `filter_window_s`, at least polyorder + 2."""
    if not (np.isfinite(dt_s) and dt_s > 0):
        raise DataError("sample period must be positive and finite", dt_s=dt_s)
    n = max(int(round(filter_window_s / dt_s)), polyorder + 2)
    return n + (n % 2 == 0)


def _checked_positions(q: np.ndarray) -> np.ndarray:
    array = np.asarray(q, dtype=np.float64)
    if array.ndim not in (1, 2) or array.shape[0] == 0:
        raise DataError(f"positions must be a non-empty (N,) or (N, J) array, got shape {array.shape}")
    return array


def _mask_edges(arrays: list[np.ndarray], half: int, finite_input: np.ndarray) -> np.ndarray:
    """Valid = away from both ends and from any NaN input by `half` samples; invalid entries set to NaN."""
    n = arrays[0].shape[0]
    valid = np.zeros(arrays[0].shape, dtype=bool)
    if n > 2 * half:
        valid[half : n - half] = True
    for a in arrays:
        valid &= np.isfinite(a)
    bad_input = ~finite_input
    if bad_input.any():  # a NaN position spoils every output whose window holds it
        kernel = np.ones(2 * half + 1)
        spread = np.apply_along_axis(lambda c: np.convolve(c, kernel, mode="same"), 0, bad_input.astype(float))
        valid &= spread == 0
    for a in arrays:
        a[~valid] = np.nan
    return valid


def savgol_derivatives(q: np.ndarray, dt_s: float, filter_window_s: float = 0.1, polyorder: int = 3) -> Derivatives:
    """Savitzky-Golay position, velocity and acceleration (default: cubic fits over 0.1 s)."""
    positions = _checked_positions(q)
    n = window_samples(filter_window_s, dt_s, polyorder)
    if positions.shape[0] < n:
        raise DataError(
            f"{positions.shape[0]} samples are fewer than one derivative window ({n})", filter_window_s=filter_window_s
        )
    finite = np.isfinite(positions)
    filled = np.where(finite, positions, 0.0)
    out = [savgol_filter(filled, n, polyorder, deriv=d, delta=dt_s, axis=0, mode="nearest") for d in (0, 1, 2)]
    valid = _mask_edges(out, n // 2, finite)
    gains = [float(np.linalg.norm(savgol_coeffs(n, polyorder, deriv=d, delta=dt_s))) for d in (1, 2)]
    return Derivatives(
        out[0],
        out[1],
        out[2],
        valid,
        float(dt_s),
        SAVGOL,
        n,
        polyorder,
        gains[0],
        gains[1],
        _noise_or_nan(positions),
        positions.copy(),
    )


def quartic_derivatives(q: np.ndarray, dt_s: float, filter_window_s: float = 0.11) -> Derivatives:
    """Local quartic fit over `filter_window_s` (110 ms by default): a Savitzky-Golay filter of order 4."""
    return savgol_derivatives(q, dt_s, filter_window_s=filter_window_s, polyorder=4)


def finite_differences(q: np.ndarray, dt_s: float) -> Derivatives:
    """Central differences (np.gradient twice): for comparison only, they fail on noisy positions."""
    positions = _checked_positions(q)
    if positions.shape[0] < 5:
        raise DataError("finite differences need at least 5 samples", samples=positions.shape[0])
    finite = np.isfinite(positions)
    qd = np.gradient(positions, dt_s, axis=0)
    out = [positions.copy(), qd, np.gradient(qd, dt_s, axis=0)]
    valid = _mask_edges(out, 2, finite)
    # velocity (x[k+1] - x[k-1]) / 2h; acceleration (x[k+2] - 2 x[k] + x[k-2]) / 4h^2
    return Derivatives(
        out[0],
        out[1],
        out[2],
        valid,
        float(dt_s),
        FINITE_DIFFERENCES,
        5,
        2,
        float(np.sqrt(2) / (2 * dt_s)),
        float(np.sqrt(6) / (4 * dt_s**2)),
        _noise_or_nan(positions),
        positions.copy(),
    )


def _noise_or_nan(positions: np.ndarray) -> float | np.ndarray:
    try:
        return estimate_position_noise(positions)
    except DataError:
        return float("nan") if positions.ndim == 1 else np.full(positions.shape[1], np.nan)


def same_filter(derivatives: Derivatives, q: np.ndarray) -> Derivatives:
    """Differentiate `q` with the filter that produced `derivatives` (same method, window, order)."""
    if derivatives.method == FINITE_DIFFERENCES:
        return finite_differences(q, derivatives.dt_s)
    return savgol_derivatives(q, derivatives.dt_s, derivatives.filter_window_s, derivatives.polyorder)


def acceleration_kernel(derivatives: Derivatives) -> np.ndarray:
    """The filter's acceleration coefficients, in correlation order: qdd[k] = sum_j c[j] q[k - n//2 + j]."""
    if derivatives.method == FINITE_DIFFERENCES:
        return np.array([1.0, 0.0, -2.0, 0.0, 1.0]) / (4 * derivatives.dt_s**2)
    if derivatives.method != SAVGOL:
        raise DataError("no known acceleration kernel for these derivatives", method=derivatives.method)
    return _savgol_acceleration(derivatives.window_samples, derivatives.polyorder, derivatives.dt_s)


@lru_cache(maxsize=32)
def _savgol_acceleration(window_samples: int, polyorder: int, dt_s: float) -> np.ndarray:
    """Computed once per filter (friction searches smooth hundreds of columns with it); read-only."""
    c = savgol_coeffs(window_samples, polyorder, deriv=2, delta=dt_s, use="dot")
    c.flags.writeable = False
    return c


def hold_kernel(derivatives: Derivatives) -> np.ndarray:
    """The smoother g that the acceleration filter applies to the samples' second differences.

    An acceleration kernel c that ignores constants and ramps is the second difference of its double
    running sum G = h^2 cumsum(cumsum(c)), whose last two entries vanish; so c * q = g * a with
    a[k] = (q[k+1] - 2 q[k] + q[k-1]) / h^2 and g = G without them (odd length, centred, sum 1).
    """
    c = acceleration_kernel(derivatives)
    return (np.cumsum(np.cumsum(c)) * derivatives.dt_s**2)[:-2]


def smooth_like_acceleration(derivatives: Derivatives, x: np.ndarray) -> np.ndarray:
    """`x` (N,) or (N, P) through `hold_kernel`, centred; NaN where the window leaves the record or meets a NaN."""
    g = hold_kernel(derivatives)
    array = np.asarray(x, dtype=np.float64)
    out = np.full(array.shape, np.nan)
    if array.shape[0] >= len(g):  # centred: an even kernel has one more sample behind than ahead
        before = len(g) // 2
        out[before : before + array.shape[0] - len(g) + 1] = (
            np.lib.stride_tricks.sliding_window_view(array, len(g), axis=0) @ g
        )
    return out


def hold_differences(derivatives: Derivatives) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, v, a) of the raw positions: v[k] = (q[k+1] - q[k]) / h, a[k] = (q[k+1] - 2 q[k] + q[k-1]) / h^2.

    v is the mean velocity over the hold interval that follows sample k, the interval in which the k-th
    command acts (and the velocity that MuJoCo's Euler step damps); a, smoothed by `hold_kernel`, is
    exactly the filter's acceleration. NaN where a neighbour is missing.
    """
    if derivatives.position_raw is None:
        raise DataError(
            "these derivatives do not carry their raw positions (make them with savgol_derivatives, "
            "quartic_derivatives or finite_differences)"
        )
    q = np.asarray(derivatives.position_raw, dtype=np.float64)
    h = derivatives.dt_s
    v = np.full(q.shape, np.nan)
    a = np.full(q.shape, np.nan)
    v[:-1] = (q[1:] - q[:-1]) / h
    a[1:-1] = (q[2:] - 2 * q[1:-1] + q[:-2]) / h**2
    return q, v, a


def estimate_position_noise(q: np.ndarray, window_samples_: int = 9) -> float | np.ndarray:
    """Standard deviation of white position noise, from the residual of short cubic fits (robust MAD).

    The residual of a projection filter with centre weight c0 has variance sigma^2 (1 - c0); a window of
    a few samples leaves smooth motion in the fit, so what remains is noise (and quantization).
    """
    positions = _checked_positions(q)
    n = window_samples_ + (window_samples_ % 2 == 0)
    if positions.shape[0] < 4 * n:
        raise DataError("too few samples to estimate position noise", samples=positions.shape[0])
    smooth = savgol_filter(positions, n, 3, axis=0, mode="nearest")
    resid = (positions - smooth)[n:-n]
    c0 = savgol_coeffs(n, 3)[n // 2]
    mad = np.nanmedian(np.abs(resid - np.nanmedian(resid, axis=0)), axis=0)
    sigma = 1.4826 * mad / np.sqrt(1.0 - c0)
    return float(sigma) if np.ndim(sigma) == 0 else sigma


def uniform_dt_s(time_ns: np.ndarray, tolerance: float = 0.05) -> float:
    """The sample period of integer-nanosecond times, checked uniform to `tolerance` (relative)."""
    times = np.asarray(time_ns)
    if times.dtype.kind not in "iu" or times.size < 2:
        raise DataError("need at least two integer-nanosecond times", dtype=str(times.dtype))
    steps = np.diff(times.astype(np.int64))
    dt_ns = float(np.median(steps))
    if dt_ns <= 0:
        raise DataError("times do not increase", dt_ns=dt_ns)
    worst = int(np.argmax(np.abs(steps - dt_ns)))
    if abs(steps[worst] - dt_ns) > tolerance * dt_ns:
        raise DataError(
            f"samples are not uniform: step {steps[worst]} ns against {dt_ns:.0f} ns; resample first",
            time_s=round(float(times[worst] - times[0]) * 1e-9, 6),
        )
    return dt_ns * 1e-9


def samples_derivatives(
    samples: JointSamples, joints: Sequence[str] | None = None, filter_window_s: float = 0.2, polyorder: int = 4
) -> Derivatives:
    """Derivatives of measured positions in `JointSamples` (uniform times checked), columns in `joints` order."""
    chosen = samples.select(list(joints)) if joints is not None else samples
    if chosen.position is None:
        raise DataError("these samples carry no positions", source=samples.source or None)
    return savgol_derivatives(chosen.position, uniform_dt_s(chosen.time_ns), filter_window_s, polyorder)


MAX_VELOCITY_LAG_S = 0.02
"""The longest lag `velocity_lag` looks for (a drive's velocity filter; a logger's lag between two fields of one
message is not longer)."""


def velocity_lag(q: np.ndarray, velocity: np.ndarray, dt_s: float, filter_window_s: float = 0.05) -> float:
    """How many samples (fractional) a record's own velocity lags the derivative of its positions, over all joints
    (both through the same `filter_window_s` Savitzky-Golay smoother, the least squares over shifts up to
    `MAX_VELOCITY_LAG_S`, refined by a parabola through the best three): a drive's filtered velocity estimate lags
    (the real Panda's by 5 ms); 0 when the record is too short to tell."""
    positions = _checked_positions(q)
    v = np.asarray(velocity, dtype=np.float64).reshape(positions.shape)
    n = window_samples(filter_window_s, dt_s, 3)
    reach = int(np.ceil(MAX_VELOCITY_LAG_S / dt_s))
    if positions.shape[0] < n + 4 * reach + 10 or not np.isfinite(v).all() or not np.isfinite(positions).all():
        return 0.0
    qd = savgol_filter(positions, n, 3, deriv=1, delta=dt_s, axis=0)
    vs = savgol_filter(v, n, 3, axis=0)
    scale = np.maximum(np.std(qd, axis=0), 1e-12)
    inner = slice(n + reach, positions.shape[0] - n - reach)
    shifts = np.arange(-reach, reach + 1)
    cost = np.array([np.sum(((vs[inner.start + s : inner.stop + s] - qd[inner]) / scale) ** 2) for s in shifts])
    k = int(np.argmin(cost))
    if k in (0, len(shifts) - 1):
        return float(shifts[k])
    a, b, c = cost[k - 1], cost[k], cost[k + 1]
    curvature = a - 2.0 * b + c
    return float(shifts[k] + (0.5 * (a - c) / curvature if curvature > 0 else 0.0))


def advanced(values: np.ndarray, samples: float) -> np.ndarray:
    """`values` (N, ...) read `samples` (fractional) later: out[k] = values[k + samples], linear between samples,
    the last value held past the end (the first before the start, for a negative shift)."""
    x = np.asarray(values, dtype=np.float64)
    at = np.clip(np.arange(x.shape[0]) + samples, 0, x.shape[0] - 1)
    lo = np.floor(at).astype(int)
    hi = np.minimum(lo + 1, x.shape[0] - 1)
    w = (at - lo).reshape((-1,) + (1,) * (x.ndim - 1))
    return (1.0 - w) * x[lo] + w * x[hi]
