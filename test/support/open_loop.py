"""Open-loop replay of a model on a held-out control record (the regression lesson's validation), for tests and
benches: a model with fields edited by name, simulated with each control held for a step."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass

import mujoco
import numpy as np

from sysid_ros.core.errors import ModelError


@dataclass(frozen=True, eq=False)
class Validation:
    """Open-loop prediction against a measured angle: RMS over the whole record and over its first second."""

    predicted_q: np.ndarray
    rms_rad: float
    rms_first_s_rad: float


def with_parameters(model: mujoco.MjModel, values: Mapping[str, float]) -> mujoco.MjModel:
    """A copy of `model` with fields set by `"field:name"` keys, e.g. `body_mass:pole`, `dof_damping:hinge`.

    `body_*` fields take a body name, `dof_*` and `jnt_*` a joint name, `actuator_*` an actuator name.
    Derived constants are recomputed (mj_setConst) after the edit.
    """
    out = copy.deepcopy(model)
    for key, value in values.items():
        field_name, _, obj = key.partition(":")
        kinds = {
            "body_": mujoco.mjtObj.mjOBJ_BODY,
            "dof_": mujoco.mjtObj.mjOBJ_JOINT,
            "jnt_": mujoco.mjtObj.mjOBJ_JOINT,
            "actuator_": mujoco.mjtObj.mjOBJ_ACTUATOR,
        }
        kind = next((k for p, k in kinds.items() if field_name.startswith(p)), None)
        if kind is None or not hasattr(out, field_name):
            raise ModelError("unknown model field (use body_*, dof_*, jnt_* or actuator_* with ':name')", field=key)
        idx = mujoco.mj_name2id(out, kind, obj)
        if idx < 0:
            raise ModelError("no such object in the model", field=key)
        if field_name.startswith("dof_"):
            idx = int(out.jnt_dofadr[idx])
        getattr(out, field_name)[idx] = value
    data = mujoco.MjData(out)
    mujoco.mj_setConst(out, data)
    return out


def simulate_open_loop(
    model: mujoco.MjModel, ctrl: np.ndarray, qpos0: np.ndarray | None = None, qvel0: np.ndarray | None = None
) -> np.ndarray:
    """Joint positions recorded before each step while `ctrl[k]` is held for step k (mj_step loop)."""
    controls = np.asarray(ctrl, dtype=np.float64).reshape(len(ctrl), -1)
    if controls.shape[1] != model.nu:
        raise ModelError(f"control has {controls.shape[1]} columns, the model has {model.nu} actuators")
    data = mujoco.MjData(model)
    if qpos0 is not None:
        data.qpos[:] = qpos0
    if qvel0 is not None:
        data.qvel[:] = qvel0
    out = np.empty((len(controls), model.nq))
    for k, u in enumerate(controls):
        out[k] = data.qpos
        data.ctrl[:] = u
        mujoco.mj_step(model, data)
    return out


def validate_open_loop(
    model: mujoco.MjModel,
    ctrl: np.ndarray,
    measured_q: np.ndarray,
    *,
    qpos0: np.ndarray | None = None,
    qvel0: np.ndarray | None = None,
    first_s: float = 1.0,
) -> Validation:
    """Simulate `model` open loop on a held-out control record and compare with the measured angle."""
    predicted = simulate_open_loop(model, ctrl, qpos0, qvel0)
    measured = np.asarray(measured_q, dtype=np.float64).reshape(predicted.shape[0], -1)
    err = predicted[:, : measured.shape[1]] - measured
    head = max(1, int(round(first_s / model.opt.timestep)))
    return Validation(predicted, float(np.sqrt(np.nanmean(err**2))), float(np.sqrt(np.nanmean(err[:head] ** 2))))
