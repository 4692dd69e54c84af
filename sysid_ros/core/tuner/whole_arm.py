"""tune_arm: each joint tuned tip to base through the arm, then the whole arm checked on held-out pick-and-place.

While one joint tunes the others hold home (the distal ones already under their new controllers). Then
all joints play four held-out pick-and-place tape sets at once, eased to what every joint can follow, and
each joint is judged against the whole arm's as-found run (see `offences`). Offenders back off wn x0.8
per round, at most five rounds, never above their ceiling; when an offender kept its own controller, the
joints that changed back off instead. If offenders remain, the best whole combination tried that left no
joint worse than as found is delivered, else the whole arm as found.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ConfigError
from ..linear import JointModel
from ..tapes import Tape, duration_s, pickplace, sample, stretched
from .pipeline import TuneResult, tune
from .plants.arm import Arm
from .plants.joint import Plant, Telemetry
from .scoring import Score, SweepLimits, cost, detrended_std, gate_failures, score
from .servo import Controller, Goal, Servo, gains_for, loop_of
from .stages.refine import ceiling_gate_wn

ARM_CHECK_SEEDS = (101, 102, 103, 104)
BACK_OFF = 0.8
MAX_ROUNDS = 5


@dataclass(frozen=True)
class JointOutcome:
    """What a joint's own tuning produced: the controller to try, its model, ceiling and limits."""

    servo: Servo
    model: JointModel
    deployed: Controller
    wn_max_rad_s: float
    limits: SweepLimits
    result: TuneResult | None = None


def outcome_of(result: TuneResult) -> JointOutcome:
    return JointOutcome(
        result.servo, result.identification.model, result.deployed, result.sweep.wn_max_rad_s, result.limits, result
    )


TuneJoint = Callable[[Servo, Plant, Goal], JointOutcome]


def _default_tune(servo: Servo, plant: Plant, goal: Goal) -> JointOutcome:
    return outcome_of(tune(servo, plant, goal))


@dataclass(frozen=True)
class ArmRound:
    """One whole-arm check: the combination played, each joint's score and cost, and the offenders."""

    controllers: dict[str, Controller]
    scores: dict[str, Score]
    costs: dict[str, float]
    offences: dict[str, tuple[str, ...]]

    @property
    def offenders(self) -> tuple[str, ...]:
        return tuple(j for j, why in self.offences.items() if why)

    def no_joint_worse(self) -> bool:
        return all(c <= 2.0 for c in self.costs.values()) and not any(self.scores[j].aborted for j in self.scores)


@dataclass(frozen=True)
class ArmResult:
    """Per-joint outcomes, every round, the delivered combination and the as-found arm run."""

    outcomes: dict[str, JointOutcome]
    as_found: ArmRound
    rounds: tuple[ArmRound, ...]
    delivered: dict[str, Controller]
    improved: bool
    notes: tuple[str, ...]


def arm_check_tapes(arm: Arm, models: dict[str, JointModel], use: float = 0.8) -> list[Tape]:
    """Four held-out pick-and-place tape sets over all joints, stretched until every joint's model follows
    its part on 80 % of its cap."""
    out = []
    for seed in ARM_CHECK_SEEDS:
        tape = pickplace(arm.envelopes, arm.command_rate_hz, seed)
        factor = 1.0
        t = np.linspace(0.0, duration_s(tape), int(duration_s(tape) * 200) + 2)
        while factor < 20.0:
            candidate = stretched(tape, factor)
            got = sample(candidate, t * factor)
            worst = max(
                float(np.max(np.abs(models[j].torque(got.position[:, c], got.velocity[:, c], got.acceleration[:, c]))))
                / arm.caps[j]
                for c, j in enumerate(tape.joints)
            )
            if worst <= use:
                break
            factor *= 1.1
        out.append(stretched(tape, factor))
    return out


def _all_still(tels: dict[str, Telemetry]) -> np.ndarray:
    still = [np.abs(t.reference_velocity) <= 1e-12 for t in tels.values()]
    return np.logical_and.reduce(still)


