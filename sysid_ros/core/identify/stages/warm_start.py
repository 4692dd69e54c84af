"""The run's second stage, `start_values`: the parameters at their start values, warm-started from the
regression estimator where its parameters overlap the problem's, and the optional prior toward them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
from mujoco import sysid

from ...errors import ModelError, SysidRosError
from ...linear import ArmRegressor, fit_pendulum
from ...signals import JointCommands, JointSamples, savgol_derivatives
from ..checks.torque_validation import MAX_TORQUE_ROWS, held_out_split, joint_order, torque_rows
from ..problem.file import Problem
from ..problem.parameters import build_parameters
from ..problem.plausibility import Prior, make_prior
from ..results import RunLog
from ..rollout import sequences as sd
from .load import Loaded
from .torque_fit import coupled_joints


@dataclass(frozen=True)
class Start:
    """The parameters at their start values (warm-started where the regression helps) and the prior."""

    params: sysid.ParameterDict
    prior: Prior | None
    warm: dict[str, float]
    regression: dict[str, tuple[float, float]]  # the warm start's estimates and half-widths, unclipped


def start_values(run: Loaded, log: RunLog) -> Start:
    """Start values: the regression's estimate where it overlaps the problem (a pendulum, or a whole arm when it
    predicts held-out torque better), else the given ones; and the prior toward them when asked for."""
    problem = run.problem
    params = build_parameters(run.spec, problem.parameters, run.starts)
    prior = make_prior(problem.regularization_weight, params, [p.name for p in problem.parameters])
    warm: dict[str, float] = {}
    regression: dict[str, tuple[float, float]] = {}
    if problem.warm_start:
        try:
            regression = pendulum_warm_start(problem, run.model, run.maps, run.train_data)
            warm = apply_warm_start(params, {name: v for name, (v, _) in regression.items()})
        except SysidRosError as exc:
            log.notes.append(f"regression warm start failed: {exc}")
        if not warm and len(run.maps) > 1:
            warm = arm_warm_start_if_better(
                problem, run.model, run.maps, run.train_data, run.val_data, params, log.notes, log.metrics
            )
        if not warm:
            log.notes.append(
                "no regression warm start for this problem (one-joint pendulums, or every joint of an "
                "arm with body_mass / joint_damping / joint_frictionloss / joint_armature parameters)"
            )
    log.report("warm_start", 0.15, f"warm start {warm}" if warm else "starting from the given values")
    return Start(params, prior, warm, regression)


def pendulum_warm_start(
    problem: Problem, model: mujoco.MjModel, maps: Sequence[sd.JointMap], data: Sequence[tuple[str, list]]
) -> dict[str, tuple[float, float]]:
    """The regression estimate (fit_pendulum) of mass, damping and friction loss of a one-joint pendulum,
    each as (value, 95 % half-width of its block bootstrap)."""
    if len(maps) != 1:
        return {}
    jid = model.joint(maps[0].mjcf_joint).id
    body = int(model.jnt_bodyid[jid])
    subtree = [b for b in range(model.nbody) if b == body or _is_descendant(model, b, body)]
    if len(subtree) != 1 or model.body_mass[body] <= 0:
        return {}
    axis = model.jnt_axis[jid] / np.linalg.norm(model.jnt_axis[jid])
    com = model.body_ipos[body] - model.jnt_pos[jid]
    length = float(np.linalg.norm(com - axis * (com @ axis)))
    rot = float(axis @ np.diag(model.body_inertia[body]) @ axis) + float(model.dof_armature[model.jnt_dofadr[jid]])
    q, tau = [], []
    samples, commands = data[0][1][0]
    dt_s = float(np.median(np.diff(samples.time_s)))
    q = samples.column("position", maps[0].ros_joint)
    tau = (
        commands.held_at(samples.time_ns)[:, commands.joint_names.index(maps[0].ros_joint)]
        if commands is not None
        else samples.column("effort", maps[0].ros_joint)
    )
    if length <= 0 or not np.all(np.isfinite(tau)):
        return {}
    fit = fit_pendulum(savgol_derivatives(q, dt_s), tau, length_m=length, rotor_inertia_kg_m2=rot)
    values = {n: (float(v), float(h)) for n, v, h in zip(fit.fit.names, fit.fit.values, fit.fit.half_width_95)}
    out = {}
    for p in problem.parameters:
        if p.kind in ("body_mass", "body_mass_com") and model.body(p.target).id == body:
            out[p.name] = values["mass_kg"]
        elif p.kind == "joint_damping" and p.target == maps[0].mjcf_joint:
            out[p.name] = values["damping_nm_s_rad"]
        elif p.kind == "joint_frictionloss" and p.target == maps[0].mjcf_joint:
            out[p.name] = values["friction_nm"]
    return {k: v for k, v in out.items() if math.isfinite(v[0])}


def _is_descendant(model: mujoco.MjModel, b: int, ancestor: int) -> bool:
    while b > 0:
        b = int(model.body_parentid[b])
        if b == ancestor:
            return True
    return False


def apply_warm_start(params: sysid.ParameterDict, warm: dict[str, float]) -> dict[str, float]:
    """Put regression estimates into the start values, kept strictly inside the bounds."""
    used = {}
    for name, v in warm.items():
        p = params[name]
        if p.frozen:
            continue
        lo, hi = float(p.min_value[0]), float(p.max_value[0])
        margin = 1e-3 * (hi - lo)
        value = min(max(v, lo + margin), hi - margin)
        p.nominal = p.nominal.copy()
        p.nominal[0] = value
        p.value = p.nominal.copy()
        used[name] = value
    return used


ARM_JOINT_TERMS = {
    "joint_damping": "viscous",
    "joint_frictionloss": "coulomb",
    "joint_armature": "armature",
    "joint_effort_offset": "offset",
}


@dataclass(frozen=True)
class ArmWarmStart:
    """The whole-arm regression estimate of the problem's parameters, and its held-out torque check."""

    values: dict[str, float]
    torque_rms_start_nm: dict[str, float]  # held-out torque error with the problem's start values
    torque_rms_warm_nm: dict[str, float]  # ... with the regression estimate
    held_out: str  # which data the check used

    @property
    def better(self) -> bool:
        return sum(v**2 for v in self.torque_rms_warm_nm.values()) < sum(
            v**2 for v in self.torque_rms_start_nm.values()
        )


