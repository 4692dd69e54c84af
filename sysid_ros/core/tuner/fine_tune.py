"""fine_tune a deployed joint from motion the robot already made, and the canary that keeps or rolls back.

1. Score the logs as they ran. 2. Drift: re-identify from the same rows, each term against the
commissioning model. 3. Learn: feedback-error learning, the feedback torque (tau - tau_ff) regressed on the
reference's own regressor is what the feed-forward misses. 4. Twin: rebuild the joint from the new model,
check it reproduces the logs' tracking error within 30 %, then search a trust region around the deployed
controller on the logged tapes (wn x{0.85, 1, 1.15}, zeta +-0.1, deployed or learned feed-forward,
Coulomb x{0.75, 1, 1.25}). 5. Propose only a predicted 10 % improvement. `canary(after_logs)` keeps the
change if the live cost ratio is at most 1 - (1 - predicted) / 2, halfway to the prediction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from ..linear import ALL_TERMS, REVOLUTE_TERMS, JointModel, joint_columns
from ..signals import quartic_derivatives
from ..tapes import Tape
from .canary import CanaryVerdict, judge_canary
from .plants.joint import Plant, Telemetry, twin_plant
from .scoring import cost, gate_failures, score
from .servo import Controller, Goal, Servo, gains_for, loop_of
from .stages.identification import fit_model
from .stages.refine import evaluate
from .stages.sweep import limits_from

TWIN_TOLERANCE = 0.30
WN_FACTORS = (0.85, 1.0, 1.15)
ZETA_STEPS = (-0.1, 0.0, 0.1)
COULOMB_FACTORS = (0.75, 1.0, 1.25)
PROPOSE_BELOW = 0.9


@dataclass(frozen=True)
class Log:
    """One logged play: the tape that ran and what the joint did."""

    tape: Tape
    telemetry: Telemetry


@dataclass(frozen=True)
class FineTuneResult:
    """Drift, learned feed-forward, twin check, trust-region search and the proposal (None: keep deployed)."""

    deployed: Controller
    before_cost_basis: object
    drift: dict[str, dict[str, float]]
    model: JointModel
    learned: JointModel
    twin_tracking_ratio: float
    candidates: tuple[tuple[Controller, float, tuple[str, ...]], ...]
    proposal: Controller | None
    predicted_ratio: float
    allocation_mrad: float
    notes: tuple[str, ...]

    def canary(self, after_logs: Sequence[Log | Telemetry]) -> CanaryVerdict:
        """Keep the change if live cost / as-ran cost <= 1 - (1 - predicted) / 2, else roll back."""
        after = score([_tel(x) for x in after_logs])
        live = cost(after, self.before_cost_basis, self.allocation_mrad) / 2.0  # type: ignore[arg-type]
        failure = after.aborted or (None if after.finite else "telemetry not finite")
        return judge_canary(live, self.predicted_ratio, failure)


def _tel(item: Log | Telemetry) -> Telemetry:
    return item.telemetry if isinstance(item, Log) else item


def learn_feedforward(
    logs: Sequence[Log], base: JointModel | None, terms: Sequence[str] = REVOLUTE_TERMS
) -> JointModel:
    """Feedback-error learning: regress tau - tau_ff on the reference's regressor and add it to `base`."""
    rows, targets = [], []
    for log in logs:
        tel = log.telemetry
        ref = quartic_derivatives(tel.reference, 1.0 / tel.command_rate_hz)
        ok = ref.valid & (np.abs(tel.torque) < 0.98 * tel.torque_limit_nm)
        phi = joint_columns(tel.reference, tel.reference_velocity, ref.qdd, terms)
        rows.append(phi[ok])
        targets.append((tel.torque - tel.feedforward)[ok])
    phi, y = np.concatenate(rows), np.concatenate(targets)
    if len(y) < 50:
        raise DataError("too few logged rows to learn a feed-forward correction")
    scale = np.linalg.norm(phi, axis=0)
    scale[scale == 0] = 1.0
    delta = np.linalg.lstsq(phi / scale, y, rcond=None)[0] / scale
    start = base or JointModel()
    return start.replace_terms({t: getattr(start, t) + d for t, d in zip(terms, delta)})


