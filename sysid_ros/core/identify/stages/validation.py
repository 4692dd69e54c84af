"""The run's fifth stage, `validate`: the fit's metrics and training traces, the identified model, its replay of
the held-out segments (position traces and RMS, against the start values'), and held-out joint torque per
joint against the model file's (`torque_check`); for an arm, the torque-space fit (`torque_space`), which the
result carries instead of the window fit when it is clearly better on the training rows (the held-out rows only
judge the choice)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
from mujoco import sysid

from ...errors import SysidRosError
from ...report import Trace
from ..checks.torque_validation import held_out_split, torque_validation, whole_arm
from ..problem.file import Problem
from ..problem.parameters import CachedBuild, build_parameters
from ..results import RunLog
from ..rollout import sequences as sd
from ..rollout.quiet import quiet_output
from ..rollout.residual import InitialStateRollout, ScaledResidual, batched_residual_fn
from .intervals import Spread, free_slices
from .load import Loaded
from .optimize import Fit
from .torque_fit import (
    ALONE_BELOW,
    FITTED_KINDS,
    FRICTION_BANDS_RAD_S,
    TAKE_BELOW,
    TIMING_HALF_WIDTHS,
    TorqueSpaceChoice,
    TorqueSpaceFit,
    choose_on_training,
    coupled_joints,
    outside_bounds,
    timing_words,
    torque_ratio,
)


def torque_first(run: Loaded) -> bool:
    """Whether the torque-space fit may stand alone (`window_fit: auto`): every free parameter is of a kind it
    writes (bodies' inertials, joint damping, friction loss, armature, effort offset) and no joint equality couples
    the joints; whether the data hold the torque it needs, and whether it is good enough, `_torque_first` finds."""
    free = [p for p in run.problem.parameters if not p.frozen]
    return (
        run.problem.window_fit == "auto"
        and bool(free)
        and all(p.kind in FITTED_KINDS for p in free)
        and not coupled_joints(run.model)
    )


@dataclass(frozen=True)
class Validated:
    """The identified model, the fit's metrics (the later stages add to them), the traces, the friction and the
    torque-space fit."""

    identified: mujoco.MjSpec  # the window fit's, or the torque-space fit's when chosen on the training rows
    metrics: dict[str, Any]
    traces: list[Trace]
    friction: dict[str, Any]
    torque_space: dict[str, Any]
    torque_warnings: tuple[str, ...] = ()  # about the torque-space choice (kept whichever model is carried)


def validate(run: Loaded, fit: Fit, spread: Spread, log: RunLog, window_fit: bool = True) -> Validated:
    """The fit's metrics and traces, then the identified model on the held-out data; `window_fit` False: `fit` is
    the start values, not optimized (the torque-space fit is weighed against them, without the tie rule)."""
    metrics, traces = _metrics(run, fit, spread, log)
    identified = run.spec.copy()
    sysid.apply_param_modifiers_spec(fit.opt_params, identified)
    traces += _validation(run, fit, identified, metrics, log)
    t0 = time.perf_counter()
    log.report("validation", 0.94, "held-out joint torque")
    torque_warnings: list[str] = []
    widths = window_half_widths(run, fit, spread) if window_fit else None
    torque = held_out_torque(run, identified, metrics, log.notes, torque_warnings, widths)
    log.timings["torque_check_s"] = time.perf_counter() - t0
    return Validated(torque.spec, metrics, traces, torque.friction, torque.torque_space, tuple(torque_warnings))


def _metrics(run: Loaded, fit: Fit, spread: Spread, log: RunLog) -> tuple[dict[str, Any], list[Trace]]:
    """The fit's metrics (training RMS, evaluations, cost, conditioning, residual ratios, time offset) and the
    training traces."""
    traces, sq, count = position_traces(
        "training", spread.preds, spread.records, run.maps, fit.residual_fn.segment_names
    )
    metrics: dict[str, Any] = {
        "training_position_rms_rad": {m.ros_joint: float(np.sqrt(s / count)) for m, s in zip(run.maps, sq)},
        "training_segments": len(run.train),
        "residual_evaluations": fit.evals[0],
        "parameter_points": fit.evals[1],
        "model_compiles": fit.build.compiles,
        "final_cost": 0.5 * float(sum(np.sum(r**2) for r in spread.res_star)),
        "jacobian_condition_number": condition_number(spread.jac),
        **log.metrics,
        "training_residual_ratio": {_signal_name(f.signal, run.maps): round(f.ratio, 4) for f in spread.fits},
    }
    if spread.scan is not None:
        metrics["command_offset_ms"] = spread.scan.offset_ms
        metrics["command_offset_cost_ratio"] = round(spread.scan.cost_ratio, 4)
    return metrics, traces


def _validation(run: Loaded, fit: Fit, identified: mujoco.MjSpec, metrics: dict[str, Any], log: RunLog) -> list[Trace]:
    """Held-out segments replayed on the identified model and on the start values (position RMS of each)."""
    if not run.val:
        return []
    problem = run.problem
    log.report("validation", 0.92, f"replaying {len(run.val)} held-out segments")
    traces, rms = replay_held_out(problem, identified, run.model, run.maps, run.val, fit.opt_params, fit.modify)
    metrics["validation_position_rms_rad"] = rms
    metrics["validation_segments"] = len(run.val)
    nominal = run.spec.copy()  # the same held-out replay on the start values (the nominal model)
    nominal_params = build_parameters(nominal, problem.parameters, run.starts)
    sysid.apply_param_modifiers_spec(nominal_params, nominal)
    _, start_rms = replay_held_out(problem, nominal, run.model, run.maps, run.val, nominal_params, fit.modify)
    metrics["validation_position_rms_rad_start"] = start_rms
    worse = [f"{j} {rms[j] * 1e3:.3g} mrad against {start_rms[j] * 1e3:.3g}" for j in rms if rms[j] > start_rms[j]]
    if worse:
        log.notes.append(f"held-out position RMS worse than with the start values: {', '.join(worse)}")
    return traces


def condition_number(jac: Any) -> float:
    """Condition number of the Jacobian with unit-norm columns: how well the motion separates the parameters."""
    jac = np.asarray(jac, dtype=float)
    norms = np.linalg.norm(jac, axis=0) if jac.ndim == 2 else np.zeros(0)
    return float(np.linalg.cond(jac / norms)) if norms.size and np.all(norms > 0) else math.inf


def _signal_name(signal: str, maps: Sequence[sd.JointMap]) -> str:
    """`<mjcf joint>_qpos` -> `<ros joint>_qpos`."""
    joint, _, kind = signal.rpartition("_")
    return f"{next((m.ros_joint for m in maps if m.mjcf_joint == joint), joint)}_{kind}"


def position_traces(
    split: str, preds: Sequence, records: Sequence, maps: Sequence[sd.JointMap], names: Sequence[str], limit: int = 4
) -> tuple[list[Trace], np.ndarray, int]:
    """Position traces of the first segments, and the sum of squared position errors per joint."""
    keys = [f"{m.mjcf_joint}_qpos" for m in maps]

    def flat(xs):
        return [y for x in xs for y in (x if isinstance(x, list) else [x])]

    preds, records = flat(preds), flat(records)
    sq, count, traces = np.zeros(len(maps)), 0, []
    for k, (pred, meas) in enumerate(zip(preds, records)):
        idx = [meas.signal_mapping[key][1][0] for key in keys]
        err = meas.data[:, idx] - pred.data[:, idx]
        sq += np.sum(err**2, axis=0)
        count += len(err)
        if k < limit:
            traces.append(
                Trace(
                    split,
                    names[k],
                    tuple(m.ros_joint for m in maps),
                    np.asarray(meas.times),
                    meas.data[:, idx].copy(),
                    pred.data[:, idx].copy(),
                )
            )
    return traces, sq, count


def replay_held_out(
    problem: Problem,
    identified: mujoco.MjSpec,
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    segments: Sequence[sd.Segment],
    opt_params: sysid.ParameterDict,
    modify: ScaledResidual,
) -> tuple[list[Trace], dict[str, float]]:
    """Replay held-out segments on the identified model (only their start states are estimated)."""
    val_ms = sd.model_sequences(problem.name + "_validation", identified.copy(), segments)
    params = opt_params.copy()
    for name in params.keys():
        params[name].frozen = True  # the identified spec already holds the values
    rollout = InitialStateRollout(val_ms, model, maps, params) if problem.estimate_initial_state else None
    fn = batched_residual_fn(
        [val_ms], build_model=CachedBuild(), modify_residual=modify, custom_rollout=rollout, resample_true=False
    )
    if rollout is not None:
        with quiet_output(problem.optimizer.quiet):  # start states enter almost linearly: 2 Gauss-Newton steps
            params, _ = sysid.optimize(params, fn, optimizer="mujoco", verbose=False, max_iters=2)
    _, preds, records = fn(params.as_vector(), params, return_pred_all=True)
    traces, sq, count = position_traces("validation", preds, records, maps, fn.segment_names)
    return traces, {m.ros_joint: float(np.sqrt(s / count)) for m, s in zip(maps, sq)}


@dataclass(frozen=True, eq=False)
class HeldOutTorque:
    """The torque check's outcome: the regression's friction document, the model the result carries (the
    window fit's, or the torque-space fit's when chosen on the training rows) and the torque-space fit's values."""

    friction: dict[str, Any]
    spec: mujoco.MjSpec
    torque_space: dict[str, Any]


def held_out_torque(
    run: Loaded,
    identified: mujoco.MjSpec,
    metrics: dict[str, Any],
    notes: list[str],
    warnings: list[str],
    window_widths: dict[str, tuple[float, ...]] | None,
) -> HeldOutTorque:
    """Held-out joint torque RMS per joint (`torque_check`) of the model file, the window fit, the torque-space
    fit (`torque_space`) and the regression with smooth friction, into the metrics; `identified` is the
    torque-space fit when it is chosen on the training rows (`torque_space.choose_on_training`), else the window
    fit: the held-out rows judge the choice, they do not make it. `window_widths` None: `identified` holds the
    start values (the window fit not run), labelled `start_values`. A model whose joints an equality couples (a
    URDF `<mimic>`) gets none of this: the regressor would treat the coupled joints as independent."""
    problem, model, maps, train_data, val_data = run.problem, run.model, run.maps, run.train_data, run.val_data
    coupled = coupled_joints(model)
    if coupled:
        notes.append(
            f"joint torque checks and the torque-space fit are not run: the model couples joints "
            f"({'; '.join(coupled)}: an equality constraint, e.g. a URDF <mimic>), which the arm regressor "
            "would treat as independent; the identified model is the window fit (whose rollouts hold the "
            "coupling)"
        )
        return HeldOutTorque({}, identified, {})
    reference = "window_fit" if window_widths is not None else "start_values"
    choice = None
    if whole_arm(model, maps):  # else `torque_validation` has nothing to check either
        try:
            choice = _torque_space_choice(problem, model, identified, maps, train_data, val_data, window_widths)
        except SysidRosError as exc:
            notes.append(f"the torque-space fit failed ({exc}); the identified model is the window fit")
    models = {"nominal": model, reference: identified.copy().compile()}
    if choice is not None:
        models["torque_space"] = choice.fit.spec.copy().compile()
    try:
        check = torque_validation(model, maps, train_data, val_data, models, periodic=run.periodic)
    except SysidRosError as exc:
        notes.append(f"torque-space validation failed: {exc}")
        return HeldOutTorque({}, identified, {})
    if check is None:
        return HeldOutTorque({}, identified, {})
    rms, chosen, document = check.rms_nm, identified, {}
    taken = False
    if choice is not None:
        space, taken = choice.fit, choice.taken
        held_out_ratio = torque_ratio(rms["torque_space"], rms[reference], check.joints)
        chosen = space.spec if taken else identified
        outside = outside_bounds(space, problem.parameters)
        document = {
            "taken": taken,
            f"training_torque_ratio_to_{reference}": round(choice.ratio, 4),
            "cross_validation_folds": choice.folds,
            "cross_validation_rms_nm": choice.cv_rms_nm,
            f"held_out_torque_ratio_to_{reference}": round(held_out_ratio, 4),
            **space.document(),
            "outside_problem_bounds": outside,
        }
        notes.append(_choice_note(taken, choice, space))
        worse = choice.worse_than_file()
        if worse:
            warnings.append(
                f"the identified model ({'torque-space' if taken else 'window'} fit) predicts its own training "
                "rows' joint torque worse than the model file on "
                + ", ".join(
                    f"{j} ({choice.cv_rms_nm['torque_space' if taken else reference][j]:.3g} vs "
                    f"{choice.cv_rms_nm['nominal'][j]:.3g} N m)"
                    for j in worse
                )
                + f" (time-blocked cross-validation, {choice.folds} folds): check the model file and the data"
            )
        if taken and outside:
            notes.append(
                "the torque-space fit puts values outside the problem's bounds (it is not bounded; the "
                f"window fit is): {', '.join(outside)}"
            )
    rms["identified"] = rms["torque_space" if taken else reference]
    metrics["held_out_torque_rms_nm"] = check.metrics()
    if check.friction is not None:
        metrics["regression_base_parameters"] = check.base_document()
    if check.periodic:
        metrics["regression_periodic"] = check.periodic
        notes.append(check.periodic_note())
        if not val_data:
            notes.append(
                "the averaged periods hold the training record's last quarter too: the regression's held-out "
                "torque (regression_friction) is not out of sample; give validation data for that check"
            )
    elif run.periodic:
        notes.append(
            "whole-arm regression through the 0.05 s Savitzky-Golay filter: only some training records repeat "
            f"whole periods ({', '.join(run.periodic)}); the periods are averaged when every one does"
        )
    metrics["identified_model"] = "torque_space" if taken else reference
    worse = [j for j in check.joints if rms["identified"][j] > rms["nominal"][j]]
    if worse:
        notes.append(
            f"held-out joint torque ({check.held_out}) predicted worse by the identified model than by "
            "the model file on "
            + ", ".join(f"{j} ({rms['identified'][j]:.3g} vs {rms['nominal'][j]:.3g} N m)" for j in worse)
        )
    notes += check.friction_notes(
        {
            m.ros_joint
            for m in maps
            for p in problem.parameters
            if p.kind == "joint_effort_offset" and p.target == m.mjcf_joint
        }
    )
    return HeldOutTorque(check.friction_document(), chosen, document)


def _torque_space_choice(
    problem: Problem,
    model: mujoco.MjModel,
    identified: mujoco.MjSpec,
    maps: Sequence[sd.JointMap],
    train_data: Sequence,
    val_data: Sequence,
    window_widths: dict[str, tuple[float, ...]],
) -> TorqueSpaceChoice | None:
    """The torque-space fit and the choice, both on the rows the regression is fitted on (the held-out rows left
    out)."""
    fit_parts, _, _ = held_out_split(train_data, val_data)
    return choose_on_training(identified, problem.parameters, model, maps, fit_parts, window_widths)


def window_half_widths(run: Loaded, fit: Fit, spread: Spread) -> dict[str, tuple[float, ...]]:
    """The window fit's 95 % half-widths of each free parameter in its own coordinates (inf in a null direction
    of the data), as `parameter_results` reads them before any conversion."""
    return {
        name: tuple(math.inf if n else float(v) for v, n in zip(spread.intervals[k], spread.null[k]))
        for name, k in free_slices(run.problem.parameters, fit.opt_params).items()
    }


def _choice_note(taken: bool, choice: TorqueSpaceChoice, space: TorqueSpaceFit) -> str:
    what = (
        f"{len(space.bodies)} bodies' inertials"
        + (" (the problem form: a `body_mass` scales its body)" if space.form == "problem" else "")
        + f" and {sum(len(t) for t in space.joints.values())} joint terms "
        "by weighted least squares on the measured torque"
    )
    parts = (
        (space.projected, "bodies projected onto physical values"),
        (space.held_at_zero, "joint terms held at 0 (negative when free)"),
    )
    extra = "".join(f"; {len(x)} {label}" for x, label in parts if x)
    wider = {j: b for j, b in space.friction_bands.items() if b > FRICTION_BANDS_RAD_S[0]}
    if wider:
        extra += "; friction loss over a wider band on " + ", ".join(f"{j} {b:g} rad/s" for j, b in wider.items())
    if space.velocity_lag_s:
        extra += (
            f"; the measured velocity lags the positions' derivative by {1e3 * space.velocity_lag_s:.1f} ms "
            "(a drive's filtered estimate): the friction loss reads it that much earlier"
        )
    moved = space.timing_sensitive()
    if moved:
        worst = ", ".join(f"{k} {v:.1f}" for k, v in list(moved.items())[:3])
        extra += (
            f"; {len(moved)} values move by over {TIMING_HALF_WIDTHS:g}x their noise half-width when the torque is "
            f"read half a sample later ({worst} half-widths): their intervals include that move"
        )
    if choice.reference == "start_values":
        how = (
            f"over {choice.folds} time-blocked folds of the training rows (each scored by a fit on the others) its "
            f"joint torque is {choice.ratio:.2f}x the start values' (geometric mean over the joints)"
        )
        return (
            f"the identified model is the torque-space fit ({what}{extra}): {how}, below {TAKE_BELOW:g}x, so the "
            "window fit was not run (`window_fit: always` runs it); `parameters` hold its values and "
            "block-bootstrap intervals; the training and held-out position replays are the start values'"
        )
    how = (
        f"over {choice.folds} time-blocked folds of the training rows (each scored by a fit on the others; the "
        f"window fit saw them all) its joint torque is {choice.ratio:.2f}x the window fit's (geometric mean over "
        "the joints)"
    )
    if taken:
        return (
            f"the identified model is the torque-space fit ({what}{extra}): {how}; `parameters` hold its values "
            "and block-bootstrap intervals (the window fit's are under `window_fit_parameters`); the held-out "
            "position replay is the window fit's"
        )
    return (
        f"the identified model is the window fit: the torque-space fit ({what}), {how}; taken below {TAKE_BELOW:g}x, "
        f"or below {1 / TAKE_BELOW:.3g}x when it resolves every parameter the problem asks with narrower intervals"
    )


def window_fit_reason(space: dict) -> str:
    """Why `window_fit: auto` runs the window fit after all, from the torque-space fit's document (`space`)."""
    ratio = space.get("training_torque_ratio_to_start_values")
    timing = space.get("timing_sensitive") or {}
    if timing:
        return timing_words(timing)
    if ratio is not None and ratio < TAKE_BELOW:
        return (
            f"the torque-space fit predicts the training torque {ratio:.2f}x as well as the start values but leaves "
            "some of the problem's parameters unresolved (infinite half-widths; it stands alone so only below "
            f"{ALONE_BELOW:g}x); the window fit may resolve them"
        )
    if ratio is not None:
        return (
            f"the torque-space fit alone predicts the training torque {ratio:.2f}x as well as the start values "
            f"(it stands alone below {TAKE_BELOW:g}x)"
        )
    return "no torque-space fit of these records (no measured torque on every joint, or too few rows)"