def arm_warm_start(
    problem: Problem,
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    train: Sequence[tuple[str, list]],
    held_out: Sequence[tuple[str, list]] = (),
    every: int = 2,
) -> ArmWarmStart | None:
    """Masses and joint terms of a multi-joint problem from the whole-arm regressor, checked on held-out data.

    The torque is linear in the parameters a problem names: a `body_mass` scales its body's 10 inertial
    parameters (its shape is kept), a joint term is one regressor column. With the other parameters at the
    model's values, tau - W theta_model = (W S) delta is solved by least squares on scaled columns; the
    minimum-norm solution leaves directions the data do not determine (masses on one axis) at the start.
    The check: held-out RMS torque error per joint with the start values and with the estimate (the
    validation data, else the last quarter of the training record, which the fit then leaves out).
    """
    if len(maps) < 2 or len(maps) != model.nv:
        return None
    wanted = [p for p in problem.parameters if not p.frozen and (p.kind == "body_mass" or p.kind in ARM_JOINT_TERMS)]
    if not wanted:
        return None
    try:
        arm = ArmRegressor(model, joint_terms=("viscous", "coulomb", "armature", "offset"))
    except ModelError:
        return None
    theta0 = arm.true_parameters()
    columns = np.zeros((arm.n_params, len(wanted)))
    start = np.zeros(len(wanted))
    for k, p in enumerate(wanted):
        if p.kind == "body_mass":
            body = model.body(p.target).id
            i = arm.names.index(f"{model.body(body).name}.m")
            columns[i : i + 10, k] = theta0[i : i + 10] / model.body_mass[body]
            start[k] = float(model.body_mass[body])
        else:
            i = arm.names.index(f"{p.target}.{ARM_JOINT_TERMS[p.kind]}")
            columns[i, k] = 1.0
            start[k] = theta0[i]
    base = theta0 - columns @ start  # theta = base + columns @ values

    def rows(parts: Sequence[tuple[JointSamples, JointCommands | None]]):
        ws, taus = [], []
        step = max(every, -(-sum(len(samples) for samples, _ in parts) // MAX_TORQUE_ROWS))  # memory bounded
        for samples, commands in parts:
            got = torque_rows(model, maps, samples, commands, step)
            if got is None:
                continue
            deriv, tau, ok = got
            w = arm.compute(deriv.q[ok], deriv.qd[ok], deriv.qdd[ok])
            ws.append(w)
            taus.append(tau[ok])
        return (np.concatenate(ws), np.concatenate(taus)) if ws else (None, None)

    fit_parts, check_parts, label = held_out_split(train, held_out)
    w_fit, tau_fit = rows(fit_parts)
    w_chk, tau_chk = rows(check_parts)
    if w_fit is None or w_chk is None:
        return None
    a = (w_fit @ columns).reshape(-1, len(wanted))
    b = (tau_fit - w_fit @ base).reshape(-1) - a @ start
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0
    delta = np.linalg.lstsq(a / scale, b, rcond=1e-8)[0] / scale
    values = start + delta
    names = joint_order(model, maps)

    def rms(v: np.ndarray) -> dict[str, float]:
        err = tau_chk - w_chk @ (base + columns @ v)
        return {j: float(np.sqrt(np.mean(err[:, k] ** 2))) for k, j in enumerate(names)}

    return ArmWarmStart(
        {p.name: float(v) for p, v in zip(wanted, values) if math.isfinite(v)}, rms(start), rms(values), label
    )


def arm_warm_start_if_better(
    problem: Problem,
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    train_data: Sequence,
    val_data: Sequence,
    params: sysid.ParameterDict,
    notes: list[str],
    metrics: dict[str, Any],
) -> dict[str, float]:
    """The whole-arm regression warm start, used only when it predicts held-out torque better than the start (and
    never on a model whose joints an equality couples: the regressor treats them as independent)."""
    coupled = coupled_joints(model)
    if coupled:
        notes.append(f"whole-arm regression warm start not run: the model couples joints ({'; '.join(coupled)})")
        return {}
    try:
        arm = arm_warm_start(problem, model, maps, train_data, val_data)
    except SysidRosError as exc:
        notes.append(f"whole-arm regression warm start failed: {exc}")
        return {}
    if arm is None:
        return {}
    metrics["warm_start_torque_check"] = {
        "held_out": arm.held_out,
        "start_rms_nm": arm.torque_rms_start_nm,
        "warm_start_rms_nm": arm.torque_rms_warm_nm,
        "used": arm.better,
    }

    def total(rms):
        return math.sqrt(sum(v**2 for v in rms.values()))

    text = (
        f"held-out torque RMS {total(arm.torque_rms_warm_nm):.3g} N m with the regression estimate, "
        f"{total(arm.torque_rms_start_nm):.3g} N m with the start values ({arm.held_out})"
    )
    if not arm.better:
        notes.append(f"whole-arm regression warm start not used: {text}")
        return {}
    notes.append(f"whole-arm regression warm start: {text}")
    return apply_warm_start(params, arm.values)
