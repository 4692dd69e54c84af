"""tune(): Stage 1 identify, limits from the as-found run, Stage 2 sweep, Stage 3 refine, Stage 4 verify.

Every motion goes through the Plant seam. `plan_seconds` says beforehand how long the joint will move.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

from ..linear import JointModel
from ..tapes import Tape, evaluation, steps
from ..tapes import plan_seconds as tape_seconds
from .base_feedforward import WithBase
from .plants.joint import Plant, twin_plant
from .scoring import Score, SweepLimits, score
from .servo import Controller, Goal, Servo, loop_of
from .stages.identification import Identification, generic_tapes, identify_servo, stage1_tapes
from .stages.refine import COULOMB_SCALES, WN_FRACTIONS, ZETAS, Judge, RefineResult, evaluate, refine
from .stages.sweep import SweepResult, eased, limits_from, run_sweep
from .stages.verify import VerifyResult, verify


@dataclass(frozen=True)
class TuneResult:
    """What tune() found and decided; `deployed` is the controller to run (as found when not improved)."""

    servo: Servo
    identification: Identification
    limits: SweepLimits
    as_found_score: Score
    sweep: SweepResult
    refine: RefineResult
    verify: VerifyResult
    deployed: Controller
    improved: bool
    seconds: dict[str, float]
    notes: tuple[str, ...]

    @property
    def before(self) -> Score:
        return self.verify.entries[0].score

    @property
    def after(self) -> Score:
        return self.verify.chosen.score


def stage_tapes(
    servo: Servo, command_rate_hz: float, goal: Goal, model: JointModel | None = None
) -> dict[str, list[Tape]]:
    """The tapes of each stage (eased to `model` when given)."""
    envelopes = servo.envelopes()
    ease = (lambda t: eased(t, model, servo.torque_limit_nm)) if model is not None else (lambda t: t)
    designed, (generic, chirp_) = stage1_tapes(servo, command_rate_hz)[0], generic_tapes(servo, command_rate_hz)
    return {  # identify: at worst the designed tape, then the generic tapes (see identify_servo)
        "identify": designed + generic + [chirp_] * 2,
        "sweep": [ease(steps(envelopes, command_rate_hz))],
        "refine": [ease(t) for t in evaluation(envelopes, command_rate_hz, goal.refine_seed)],
        "verify": [ease(t) for t in evaluation(envelopes, command_rate_hz, goal.verify_seed)],
    }


def tuning_plan_seconds(
    servo: Servo, command_rate_hz: float, goal: Goal = Goal(), seed: Controller | None = None
) -> dict[str, float]:
    """Seconds of motion per stage at worst-case rung and candidate counts; tapes eased to the servo's priors
    when it has them (the identified model eases them again, so the real plan can differ a little). Identify's
    worst case: the designed tape's plays and then the generic tapes a joint falls back to."""
    tapes_ = stage_tapes(servo, command_rate_hz, goal, servo.priors)
    n_ff = 1 + len(COULOMB_SCALES)
    n_seed = (1 + n_ff) if seed is not None else 0
    n_wn = 1 + len(WN_FRACTIONS) + (1 if seed is not None else 0)
    candidates = 1 + n_ff + n_seed + n_wn * len(ZETAS) + n_ff  # + the as-found run
    repeats = {
        "identify": 1,
        "sweep": goal.max_rungs + 2,
        "refine": candidates * goal.repeats,
        "verify": (2 + (1 if seed is not None else 0)) * goal.repeats,
    }
    out = tape_seconds(tapes_, repeats)
    return {
        "identify": out["identify"],
        "sweep (worst case)": out["sweep"],
        "refine": out["refine"],
        "verify": out["verify"],
    }


@contextmanager
def _motion_seconds(plant: Plant, seconds: dict[str, float], stage: str) -> Iterator[None]:
    """Seconds of motion the plant plays inside the block, as `seconds[stage]`."""
    mark = plant.motion_s
    yield
    seconds[stage] = plant.motion_s - mark


CHATTER_MISMATCH = 2.0
"""A twin whose chatter at the as-found gains is over this many times the plant's gets its loop noise scaled."""


