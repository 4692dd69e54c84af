"""Stage 1: identify tau = J qdd + b qd + tc tanh(qd/0.01) + gs sin q + gc cos q from the torque requested.

The motion is designed for that regressor (`tapes.joint_optimal`: a periodic Fourier series, 3 harmonics, inside
the joint's room): two periods at the as-found gains, one more at kd x0.6 and one at kd x1.6, all in the fit. If
the first play leaves J, b or tc imprecise (widest relative 95 % half-width over PRECISION) the stage plays the
generic tapes instead (plateaus, fast moves, chirp; the chirp at kd x0.6 and x1.6), as it did before the design.

Rows: moving (|qd| >= 0.02 rad/s over the whole 110 ms quartic window) and under 98 % of the torque cap.
Each reported torque is corrected to its command interval's mean (`torque_sample_phase`) and paired with
the state at mid-interval. A state/torque delay is bisected in [0, 20 ms] over plays that include the delay
tape (the designed period, or the chirp) at kd x0.6 and x1.6; where the logged torque is the torque applied, the
kd contrast a bisection on the torque requested uses (inertia J - kd d) carries no information, so the bisection
runs on the slope of the fit's residual (see `bisect_delay`) and reports both delay plays' inertias at the result.
A loop too fast for the command rate (wn dt > 0.5) is identified again at (0.5 / wn dt)^2 of its gains, up to
twice. Under 50 rows, or a condition number over 100 even without gravity, the fit is refused: the seed's gains are
tried, then priors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.signal import savgol_filter

from ...errors import DataError
from ...linear import (
    REVOLUTE_TERMS,
    BootstrapSettings,
    FitThresholds,
    JointModel,
    RowSelection,
    fit_joint_model,
    joint_columns,
    select_rows,
)
from ...signals import Derivatives, quartic_derivatives
from ...tapes import JointDesign, Tape, chirp, identification, joint_optimal
from ..plants.joint import Plant, Telemetry
from ..servo import Controller, DriveGains, Servo, loop_of

WINDOW_S = 0.11
SELECTION = RowSelection(moving_speed_rad_s=0.02, slow_speed_rad_s=0.0, torque_cap_fraction=0.98)
BOOTSTRAP = BootstrapSettings(blocks=20, resamples=60, seed=0)
LIMITS = FitThresholds(min_rows=50, max_condition=100.0)
DELAY_MAX_S = 0.02
KD_FACTORS = (0.6, 1.6)
# the designed tape: harmonics up to 3 (1 Hz on a 3 s period): more (to 2 Hz) biased the direct drive's fit
IDENT_DESIGN = JointDesign(periods=2, max_harmonics=3)
DELAY_PERIODS = 1  # the same motion, one period, at kd x0.6 and x1.6
PRECISION = 0.15  # widest relative 95 % half-width of J, b, tc on the designed play; over it, the generic tapes
NO_GRAVITY = ("inertia_kg_m2", "viscous_nm_s_rad", "coulomb_nm")


@dataclass(frozen=True)
class Identification:
    """The model Stage 1 settled on, its 95 % half-widths, the delay, and how it got there."""

    model: JointModel
    half_width_95: dict[str, float]
    delay_s: float
    source: str  # "fit", "fit at the seed's gains" or "priors"
    rows: int
    condition_number: float
    gains_used: DriveGains
    notes: tuple[str, ...]
    seconds: float

    def as_dict(self) -> dict[str, object]:
        terms = ("inertia_kg_m2", "viscous_nm_s_rad", "coulomb_nm", "gravity_sin_nm", "gravity_cos_nm")
        return {
            "model": {t: float(getattr(self.model, t)) for t in terms},
            "half_width_95": {k: float(v) for k, v in self.half_width_95.items()},
            "delay_s": self.delay_s,
            "source": self.source,
            "rows": self.rows,
            "condition_number": float(self.condition_number),
            "gains_used": {"kp": self.gains_used.kp, "kd": self.gains_used.kd},
            "notes": list(self.notes),
        }


def aligned(tel: Telemetry, torque_sample_phase: float, delay_s: float) -> tuple[Derivatives, np.ndarray]:
    """Quartic derivatives at mid-interval (+ `delay_s`) and the interval-mean torque of one play.

    A drive that advances its setpoint at the commanded velocity between commands drifts its torque inside
    each interval. From one sample to the next the torque changes by that drift plus the step the new
    command makes at its instant, kp (q_ref' - q_ref - v_ref dt) + kd (v_ref' - v_ref) + (ff' - ff),
    known from the commands and the gains; what is left is the drift, and a sample taken at
    `torque_sample_phase` of its interval's ramp is moved to the interval's mean by (0.5 - phase) of it.
    """
    rate = tel.command_rate_hz
    deriv = quartic_derivatives(tel.position, 1.0 / rate, WINDOW_S)
    tau = np.asarray(tel.torque, dtype=float)
    q_ref, v_ref = np.asarray(tel.reference, dtype=float), np.asarray(tel.reference_velocity, dtype=float)
    step = tel.kp * (np.diff(q_ref) - v_ref[:-1] / rate) + tel.kd * np.diff(v_ref) + np.diff(tel.feedforward)
    drift = np.append(np.diff(tau) - step, 0.0)
    tau_mean = tau + (0.5 - torque_sample_phase) * drift
    # the torque goes through the same quartic window as the position: the filter then commutes with the
    # linear terms, and loop dynamics above the window's pass band no longer inflate the inertia
    tau_mean = savgol_filter(tau_mean, deriv.window_samples, deriv.polyorder, mode="nearest")
    index = np.arange(len(tau), dtype=float)
    at = index + 0.5 + delay_s * rate
    shifted = [np.interp(at, index, a, left=np.nan, right=np.nan) for a in (deriv.q, deriv.qd, deriv.qdd)]
    valid = np.isfinite(shifted[0]) & np.isfinite(shifted[1]) & np.isfinite(shifted[2])
    return replace(deriv, q=shifted[0], qd=shifted[1], qdd=shifted[2], valid=valid), tau_mean


def stacked(tels: Sequence[Telemetry], phase: float, delay_s: float) -> tuple[Derivatives, np.ndarray]:
    """Aligned derivatives and torques of several plays, end to end (windows never straddle two plays)."""
    parts = [aligned(tel, phase, delay_s) for tel in tels]
    first = parts[0][0]
    cat = {name: np.concatenate([getattr(p[0], name) for p in parts]) for name in ("q", "qd", "qdd", "valid")}
    noise = [p[0].position_noise_rad for p in parts if np.isfinite(p[0].position_noise_rad)]
    merged = replace(first, **cat, position_noise_rad=float(np.median(noise)) if noise else float("nan"))
    return merged, np.concatenate([p[1] for p in parts])


def quick_fit(
    tels: Sequence[Telemetry], phase: float, delay_s: float, terms: Sequence[str], cap_nm: float
) -> tuple[np.ndarray, float]:
    """Plain least squares on the selected rows: (values in `terms` order, residual RMS); the bisection's probe."""
    deriv, tau = stacked(tels, phase, delay_s)
    rows = select_rows(deriv.qd, deriv.valid, deriv.window_samples, SELECTION, tau, cap_nm)
    if rows.sum() < LIMITS.min_rows:
        raise DataError("too few moving rows to bisect the delay")
    phi = joint_columns(deriv.q[rows], deriv.qd[rows], deriv.qdd[rows], terms)
    scale = np.linalg.norm(phi, axis=0)
    scale[scale == 0] = 1.0
    theta = np.linalg.lstsq(phi / scale, tau[rows], rcond=None)[0] / scale
    return theta, float(np.sqrt(np.mean((tau[rows] - phi @ theta) ** 2)))


def bisect_delay(
    tels: Sequence[Telemetry],
    slow: Telemetry,
    fast: Telemetry,
    phase: float,
    terms: Sequence[str],
    cap_nm: float,
    iterations: int = 6,
    probe_s: float = 2.5e-4,
) -> tuple[float, str]:
    """The state/torque delay in [0, 20 ms], bisected on the slope of the fit's residual over every play.

    A misaligned state leaves the unmodelled jerk term J d q''' in the residual (on a chirp it reads as a
    viscous error -J d w^2), so the residual is least at the true delay. The chirps at kd x0.6 and x1.6
    widen the motion the residual is taken over; the note reports their inertias at the delay found.
    """
    plays = list(tels) + [slow, fast]

    def slope(delay: float) -> float:
        above = quick_fit(plays, phase, delay + probe_s, terms, cap_nm)[1]
        below = quick_fit(plays, phase, max(delay - probe_s, 0.0), terms, cap_nm)[1]
        return above - below

    # a 1 ms scan finds the valley (the residual is not smooth enough to bisect its slope across 20 ms),
    # then the slope is bisected inside the valley's bracket
    grid = np.linspace(0.0, DELAY_MAX_S, int(round(DELAY_MAX_S / 1e-3)) + 1)
    residuals = [quick_fit(plays, phase, d, terms, cap_nm)[1] for d in grid]
    k = int(np.argmin(residuals))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if slope(mid) < 0.0:
            lo = mid
        else:
            hi = mid
    delay = 0.5 * (lo + hi)
    j = list(terms).index("inertia_kg_m2")
    j_soft = quick_fit([slow], phase, delay, terms, cap_nm)[0][j]
    j_hard = quick_fit([fast], phase, delay, terms, cap_nm)[0][j]
    note = (
        f"delay {1e3 * delay:.2f} ms: delay-tape inertia {j_soft:.4g} at kd x{KD_FACTORS[0]} and {j_hard:.4g} at "
        f"kd x{KD_FACTORS[1]}"
    )
    return delay, note


@dataclass(frozen=True)
class _Fit:
    model: JointModel
    half: dict[str, float]
    rows: int
    condition: float
    notes: tuple[str, ...]


def fit_model(tels: Sequence[Telemetry], phase: float, delay_s: float, cap_nm: float, joint: str) -> _Fit:
    """The least-squares fit with gravity, or without it if ill conditioned; DataError when refused."""
    deriv, tau = stacked(tels, phase, delay_s)
    notes: list[str] = []
    last = None
    for terms in (REVOLUTE_TERMS, NO_GRAVITY):
        jf = fit_joint_model(
            deriv,
            tau,
            terms=terms,
            selection=SELECTION,
            torque_cap_nm=cap_nm,
            bootstrap=BOOTSTRAP,
            limits=LIMITS,
            joint=joint,
        )
        last = jf
        if jf.fit.condition_number <= LIMITS.max_condition:
            if terms is NO_GRAVITY:
                notes.append("gravity dropped: the travel does not separate sin q and cos q from the rest")
            half = {n: float(h) for n, h in zip(jf.fit.names, jf.fit.half_width_95)}
            assert isinstance(jf.model, JointModel)
            return _Fit(jf.model, half, jf.fit.rows_used, jf.fit.condition_number, tuple(notes) + jf.fit.warnings)
    assert last is not None
    raise DataError(
        f"condition number {last.fit.condition_number:.3g} > {LIMITS.max_condition:g} even without gravity", joint=joint
    )


def _worst_precision(fit: _Fit) -> float:
    """The widest 95 % half-width relative to its value among inertia, viscous and Coulomb (inf if one is 0)."""
    out = 0.0
    for term in NO_GRAVITY:
        value = abs(float(getattr(fit.model, term)))
        out = max(out, fit.half.get(term, math.inf) / value if value > 0 else math.inf)
    return out


def _run(
    servo: Servo,
    plant: Plant,
    gains: DriveGains,
    tapes: tuple[Sequence[Tape], Tape],
    fallback: tuple[Sequence[Tape], Tape],
) -> tuple[_Fit, float, list[str]]:
    """Play the identification tapes, then the delay tape at kd x0.6 and x1.6, at `gains`; fit at the bisected delay.

    `tapes` are the designed ones: when their first play leaves J, b or tc imprecise (the widest relative 95 %
    half-width over PRECISION: a noisy encoder, a loop that rings through the design's harmonics) or unfitted,
    the stage plays `fallback` (the generic tapes) instead and fits those alone.
    """
    phase, cap = plant.torque_sample_phase, plant.torque_limit_nm
    ident_tapes, delay_tape = tapes
    tels = [plant.play(tape, Controller(gains, None, "identify")) for tape in ident_tapes]
    notes: list[str] = []
    try:  # judged at the delay of least residual on a 1 ms grid (a misaligned state widens the intervals)
        grid = np.linspace(0.0, DELAY_MAX_S, int(round(DELAY_MAX_S / 1e-3)) + 1)
        probe = min(grid, key=lambda d: quick_fit(tels, phase, d, REVOLUTE_TERMS, cap)[1])
        worst = _worst_precision(fit_model(tels, phase, float(probe), cap, servo.name))
        why = f"the widest relative 95 % half-width of J, b, tc is {worst:.3g} > {PRECISION:g}"
    except DataError as exc:
        worst, why = math.inf, str(exc)
    if worst > PRECISION:
        notes.append(f"the designed tape left the model imprecise ({why}): the generic tapes are played instead")
        ident_tapes, delay_tape = fallback
        tels = [plant.play(tape, Controller(gains, None, "identify")) for tape in ident_tapes]
    kd_base = gains.kd if gains.kd > 0 else 0.0
    delay = 0.0
    if kd_base > 0:
        soft = servo.clip_gains(DriveGains(gains.kp, KD_FACTORS[0] * kd_base, gains.ki, gains.i_clamp_nm))
        hard = servo.clip_gains(DriveGains(gains.kp, KD_FACTORS[1] * kd_base, gains.ki, gains.i_clamp_nm))
        slow = plant.play(delay_tape, Controller(soft, None, "delay kd x0.6"))
        fast = plant.play(delay_tape, Controller(hard, None, "delay kd x1.6"))
        try:
            first = fit_model(tels, phase, 0.0, cap, servo.name)
            terms = tuple(n for n in REVOLUTE_TERMS if n in first.half)
            delay, why = bisect_delay(tels, slow, fast, phase, terms, cap)
            notes.append(why)
            tels = tels + [slow, fast]
        except DataError as exc:
            notes.append(f"delay not bisected: {exc}")
    else:
        notes.append("kd is 0: the delay cannot be bisected from kd x0.6 / x1.6")
    fit = fit_model(tels, phase, delay, cap, servo.name)
    return fit, delay, notes


def stage1_tapes(servo: Servo, command_rate_hz: float) -> tuple[list[Tape], Tape]:
    """The identification tapes and the tape played at kd x0.6 and x1.6: one designed motion (`tapes.joint_optimal`)."""
    ident = joint_optimal(servo.name, servo.envelope, command_rate_hz, name="ident-designed", design=IDENT_DESIGN)
    delay = joint_optimal(
        servo.name,
        servo.envelope,
        command_rate_hz,
        name="delay-designed",
        design=replace(IDENT_DESIGN, periods=DELAY_PERIODS),
    )
    return [ident], delay


def generic_tapes(servo: Servo, command_rate_hz: float) -> tuple[list[Tape], Tape]:
    """The tapes Stage 1 falls back to: plateaus, fast moves and a chirp, and the chirp again at kd x0.6 and x1.6."""
    envelopes = servo.envelopes()
    return identification(envelopes, command_rate_hz), chirp(envelopes, command_rate_hz, name="delay-chirp")


def sag_floor_kp(servo: Servo, model: JointModel) -> float:
    """The softest kp that does not sag a quarter of the travel under gravity and friction."""
    static = abs(model.gravity_sin_nm) + abs(model.gravity_cos_nm) + abs(model.offset_nm) + abs(model.coulomb_nm)
    return static / (0.25 * servo.envelope.travel_rad)


def identify_servo(servo: Servo, plant: Plant, *, seed: Controller | None = None) -> Identification:
    """Stage 1: fit, delay bisection, softer re-identification, refusal to priors."""
    rate = plant.command_rate_hz
    designed, generic = stage1_tapes(servo, rate), generic_tapes(servo, rate)
    start_s = plant.motion_s
    notes: list[str] = []
    attempts = [(servo.gains, "fit")]
    if seed is not None and seed.gains != servo.gains:
        attempts.append((servo.clip_gains(seed.gains), "fit at the seed's gains"))
    for gains, source in attempts:
        try:
            fit, delay, more = _run(servo, plant, gains, designed, generic)
        except DataError as exc:
            notes.append(f"refused at kp={gains.kp:.4g}, kd={gains.kd:.4g}: {exc}")
            continue
        notes += more
        dt = 1.0 / rate
        for _ in range(2):  # softer re-identification
            wn = loop_of(gains, fit.model).wn_rad_s
            if wn * dt <= 0.5:
                break
            factor = (0.5 / (wn * dt)) ** 2
            if factor > 0.98:  # within 2 % of the limit: the re-identification already landed on it
                break
            floor = max(servo.kp_min_nm_rad, sag_floor_kp(servo, fit.model))
            kp = max(gains.kp * factor, floor)
            if kp >= gains.kp * 0.999:
                notes.append(f"wn dt = {wn * dt:.2f} > 0.5 but softer gains would sag or leave the guard")
                break
            softer = DriveGains(kp, gains.kd * kp / gains.kp, gains.ki, gains.i_clamp_nm)
            notes.append(f"wn dt = {wn * dt:.2f} > 0.5: identified again at {kp / gains.kp:.2f} of the gains")
            try:
                fit, delay, more = _run(servo, plant, softer, designed, generic)
                gains = softer
                notes += more
            except DataError as exc:
                notes.append(f"softer re-identification refused: {exc}")
                break
        return Identification(
            fit.model,
            fit.half,
            delay,
            source,
            fit.rows,
            fit.condition,
            gains,
            tuple(notes) + fit.notes,
            plant.motion_s - start_s,
        )
    if servo.priors is None:
        raise DataError("identification refused and the servo has no priors", joint=servo.name)
    notes.append("fell back to the servo's priors")
    return Identification(
        servo.priors, {}, servo.delay_s, "priors", 0, math.inf, servo.gains, tuple(notes), plant.motion_s - start_s
    )
