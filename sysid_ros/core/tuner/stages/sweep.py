"""Limits from the as-found run, tape easing, and Stage 2: the guarded ringing sweep and the deploy ceiling.

"Turn it up until it oscillates, then back off", one rung at a time on the step tape: wn x1.2 per rung
(zeta 0.8), at most 14 rungs; stop at the first rung that rings past the threshold, crosses the target 4
or more times in one stop, aborts, or chatters past the limit (chatter alone must repeat on a second
run). A rung far under the limits (ringing and chatter under a quarter of them) lets the sweep skip the next
rung; when the rung above the skipped one stops, the skipped one is played, so the sweep ends on the same
two neighbouring rungs (the highest quiet, the first to stop) as one rung at a time. If the first rung
rings, walk down the /1.2 ladder to its highest quiet rung (bracketed, not played
rung by rung: `_walk_down`). The ceiling is wn_quiet / sqrt(gain_margin),
or wn_quiet itself when the stop was chatter growing like sensor noise through kd, or the guard when
nothing rang.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ...linear import JointModel
from ...tapes import KnotCurve, Tape, probe_times, sample, shrunk, stretched
from ..plants.joint import Plant
from ..scoring import Score, SweepLimits, score
from ..servo import Controller, DriveGains, Goal, Servo, gains_for

EASE_TORQUE_USE = 0.8


def eased(tape: Tape, model: JointModel, torque_limit_nm: float, use: float = EASE_TORQUE_USE) -> Tape:
    """The tape stretched (or shrunk, if gravity alone is too much) until the model follows it on 80 % of the cap."""
    budget = use * torque_limit_nm

    def peaks(candidate: Tape) -> tuple[float, float]:
        got = sample(candidate, probe_times(candidate, 2e-3))
        q, qd, qdd = got.position[:, 0], got.velocity[:, 0], got.acceleration[:, 0]
        total = float(np.max(np.abs(model.torque(q, qd, qdd))))
        gravity = model.gravity_sin_nm * np.sin(q) + model.gravity_cos_nm * np.cos(q) + model.offset_nm
        static = float(np.max(np.abs(gravity)))
        return total, static

    total, static = peaks(tape)
    if total <= budget:
        return tape
    out = tape
    factor = 1.0
    while static > budget and factor > 0.05:
        factor *= 0.9
        out = shrunk(tape, factor)
        total, static = peaks(out)
    stretch = 1.0
    base = out
    while total > budget and stretch < 20.0:
        stretch *= 1.1
        out = moves_stretched(base, stretch)
        total, _ = peaks(out)
    return out


def moves_stretched(tape: Tape, factor: float) -> Tape:
    """The tape's moves played `factor` times slower while its holds keep their length (the step tape's
    0.8 s holds stay 0.8 s); a tape that is not one knot curve is stretched whole (`tapes.stretched`)."""
    if len(tape.curves) != 1 or not isinstance(tape.curves[0], KnotCurve) or factor == 1.0:
        return stretched(tape, factor)
    c = tape.curves[0]
    times = [0.0]
    for k in range(len(c.time_s) - 1):
        still = c.position[k] == c.position[k + 1] and not any(
            (c.velocity[k], c.velocity[k + 1], c.acceleration[k], c.acceleration[k + 1])
        )
        times.append(times[-1] + (c.time_s[k + 1] - c.time_s[k]) * (1.0 if still else factor))
    curve = KnotCurve(
        tuple(times), c.position, tuple(v / factor for v in c.velocity), tuple(a / factor**2 for a in c.acceleration)
    )
    return replace(tape, curves=(curve,))


@dataclass(frozen=True)
class Rung:
    """One sweep rung: its loop, gains, score and why it stopped the sweep (None when quiet)."""

    wn_rad_s: float
    zeta: float
    gains: DriveGains
    score: Score
    stop: str | None
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "wn_rad_s": self.wn_rad_s,
            "zeta": self.zeta,
            "kp": self.gains.kp,
            "kd": self.gains.kd,
            "ringing_mrad": self.score.ringing_mrad,
            "crossings": self.score.crossings,
            "chatter_nm": self.score.chatter_nm,
            "stop": self.stop,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class SweepResult:
    """The rungs played, the last quiet rung, the deploy ceiling and how it was set."""

    rungs: tuple[Rung, ...]
    wn_quiet_rad_s: float | None
    wn_max_rad_s: float
    rule: str
    notes: tuple[str, ...]


def stop_reason(s: Score, limits: SweepLimits) -> tuple[str | None, bool]:
    """Why a rung stops the sweep, and whether that is chatter alone."""
    reasons = []
    if s.aborted or not s.finite:
        reasons.append(f"aborted: {s.aborted or 'telemetry not finite'}")
    if s.ringing_mrad > limits.ringing_mrad:
        reasons.append(f"rings {s.ringing_mrad:.3g} > {limits.ringing_mrad:.3g} mrad")
    if s.crossings >= 4:
        reasons.append(f"crosses the target {s.crossings} times in one stop")
    chatter = s.chatter_nm > limits.chatter_nm
    if chatter:
        reasons.append(f"chatters {s.chatter_nm:.3g} > {limits.chatter_nm:.3g} N m")
    return ("; ".join(reasons) or None), (chatter and len(reasons) == 1)


def run_sweep(
    servo: Servo,
    plant: Plant,
    model: JointModel,
    limits: SweepLimits,
    goal: Goal,
    start_wn_rad_s: float,
    step_tape: Tape,
) -> SweepResult:
    """Stage 2 on `step_tape` from `start_wn_rad_s` (clipped to the guard)."""
    ceiling = servo.wn_ceiling_rad_s(model.inertia_kg_m2)
    notes: list[str] = []

    def play(wn: float) -> Rung:
        gains, why = gains_for(wn, goal.zeta, model, servo, servo.gains)
        got = score([plant.play(step_tape, Controller(gains, None, f"rung wn={wn:.4g}"))])
        reason, chatter_only = stop_reason(got, limits)
        extra = list(why)
        if reason and chatter_only:  # a chatter-only stop must repeat on a second run
            again = score([plant.play(step_tape, Controller(gains, None, f"rung wn={wn:.4g} again"))])
            reason2, _ = stop_reason(again, limits)
            if reason2 is None:
                extra.append(f"chatter {got.chatter_nm:.3g} N m did not repeat ({again.chatter_nm:.3g})")
                reason = None
            else:
                reason = f"chatter only, repeated: {reason}"
        return Rung(wn, goal.zeta, gains, got, reason, tuple(extra))

    wn = min(start_wn_rad_s, ceiling)
    if start_wn_rad_s > ceiling:
        notes.append(f"start wn {start_wn_rad_s:.4g} clipped to the guard {ceiling:.4g} rad/s")
    first = play(wn)
    if first.stop:
        return _walk_down(first, play, servo, model, limits, goal, ceiling, notes)
    played, k = {0: first}, 0  # by ladder index: rung k is wn * rung_ratio^k, capped at the guard

    def ladder(j):
        return min(wn * goal.rung_ratio**j, ceiling)

    last = goal.max_rungs - 1
    while k < last and not played[k].stop and played[k].wn_rad_s < ceiling * (1 - 1e-9):
        skip = (
            k + 2 <= last
            and ladder(k + 1) < ceiling * (1 - 1e-9)
            and _far_below(played[k].score, limits, goal.sweep_stride_headroom)
        )
        k += 2 if skip else 1
        played[k] = play(ladder(k))
        if skip and played[k].stop:  # the rung skipped says which of the two is the first to stop
            played[k - 1] = play(ladder(k - 1))
            notes.append(f"rung wn {ladder(k - 1):.4g} skipped, then played: the rung above it stopped")
            if played[k - 1].stop:
                break
    rungs = tuple(played[j] for j in sorted(played))
    stopper = next((r for r in rungs if r.stop), None)
    quiet = [r for r in rungs if not r.stop and (stopper is None or r.wn_rad_s < stopper.wn_rad_s)]
    if skipped := max(played) + 1 - len(played):
        notes.append(
            f"{skipped} rung(s) not played: the rung below each rang and chattered under "
            f"{goal.sweep_stride_headroom:.0%} of the limits"
        )
    return _ceiling(rungs, quiet[-1], stopper, goal, ceiling, notes)


def _far_below(s: Score, limits: SweepLimits, headroom: float) -> bool:
    """A quiet rung (not aborted, finite: `stop_reason` stops those) so far under the stop limits that the next
    rung up can be skipped."""
    return (
        headroom > 0
        and s.crossings <= 1
        and s.ringing_mrad <= headroom * limits.ringing_mrad
        and s.chatter_nm <= headroom * limits.chatter_nm
    )


def _walk_down(
    first: Rung,
    play: Callable[[float], Rung],
    servo: Servo,
    model: JointModel,
    limits: SweepLimits,
    goal: Goal,
    guard_wn: float,
    notes: list[str],
) -> SweepResult:
    """Below a first rung that stops, the ladder wn0 / 1.2^k (k < max_rungs) down to its highest quiet rung and
    the stopping rung just above it, without playing every rung between: the next rung tried is where the
    chatter would fall to the limit if it grows with kd (after a chatter-only stop; else the next rung down);
    once a rung is quiet, the one above it, then the middle of the gap, until a stopping rung and a quiet one
    are neighbours. Where lower rungs are quieter, that is the rung the walk one by one stops at. The rungs
    played come back in ladder order (highest wn first)."""
    wn0, last = first.wn_rad_s, goal.max_rungs - 1

    def ladder(k):
        return wn0 / goal.rung_ratio**k

    played = {0: first}
    hi, lo = 0, None  # the lowest rung known to stop, the highest known quiet
    while (lo is None and hi < last) or (lo is not None and lo > hi + 1):
        if lo is None:
            k = _quiet_guess(played[hi], hi, ladder, servo, model, limits, goal)
        else:
            k = lo - 1 if lo - 1 not in played else (hi + lo) // 2
        played[k] = rung = play(ladder(k))
        hi, lo = (k, lo) if rung.stop else (hi, k)
    if lo is None:
        notes.append("no quiet rung found walking down: the ceiling is one rung below the last")
        return SweepResult(
            tuple(played[k] for k in sorted(played)),
            None,
            ladder(last + 1) / math.sqrt(goal.gain_margin),
            "walked down",
            tuple(notes),
        )
    notes.append(f"walked down to rung {lo} (wn {ladder(lo):.4g}) in {len(played)} of its {lo + 1} rungs")
    return _ceiling(tuple(played[k] for k in sorted(played)), played[lo], played[hi], goal, guard_wn, notes)


def _quiet_guess(
    rung: Rung, k: int, ladder: Callable[[int], float], servo: Servo, model: JointModel, limits: SweepLimits, goal: Goal
) -> int:
    """The rung below a stopping rung k to try next: after a chatter-only stop, the first whose kd brings the
    chatter (taken as proportional to kd: sensor noise through the derivative) under the limit."""
    last = goal.max_rungs - 1
    if not (rung.stop or "").startswith("chatter only") or rung.gains.kd <= 0:
        return k + 1
    per_kd = rung.score.chatter_nm / rung.gains.kd
    return next(
        (
            j
            for j in range(k + 1, last)
            if gains_for(ladder(j), goal.zeta, model, servo, servo.gains)[0].kd * per_kd <= limits.chatter_nm
        ),
        last,
    )


def _ceiling(
    rungs: tuple[Rung, ...], quiet: Rung, stopper: Rung | None, goal: Goal, guard_wn: float, notes: list[str]
) -> SweepResult:
    if stopper is None and quiet.wn_rad_s < guard_wn * (1 - 1e-9):
        notes.append(
            f"nothing rang up to wn {quiet.wn_rad_s:.4g}, the last of {goal.max_rungs} rungs, below the "
            f"guard {guard_wn:.4g} rad/s: the ceiling is that rung (untried gains are not deployed)"
        )
        return SweepResult(rungs, quiet.wn_rad_s, quiet.wn_rad_s, "last rung", tuple(notes))
    if stopper is None:
        notes.append("nothing rang: the ceiling is the guard; another session after writing could go further")
        return SweepResult(rungs, quiet.wn_rad_s, guard_wn, "guard", tuple(notes))
    if stopper.stop and stopper.stop.startswith("chatter only"):
        chatter_ratio = stopper.score.chatter_nm / max(quiet.score.chatter_nm, 1e-300)
        kd_ratio = stopper.gains.kd / max(quiet.gains.kd, 1e-300)
        if chatter_ratio <= 2.0 * kd_ratio:
            notes.append(
                f"chatter grew {chatter_ratio:.2f}x for {kd_ratio:.2f}x kd: a noise limit, the ceiling is "
                "the last quiet rung"
            )
            return SweepResult(rungs, quiet.wn_rad_s, quiet.wn_rad_s, "noise limit", tuple(notes))
    wn_max = quiet.wn_rad_s / math.sqrt(goal.gain_margin)
    return SweepResult(rungs, quiet.wn_rad_s, wn_max, "gain margin", tuple(notes))


def limits_from(as_found: list[Score], goal: Goal, torque_limit_nm: float) -> tuple[SweepLimits, tuple[str, ...]]:
    """Ringing threshold and chatter limit from the as-found run(s)."""
    noise = max(s.noise_mrad for s in as_found)
    ringing_af = max(s.ringing_mrad for s in as_found)
    chatter_af = max(s.chatter_nm for s in as_found)
    if goal.ringing_mrad is not None:
        ringing = goal.ringing_mrad
        why = "Goal.ringing_mrad"
    else:
        ringing = max(3.0 * noise, 0.05, 1.5 * ringing_af)
        why = f"max(3 x hold noise {noise:.3g}, 0.05, 1.5 x as-found ringing {ringing_af:.3g}) mrad"
    notes = [f"ringing threshold {min(ringing, goal.ringing_cap_mrad):.3g} mrad from {why}"]
    if ringing > goal.ringing_cap_mrad:
        notes.append(f"ringing threshold capped at {goal.ringing_cap_mrad} mrad")
    chatter = max(0.02 * torque_limit_nm, 1.5 * chatter_af)
    limits = SweepLimits(min(ringing, goal.ringing_cap_mrad), chatter, goal.stop_allocation_mrad, torque_limit_nm)
    return limits, tuple(notes)
