"""Warm start from the regression estimator where its parameters overlap the problem's."""

from __future__ import annotations

import math
from typing import Sequence

import mujoco
import numpy as np
from mujoco import sysid

from .. import sysid_data as sd
from .problem import Problem

def pendulum_warm_start(problem: Problem, model: mujoco.MjModel, maps: Sequence[sd.JointMap],
                         data: Sequence[tuple[str, list]]) -> dict[str, float]:
    """The regression estimate (fit_pendulum) of mass, damping and friction loss of a one-joint pendulum."""
    from ..derivatives import savgol_derivatives
    from ..joint_model import fit_pendulum

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
    tau = (commands.held_at(samples.time_ns)[:, commands.joint_names.index(maps[0].ros_joint)]
           if commands is not None else samples.column("effort", maps[0].ros_joint))
    if length <= 0 or not np.all(np.isfinite(tau)):
        return {}
    fit = fit_pendulum(savgol_derivatives(q, dt_s), tau, length_m=length, rotor_inertia_kg_m2=rot)
    values = fit.fit.as_dict()
    out = {}
    for p in problem.parameters:
        if p.kind in ("body_mass", "body_mass_com") and model.body(p.target).id == body:
            out[p.name] = values["mass_kg"]
        elif p.kind == "joint_damping" and p.target == maps[0].mjcf_joint:
            out[p.name] = values["damping_nm_s_rad"]
        elif p.kind == "joint_frictionloss" and p.target == maps[0].mjcf_joint:
            out[p.name] = values["friction_nm"]
    return {k: v for k, v in out.items() if math.isfinite(v)}


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
