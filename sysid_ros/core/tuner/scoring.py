"""Scoring a play: ringing, crossings, chatter, saturation, tracking, stop p90; the gates and the cost.

Stops are stretches where the reference is still (the rest before the first move is left out: the joint
starts there). Ringing is the oscillation left in the second half of each stop: sqrt(2) x the standard
deviation of the linearly detrended error (an amplitude; white noise alone reads 1.4 sigma). Crossings
count sign changes of the error in one stop with a hysteresis above the noise. Chatter is the
sample-to-sample torque jitter in stop tails (std of the torque's first difference / sqrt 2, N m).
Saturation is the share of samples at 98 % of the torque cap or more. Tracking is the RMS error while
the reference moves; stop p90 the 90th percentile of |error| over stop samples (mrad).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from ..signals import estimate_position_noise
from .plants.joint import Telemetry

MIN_STOP_S = 0.2
SATURATION_FRACTION = 0.98


@dataclass(frozen=True)
class Score:
    """What a controller did on a set of tapes (pooled); errors in mrad, chatter in N m."""

    ringing_mrad: float
    crossings: int
    chatter_nm: float
    saturation: float
    tracking_rms_mrad: float
    stop_p90_mrad: float
    stops: int
    noise_mrad: float
    aborted: str | None
    finite: bool
    seconds: float

    def as_dict(self) -> dict[str, object]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class SweepLimits:
    """The limits set from the as-found run before the sweep."""

    ringing_mrad: float
    chatter_nm: float
    stop_allocation_mrad: float
    torque_limit_nm: float


def stops(tel: Telemetry, min_stop_s: float = MIN_STOP_S) -> list[tuple[int, int]]:
    """Index ranges [start, end) where the reference is still for at least `min_stop_s`, after the first move."""
    still = np.abs(tel.reference_velocity) <= 1e-9 * (1.0 + np.max(np.abs(tel.reference_velocity), initial=0.0))
    moving = np.flatnonzero(~still)
    if len(moving) == 0:
        return []
    out = []
    edges = np.flatnonzero(np.diff(np.concatenate([[0], still.astype(int), [0]])))
    for a, b in zip(edges[::2], edges[1::2]):
        if a > moving[0] and (b - a) / tel.command_rate_hz >= min_stop_s:
            out.append((int(a), int(b)))
    return out


def detrended_std(e: np.ndarray) -> float:
    if len(e) < 4:
        return 0.0
    x = np.arange(len(e), dtype=float)
    coef = np.polyfit(x, e, 1)
    return float(np.std(e - np.polyval(coef, x)))


def _crossings(e: np.ndarray, band: float) -> int:
    state = 0
    count = 0
    for value in e:
        s = 1 if value > band else (-1 if value < -band else 0)
        if s and state and s != state:
            count += 1
        if s:
            state = s
    return count


def noise_mrad(tels: Sequence[Telemetry]) -> float:
    """White position noise (mrad) from the measured positions, pooled over plays."""
    values = []
    for tel in tels:
        try:
            values.append(float(estimate_position_noise(tel.position)))
        except DataError:
            continue
    return 1e3 * float(np.median(values)) if values else 0.0


def score(tels: Sequence[Telemetry]) -> Score:
    """Score one controller over a set of plays (pooled)."""
    noise = noise_mrad(tels)
    band = max(4.0 * noise, 0.02) * 1e-3  # 4 sigma: white noise alone almost never crosses it
    ringing, crossings, n_stops = 0.0, 0, 0
    stop_err, move_err, jitter = [], [], []
    sat, total, seconds = 0, 0, 0.0
    finite, aborted = True, None
    for tel in tels:
        seconds += tel.seconds
        arrays = (tel.position, tel.torque)
        if len(tel.time_s) == 0 or not all(np.all(np.isfinite(a)) for a in arrays):
            finite = False
        if tel.aborted and aborted is None:
            aborted = f"{tel.tape}: {tel.aborted}"
        e = np.nan_to_num(tel.error, nan=np.inf)
        for a, b in stops(tel):
            n_stops += 1
            stop_err.append(np.abs(e[a:b]))
            tail = slice(a + (b - a) // 2, b)
            ringing = max(ringing, math.sqrt(2.0) * detrended_std(e[tail]))
            crossings = max(crossings, _crossings(e[a:b] - np.median(e[tail]), band))
            jitter.append(np.diff(tel.torque[tail]))
        moving = np.abs(tel.reference_velocity) > 0
        move_err.append(e[moving])
        sat += int(np.sum(np.abs(tel.torque) >= SATURATION_FRACTION * tel.torque_limit_nm))
        total += len(tel.torque)
    se = np.concatenate(stop_err) if stop_err else np.zeros(0)
    me = np.concatenate(move_err) if move_err else np.zeros(0)
    jt = np.concatenate(jitter) if jitter else np.zeros(0)
    return Score(
        ringing_mrad=1e3 * ringing,
        crossings=crossings,
        chatter_nm=float(np.std(jt) / math.sqrt(2.0)) if len(jt) > 2 else 0.0,
        saturation=sat / max(total, 1),
        tracking_rms_mrad=1e3 * float(np.sqrt(np.mean(me**2))) if len(me) else 0.0,
        stop_p90_mrad=1e3 * float(np.percentile(se, 90)) if len(se) else math.inf,
        stops=n_stops,
        noise_mrad=noise,
        aborted=aborted,
        finite=finite,
        seconds=seconds,
    )


def cost(candidate: Score, as_found: Score, allocation_mrad: float) -> float:
    """stop_p90 / max(as-found stop p90, 0.1 allocation, 0.05 mrad) + tracking / max(as-found tracking, 0.05)."""
    stop_ref = max(as_found.stop_p90_mrad, 0.1 * allocation_mrad, 0.05)
    track_ref = max(as_found.tracking_rms_mrad, 0.05)
    value = candidate.stop_p90_mrad / stop_ref + candidate.tracking_rms_mrad / track_ref
    return value if math.isfinite(value) else math.inf


def gate_failures(
    candidate: Score,
    as_found: Score,
    limits: SweepLimits,
    wn_rad_s: float | None = None,
    wn_max_rad_s: float | None = None,
) -> tuple[str, ...]:
    """Every gate a candidate fails against the as-found run (empty when it passes them all)."""
    out = []
    if candidate.aborted:
        out.append(f"aborted: {candidate.aborted}")
    if not candidate.finite:
        out.append("telemetry not finite")
    if candidate.stops < 1:
        out.append("no stop")
    if candidate.ringing_mrad > limits.ringing_mrad:
        out.append(f"ringing {candidate.ringing_mrad:.3g} > {limits.ringing_mrad:.3g} mrad")
    if candidate.chatter_nm > limits.chatter_nm:
        out.append(f"chatter {candidate.chatter_nm:.3g} > {limits.chatter_nm:.3g} N m")
    if candidate.saturation > max(0.02, 1.1 * as_found.saturation):
        out.append(f"saturation {candidate.saturation:.1%} > max(2 %, 1.1 x as found {as_found.saturation:.1%})")
    if candidate.tracking_rms_mrad > 1.1 * as_found.tracking_rms_mrad:
        out.append(f"tracking {candidate.tracking_rms_mrad:.3g} > 1.1 x as found {as_found.tracking_rms_mrad:.3g} mrad")
    if candidate.stop_p90_mrad > max(limits.stop_allocation_mrad, as_found.stop_p90_mrad):
        out.append(
            f"stop p90 {candidate.stop_p90_mrad:.3g} mrad over the allocation "
            f"{limits.stop_allocation_mrad:.3g} and as found {as_found.stop_p90_mrad:.3g}"
        )
    if wn_rad_s is not None and wn_max_rad_s is not None and wn_rad_s > wn_max_rad_s * (1 + 1e-9):
        out.append(f"wn {wn_rad_s:.4g} above the deploy ceiling {wn_max_rad_s:.4g} rad/s")
    return tuple(out)