def _twin(
    servo: Servo, plant: Plant, model: JointModel, delay_s: float, af_eval: Score, tapes: Sequence[Tape], goal: Goal
) -> tuple[Plant, Score, list[str]]:
    """The identified model's MuJoCo twin (with the plant's arm torque when it has one) and its as-found score.

    Its loop sees the as-found feedback noise. When that makes the twin chatter at the as-found gains more than
    `CHATTER_MISMATCH` times what the plant measured, not all of the feedback's noise reaches the drive's loop
    (published feedback noisier than the drive's encoder): the twin's noise is scaled by the chatter ratio
    (chatter through kd is proportional to it) and the twin built again, with a note."""

    def build(noise_rad: float) -> tuple[Plant, Score]:
        made = twin_plant(
            servo.name,
            model,
            servo.envelope,
            command_rate_hz=plant.command_rate_hz,
            torque_limit_nm=plant.torque_limit_nm,
            delay_s=delay_s,
            noise_rad=noise_rad,
        )
        base = getattr(plant, "base_feedforward", None)
        if base is not None:  # the plant adds an arm model's torque: so must its twin
            made = WithBase(made, base)
        return made, evaluate(made, servo.as_found, tapes, goal.repeats)

    noise = 1e-3 * af_eval.noise_mrad
    made, base = build(noise)
    if noise > 0 and base.chatter_nm > CHATTER_MISMATCH * af_eval.chatter_nm:
        loud, scaled = base.chatter_nm, noise * af_eval.chatter_nm / base.chatter_nm
        made, base = build(scaled)
        return (
            made,
            base,
            [
                f"twin: at the as-found gains it chattered {loud:.3g} N m at the feedback's noise "
                f"against the plant's {af_eval.chatter_nm:.3g}: its loop noise scaled from {1e3 * noise:.3g} to "
                f"{1e3 * scaled:.3g} mrad (the drive's loop sees less noise than the published feedback)"
            ],
        )
    return made, base, []


def tune(
    servo: Servo, plant: Plant, goal: Goal = Goal(), *, seed: Controller | None = None, twin: Plant | bool | None = None
) -> TuneResult:
    """Tune one joint through `plant`. `seed` (e.g. the analytic start) starts the sweep, joins the search and
    is the incumbent at verify; `twin=True` (default: `goal.twin_screening`) screens the sweep's start and the
    refine candidates on a MuJoCo twin of the identified model; a Plant given as `twin` is used as the twin."""
    seed = seed or servo.seed
    twin = goal.twin_screening if twin is None else twin
    seconds: dict[str, float] = {}
    timed = partial(_motion_seconds, plant, seconds)
    with timed("identify"):
        ident = identify_servo(servo, plant, seed=seed)
    model = ident.model
    tapes_ = stage_tapes(servo, plant.command_rate_hz, goal, model)
    notes = list(ident.notes)

    as_found = servo.as_found
    with timed("as found"):
        af_steps = score([plant.play(tapes_["sweep"][0], as_found)])
        af_eval = evaluate(plant, as_found, tapes_["refine"], goal.repeats)
    limits, why = limits_from([af_steps, af_eval], goal, plant.torque_limit_nm)
    notes += why

    twin_ = None
    twin_base = None
    start_wn = loop_of((seed or as_found).gains, model).wn_rad_s
    if twin:
        if isinstance(twin, bool):
            twin_, twin_base, why = _twin(servo, plant, model, ident.delay_s, af_eval, tapes_["refine"], goal)
            notes += why
        else:
            twin_, twin_base = twin, evaluate(twin, as_found, tapes_["refine"], goal.repeats)
        if seed is None:  # the twin's own sweep says where the plant's can start
            pre = run_sweep(servo, twin_, model, limits, goal, start_wn, tapes_["sweep"][0])
            if pre.wn_quiet_rad_s is not None:
                near = pre.wn_quiet_rad_s / goal.rung_ratio**goal.twin_sweep_margin_rungs
                if near > start_wn:
                    notes.append(
                        f"the twin's sweep was quiet to wn {pre.wn_quiet_rad_s:.4g}: the plant's sweep "
                        f"starts {goal.twin_sweep_margin_rungs} rungs below, at {near:.4g} rad/s"
                    )
                    start_wn = near

    with timed("sweep"):
        sweep = run_sweep(servo, plant, model, limits, goal, start_wn, tapes_["sweep"][0])

    judge = Judge(
        plant=plant,
        tapes=tapes_["refine"],
        model=model,
        limits=limits,
        as_found=af_eval,
        wn_max_rad_s=sweep.wn_max_rad_s,
        goal=goal,
        twin=twin_,
        twin_as_found=twin_base,
        as_found_gains=as_found.gains,
    )
    with timed("refine"):
        refined = refine(judge, servo, seed, plant.feedforward_terms)

    pick = refined.pick.controller if refined.pick else None
    with timed("verify"):
        checked = verify(
            plant,
            tapes_["verify"],
            model=model,
            limits=limits,
            wn_max_rad_s=sweep.wn_max_rad_s,
            as_found=as_found,
            pick=pick,
            start=seed,
            repeats=goal.repeats,
        )
    seconds["total"] = sum(seconds.values())
    if not math.isfinite(sweep.wn_max_rad_s):
        notes.append("no finite deploy ceiling")
    return TuneResult(
        servo,
        ident,
        limits,
        af_eval,
        sweep,
        refined,
        checked,
        checked.chosen.controller,
        checked.improved,
        seconds,
        tuple(notes) + sweep.notes + refined.notes + checked.notes,
    )
