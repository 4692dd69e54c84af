"""Periodic records (an `optimal` tape played `periods` times): averaged over periods, differentiated exactly.

Averaging the periods sample by sample divides white noise by sqrt(periods), and the spread between periods
measures that noise (positions and torques) without any model. The averaged period is then differentiated in the
frequency domain: its discrete Fourier transform kept up to `keep_hz` (by default KEEP_FACTOR times the tape's top
harmonic: the tracked motion's own harmonics pass, the noise above them does not) and multiplied by i w and -w^2.

This is a documented choice that replaces, for periodic records, the Savitzky-Golay derivative filter
(`signals.derivatives.savgol_derivatives`, a 0.05 s cubic in the whole-arm torque check) and the smoothing of the
torque with that filter's acceleration kernel (`smooth_like_acceleration`): no lag and no attenuation inside the
band, no samples lost at the edges (the period is circular), and the torque is averaged but not filtered, so its
noise stays white and the regression's intervals see it as the plan predicts (`tapes.plan`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from ..signals import Derivatives, uniform_dt_s

PERIODIC = "periodic"
KEEP_FACTOR = 5.0
DEFAULT_KEEP_HZ = 10.0
"""The band kept when the record does not say its top harmonic (a problem file's `periodic` without `keep_hz`)."""
SETTLE_S = 1.0
"""The first period's seconds left out of the average by default (see `periodic_record`), at most half a period."""
MIN_CORRELATION = 0.99
"""Consecutive periods' positions (about their mean) must correlate at least this much for a stated period to fit
the data (on the simulated iiwa's optimal tape, its first second left out: 0.9999993 at its 5 s period, 0.92 at
4.9 s, -0.02 at 4 s)."""
SEARCH = 0.05
"""Lags within this fraction of the stated period are tried; the best must be the stated one within a sample (a
smooth motion correlates well with itself shifted a little: 0.9992 at 10 ms off a 5 s period, where the lag search
finds 5 s from anywhere in 4.75-5.25 s)."""


@dataclass(frozen=True)
class Periods:
    """Where a periodic record's whole periods lie: the first starts at `start_ns` (the record's clock), then
    `periods` of `period_s`; `keep_hz` the band of the derivatives, `settle_s` the first period's seconds left out
    of the average, `source` where the numbers come from (the recorded tape, the problem file)."""

    start_ns: int
    period_s: float
    periods: int
    keep_hz: float
    settle_s: float
    source: str
    correlation: float = float("nan")  # the least correlation of consecutive periods' positions, once checked

    @property
    def end_ns(self) -> int:
        return self.start_ns + round(self.periods * self.period_s * 1e9)

    def document(self) -> dict[str, object]:
        return {
            "source": self.source,
            "start_ns": int(self.start_ns),
            "period_s": float(self.period_s),
            "periods": int(self.periods),
            "keep_hz": float(self.keep_hz),
            "settle_s": float(self.settle_s),
            "least_correlation_between_periods": round(float(self.correlation), 6),
        }


def default_settle_s(period_s: float, periods: int) -> float:
    """SETTLE_S, at most half a period; 0 with a single period (nothing else to average it with)."""
    return 0.0 if periods < 2 else min(SETTLE_S, 0.5 * period_s)


def _window(times: np.ndarray, start_ns: int, period_s: float, periods: int) -> tuple[int, int, float]:
    """(first sample, samples per period, sample period): the periods on whole samples of a uniform record."""
    dt = uniform_dt_s(times)
    m = round(period_s / dt)
    if m < 8 or abs(m * dt - period_s) > 1e-6 * period_s:
        raise DataError(f"a period of {period_s} s is not a whole number of {dt * 1e3:.6g} ms samples")
    first = int(np.argmin(np.abs(times - int(start_ns))))
    if abs(int(times[first]) - int(start_ns)) > 0.5 * dt * 1e9 + 1 or first + periods * m > len(times):
        held = max(0, (len(times) - first) // m) if abs(int(times[first]) - int(start_ns)) <= dt * 1e9 else 0
        raise DataError(
            f"the record holds {held} whole period(s) of {period_s:g} s from t={int(start_ns)} ns; {periods} stated"
        )
    return first, m, dt


@dataclass(frozen=True)
class PeriodCheck:
    """A stated period against the data: the least correlation of consecutive periods' positions at it, and the
    period (a whole number of samples within SEARCH of the stated one) at which consecutive periods differ least."""

    correlation: float
    best_period_s: float
    sample_s: float
    stated_s: float

    @property
    def fits(self) -> bool:
        return self.correlation >= MIN_CORRELATION and abs(self.best_period_s - self.stated_s) <= 1.5 * self.sample_s


def check_period(time_ns: np.ndarray, q: np.ndarray, periods: Periods) -> PeriodCheck:
    """Whether the data repeat with the stated period: consecutive periods' positions (all joints, about their mean,
    the first `settle_s` of each left out) compared at every lag within SEARCH of the period; with one period
    there is nothing to compare (correlation 1, the stated period). DataError when the record does not hold the
    periods on whole samples."""
    first, m, dt = _window(np.asarray(time_ns, dtype=np.int64), periods.start_ns, periods.period_s, periods.periods)
    if periods.periods < 2:
        return PeriodCheck(1.0, periods.period_s, dt, periods.period_s)
    q = np.asarray(q, dtype=float)[first : first + periods.periods * m]
    q = q - q.mean(axis=0)
    k_max = max(1, int(SEARCH * m))
    lo = min(round(periods.settle_s / dt), m // 2)
    n = m - k_max - lo  # compared samples per pair: every lag within the search stays inside the periods
    if n < 8:
        raise DataError(f"a period of {periods.period_s} s is too short to check ({m} samples)")
    pairs = range(periods.periods - 1)

    def stretch(shift: int) -> np.ndarray:
        return np.concatenate([q[k * m + lo + shift : k * m + lo + shift + n] for k in pairs])

    a = stretch(0)
    lags = np.arange(m - k_max, m + k_max + 1)
    msd = np.array([np.mean((stretch(lag) - a) ** 2) for lag in lags])
    correlation = 1.0
    for k in pairs:
        x, y = q[k * m + lo : (k + 1) * m].ravel(), q[(k + 1) * m + lo : (k + 2) * m].ravel()
        denom = math.sqrt(float(x @ x) * float(y @ y))
        correlation = min(correlation, float(x @ y) / denom if denom > 0 else 0.0)
    return PeriodCheck(correlation, float(lags[int(np.argmin(msd))] * dt), dt, periods.period_s)


@dataclass(frozen=True, eq=False)
class PeriodicRecord:
    """One averaged period: `deriv` (q, qd, qdd, all valid) and `torque` (M, J); the noise per raw sample
    measured from the spread between periods (NaN with one period)."""

    deriv: Derivatives
    torque: np.ndarray
    periods: int
    period_s: float
    keep_hz: float
    position_noise_rad: np.ndarray
    torque_noise_nm: np.ndarray


def _spread(segments: np.ndarray) -> np.ndarray:
    """Per column, the standard deviation of one period's samples about the periods' mean (NaN for one period)."""
    if len(segments) < 2:
        return np.full(segments.shape[-1], np.nan)
    return np.sqrt(
        np.sum((segments - segments.mean(axis=0)) ** 2, axis=(0, 1)) / ((len(segments) - 1) * segments.shape[1])
    )


def periodic_record(
    time_ns: np.ndarray,
    q: np.ndarray,
    tau: np.ndarray,
    start_ns: int,
    period_s: float,
    periods: int,
    keep_hz: float,
    settle_s: float = 0.0,
) -> PeriodicRecord:
    """Average `periods` periods of `period_s` from the sample nearest `start_ns`; derivatives up to `keep_hz`.

    `time_ns` (N,) uniform; `q`, `tau` (N, J). A period must be a whole number of samples (within 1e-6).
    `settle_s`: the first period's first settle_s seconds are left out of the average (the drives' transient from
    holding the start pose to the periodic motion: a P drive that sags under gravity at rest takes ~1 s), so the
    average is periodic across its wrap-around; those samples average the other periods only.
    """
    times = np.asarray(time_ns, dtype=np.int64)
    q, tau = np.asarray(q, dtype=float), np.asarray(tau, dtype=float)
    if q.ndim != 2 or q.shape != tau.shape or len(q) != len(times):
        raise DataError(f"need (N, J) positions and torques on N times; got {q.shape}, {tau.shape}, {times.shape}")
    if isinstance(periods, bool) or not isinstance(periods, (int, np.integer)) or periods < 1:
        raise DataError(f"periods must be a whole number >= 1, got {periods!r}")
    if not (math.isfinite(period_s) and period_s > 0 and math.isfinite(keep_hz) and keep_hz > 0):
        raise DataError(f"period_s and keep_hz must be positive, got {period_s}, {keep_hz}")
    if not (math.isfinite(settle_s) and 0 <= settle_s < period_s) or (settle_s > 0 and periods < 2):
        raise DataError(f"settle_s must be in [0, period_s) and needs two periods or more, got {settle_s}")
    first, m, dt = _window(times, start_ns, period_s, periods)
    window = slice(first, first + periods * m)
    q_seg, tau_seg = (a[window].reshape(periods, m, -1) for a in (q, tau))
    if not (np.isfinite(q_seg).all() and np.isfinite(tau_seg).all()):
        raise DataError("the periods hold non-finite positions or torques")
    use = np.ones((periods, m, 1))
    use[0, : round(settle_s / dt)] = 0.0
    q_avg, tau_avg = (np.sum(seg * use, axis=0) / np.sum(use, axis=0) for seg in (q_seg, tau_seg))
    k = np.arange(m // 2 + 1)
    keep = (k / period_s <= keep_hz) & (2 * k != m)  # the Nyquist bin has no derivative of its own
    omega = 2 * math.pi * k / period_s
    spectrum = np.fft.rfft(q_avg, axis=0) * keep[:, None]
    qf = np.fft.irfft(spectrum, n=m, axis=0)
    qd = np.fft.irfft(1j * omega[:, None] * spectrum, n=m, axis=0)
    qdd = np.fft.irfft(-(omega[:, None] ** 2) * spectrum, n=m, axis=0)
    kept = keep & (k > 0)
    deriv = Derivatives(
        qf,
        qd,
        qdd,
        np.ones(qf.shape, dtype=bool),
        dt,
        PERIODIC,
        1,
        0,
        float(np.sqrt(2.0 / m * np.sum(omega[kept] ** 2))),
        float(np.sqrt(2.0 / m * np.sum(omega[kept] ** 4))),
    )
    later = slice(round(settle_s / dt), None)  # the spread where every period counts
    return PeriodicRecord(
        deriv,
        tau_avg,
        int(periods),
        float(period_s),
        float(keep_hz),
        _spread(q_seg[:, later]),
        _spread(tau_seg[:, later]),
    )