def _stretches(tel: Telemetry, mask: np.ndarray, min_s: float = 0.2) -> list[tuple[int, int]]:
    """Runs of `mask` at least `min_s` long, after the first move."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(int), [0]])))
    moved = np.flatnonzero(np.abs(tel.reference_velocity) > 0)
    first = moved[0] if len(moved) else len(mask)
    return [
        (int(a), int(b))
        for a, b in zip(edges[::2], edges[1::2])
        if a > first and (b - a) / tel.command_rate_hz >= min_s
    ]


def _ringing_over(tel: Telemetry, mask: np.ndarray, min_s: float = 0.2) -> float:
    """Ringing (mrad) over stretches of `mask` at least `min_s` long: sqrt 2 x detrended std of each tail half."""
    worst = 0.0
    for a, b in _stretches(tel, mask, min_s):
        worst = max(worst, math.sqrt(2.0) * detrended_std(tel.error[a + (b - a) // 2 : b]))
    return 1e3 * worst


def _run(arm: Arm, tapes_: Sequence[Tape], controllers: dict[str, Controller]) -> list[dict[str, Telemetry]]:
    return [arm.play(tape, controllers) for tape in tapes_]


def offences(
    arm: Arm,
    tapes_: Sequence[Tape],
    runs: list[dict[str, Telemetry]],
    base_runs: list[dict[str, Telemetry]],
    controllers: dict[str, Controller],
    outcomes: dict[str, JointOutcome],
    goal: Goal,
) -> ArmRound:
    """Judge every joint of one whole-arm run against the as-found arm's run: above its deploy ceiling, never
    seen still, ringing over the cap (in company, and alone with its partners still), or worse than as found."""
    changed = {j for j in arm.joints if controllers[j] != outcomes[j].servo.as_found}
    cap = goal.ringing_mrad if goal.ringing_mrad is not None else goal.ringing_cap_mrad
    scores, costs, why_all = {}, {}, {}
    for joint in arm.joints:
        out = outcomes[joint]
        # a run another joint stopped early is not held against this one
        kept = [k for k, r in enumerate(runs) if r[joint].aborted or not r[joint].notes]
        if not kept:  # every run was stopped by another joint: nothing to judge this one on
            scores[joint], costs[joint], why_all[joint] = score([runs[0][joint]]), math.inf, ()
            continue
        tels = [runs[k][joint] for k in kept]
        base = [base_runs[k][joint] for k in kept]
        s, b = score(tels), score(base)
        scores[joint] = s
        costs[joint] = cost(s, b, out.limits.stop_allocation_mrad)
        why: list[str] = []
        wn = ceiling_gate_wn(controllers[joint].gains, out.servo.gains, out.model)
        if joint in changed and wn is not None and wn > out.wn_max_rad_s * (1 + 1e-9):
            why.append("above its deploy ceiling")
        still_ring = [_ringing_over(r[joint], _all_still(r)) for r in runs]
        if joint in changed and not any(_stretches(runs[k][joint], _all_still(runs[k])) for k in kept):
            why.append("never seen with every target still: a changed joint is not delivered unseen")
        if max(still_ring) > cap:
            why.append(f"rings {max(still_ring):.3g} mrad > {cap:g} where every target is still")
        for k in kept:
            r, br = runs[k], base_runs[k]
            own = np.abs(r[joint].reference_velocity) <= 1e-12
            company = own & ~_all_still(r)
            ring = _ringing_over(r[joint], company)
            ring_af = _ringing_over(br[joint], company)
            if ring > cap:
                alone = arm.play(_only(tapes_[k], joint), controllers)[joint]
                if _ringing_over(alone, np.abs(alone.reference_velocity) <= 1e-12) > cap:
                    why.append(f"rings {ring:.3g} mrad in company and still does with its partners still")
                elif ring > 1.5 * ring_af:
                    why.append(f"rings {ring:.3g} mrad in company, over the cap and 1.5x as found {ring_af:.3g}")
            elif joint in changed and ring > out.limits.ringing_mrad and ring > 1.5 * ring_af:
                why.append(f"rings {ring:.3g} mrad in company, over its threshold and 1.5x as found {ring_af:.3g}")
        if s.aborted:
            why.append(f"aborted: {s.aborted}")
        if s.saturation > max(0.02, 1.1 * b.saturation):
            why.append(f"saturates {s.saturation:.1%}")
        if s.chatter_nm > out.limits.chatter_nm:
            why.append(f"chatters {s.chatter_nm:.3g} > {out.limits.chatter_nm:.3g} N m")
        if costs[joint] > 2.0:
            why.append(f"cost {costs[joint]:.3f} worse than as found (2)")
        if changed:
            rules = [f for f in gate_failures(s, b, out.limits) if f.startswith(("tracking", "stop p90"))]
            why += rules
        why_all[joint] = tuple(why)
    return ArmRound(dict(controllers), scores, costs, why_all)


def _only(tape: Tape, joint: str) -> Tape:
    """The same tape for `joint` alone (its partners hold home)."""
    k = tape.joints.index(joint)
    return replace(tape, joints=(joint,), curves=(tape.curves[k],))


def tune_arm(
    servos: Sequence[Servo], arm: Arm, goal: Goal = Goal(), *, tune_joint: TuneJoint = _default_tune
) -> ArmResult:
    """Tune `servos` (given base to tip) tip to base through `arm`, then check and back off the whole arm."""
    by_name = {s.name: s for s in servos}
    if set(by_name) != set(arm.joints):
        raise ConfigError(f"servos {sorted(by_name)} must name exactly the arm's joints {list(arm.joints)}")
    servos = [replace(s, torque_limit_nm=arm.caps[s.name]) for s in servos]
    current = {s.name: s.as_found for s in servos}
    outcomes: dict[str, JointOutcome] = {}
    notes: list[str] = []
    for servo in reversed(list(servos)):  # tip to base
        plant = arm.joint_plant(servo.name, {j: c for j, c in current.items() if j != servo.name})
        outcomes[servo.name] = tune_joint(servo, plant, goal)
        current[servo.name] = outcomes[servo.name].deployed
    tapes_ = arm_check_tapes(arm, {j: o.model for j, o in outcomes.items()})
    as_found_ctrl = {s.name: s.as_found for s in servos}
    base_runs = _run(arm, tapes_, as_found_ctrl)
    as_found = offences(arm, tapes_, base_runs, base_runs, as_found_ctrl, outcomes, goal)
    rounds: list[ArmRound] = []
    combo = dict(current)
    for round_no in range(MAX_ROUNDS + 1):
        judged = offences(arm, tapes_, _run(arm, tapes_, combo), base_runs, combo, outcomes, goal)
        rounds.append(judged)
        if not judged.offenders or round_no == MAX_ROUNDS:
            break
        changed = [j for j in arm.joints if combo[j] != as_found_ctrl[j]]
        if not changed:
            break
        kept = [j for j in judged.offenders if j not in changed]
        movers = changed if kept else list(judged.offenders)
        notes.append(f"round {round_no + 1}: offenders {list(judged.offenders)}; backing off {movers}")
        for joint in movers:
            out = outcomes[joint]
            loop = loop_of(combo[joint].gains, out.model)
            wn = min(BACK_OFF * loop.wn_rad_s, out.wn_max_rad_s)
            gains, _ = gains_for(wn, min(loop.zeta, 2.0), out.model, out.servo, combo[joint].gains)
            combo[joint] = Controller(gains, combo[joint].feedforward, f"{combo[joint].label}, backed off")
    final = rounds[-1]
    if not final.offenders:
        delivered = final.controllers
    else:
        fine = [r for r in rounds if r.no_joint_worse()]
        if fine:
            best = min(fine, key=lambda r: sum(r.costs.values()))
            delivered = best.controllers
            notes.append("offenders remain: the best whole combination that left no joint worse is delivered")
        else:
            delivered = as_found_ctrl
            notes.append("offenders remain and every combination left a joint worse: the arm stays as found")
    improved = any(delivered[j] != as_found_ctrl[j] for j in arm.joints)
    return ArmResult(outcomes, as_found, tuple(rounds), delivered, improved, tuple(notes))