def fine_tune(
    servo: Servo,
    deployed: Controller,
    logs: Sequence[Log],
    twin: Callable[[JointModel, float], Plant] | None = None,
    *,
    commissioning: JointModel | None = None,
    command_rate_hz: float | None = None,
    torque_sample_phase: float = 0.5,
    goal: Goal = Goal(),
) -> FineTuneResult:
    """Steps 1-5 above. `commissioning` defaults to servo.priors; `twin(model, noise_rad)` builds the twin."""
    if not logs:
        raise DataError("fine_tune needs logged plays", joint=servo.name)
    tels = [log.telemetry for log in logs]
    rate = command_rate_hz or tels[0].command_rate_hz
    before = score(tels)
    notes: list[str] = []
    commissioning = commissioning or servo.priors
    fit = fit_model(tels, torque_sample_phase, servo.delay_s, servo.torque_limit_nm, servo.name)
    model = fit.model
    drift = {}
    for term in ALL_TERMS:
        new = float(getattr(model, term))
        old = float(getattr(commissioning, term)) if commissioning is not None else float("nan")
        drift[term] = {
            "commissioning": old,
            "now": new,
            "change": (new - old) / abs(old) if old else (math.inf if new else 0.0),
        }
    learned = learn_feedforward(logs, deployed.feedforward)
    build = twin or (
        lambda m, noise: twin_plant(
            servo.name,
            m,
            servo.envelope,
            command_rate_hz=rate,
            torque_limit_nm=servo.torque_limit_nm,
            delay_s=servo.delay_s,
            noise_rad=noise,
        )
    )
    plant = build(model, 1e-3 * before.noise_mrad)
    tapes_ = [log.tape for log in logs]
    replay = evaluate(plant, deployed, tapes_)
    ratio = replay.tracking_rms_mrad / max(before.tracking_rms_mrad, 1e-12)
    empty = FineTuneResult(deployed, before, drift, model, learned, ratio, (), None, 1.0, goal.stop_allocation_mrad, ())
    if abs(ratio - 1.0) > TWIN_TOLERANCE:
        notes.append(f"the twin's tracking error is {ratio:.2f}x the logs': not within 30 %, nothing proposed")
        return FineTuneResult(**{**empty.__dict__, "notes": tuple(notes)})
    limits, _ = limits_from([replay], goal, servo.torque_limit_nm)
    loop = loop_of(deployed.gains, model)
    tried = []
    for wn_k in WN_FACTORS:
        for dz in ZETA_STEPS:
            gains, _ = gains_for(loop.wn_rad_s * wn_k, max(loop.zeta + dz, 0.05), model, servo, deployed.gains)
            for name, ff in (("deployed", deployed.feedforward), ("learned", learned)):
                for ck in COULOMB_FACTORS:
                    scaled = None if ff is None else ff.replace_terms({"coulomb_nm": ff.coulomb_nm * ck})
                    c = Controller(gains, scaled, f"wn x{wn_k} zeta {dz:+.1f} {name} ff coulomb x{ck}")
                    got = evaluate(plant, c, tapes_)
                    tried.append(
                        (c, cost(got, replay, limits.stop_allocation_mrad), gate_failures(got, replay, limits))
                    )
    ok = [t for t in tried if not t[2]]
    best = min(ok, key=lambda t: t[1]) if ok else None
    predicted = best[1] / 2.0 if best else 1.0
    proposal = best[0] if best and predicted <= PROPOSE_BELOW else None
    if proposal is None:
        notes.append(f"predicted ratio {predicted:.3f} is not a 10 % improvement: keep the deployed controller")
    return FineTuneResult(
        deployed,
        before,
        drift,
        model,
        learned,
        ratio,
        tuple(tried),
        proposal,
        predicted,
        goal.stop_allocation_mrad,
        tuple(notes),
    )
