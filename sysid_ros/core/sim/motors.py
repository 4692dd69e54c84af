"""A joint's motor in a MuJoCo model, and the torque-sensor offset it holds.

A torque sensor's offset (the measured effort minus the torque the joint gets) is held as the closest MuJoCo
term: a constant bias on the joint's motor (`biastype` affine, `biasprm[1:]` zero), so the effort replayed
as its control reaches the joint less the offset: offset = -gear * biasprm[0]. `effort_offset` reads it
from an MjSpec, `set_effort_offset` writes it there, `effort_offsets` reads every DOF's from an MjModel.
"""

from __future__ import annotations

import mujoco
import numpy as np


def joint_motor(spec: mujoco.MjSpec, joint: str) -> mujoco.MjsActuator | None:
    """The first actuator that drives `joint` directly (the joint's motor), or None."""
    return next((a for a in spec.actuators if a.trntype == mujoco.mjtTrn.mjTRN_JOINT and a.target == joint), None)


def constant_bias(biastype: int, biasprm: np.ndarray) -> bool:
    """Whether a motor's bias is a constant (affine with no position or velocity term): an effort offset."""
    return int(biastype) == int(mujoco.mjtBias.mjBIAS_AFFINE) and not np.any(np.asarray(biasprm[1:], dtype=float))


def effort_offset(spec: mujoco.MjSpec, joint: str) -> float:
    """The effort offset `joint`'s motor holds in `spec` (0 without a motor or a bias)."""
    motor = joint_motor(spec, joint)
    if motor is None or motor.biastype != mujoco.mjtBias.mjBIAS_AFFINE:
        return 0.0
    return -float(motor.gear[0]) * float(motor.biasprm[0])


def set_effort_offset(actuator: mujoco.MjsActuator, offset_nm: float, gear: float) -> None:
    """Make `actuator` (of gear `gear`) hold the effort offset `offset_nm` as its constant bias."""
    actuator.biastype = mujoco.mjtBias.mjBIAS_AFFINE
    actuator.biasprm[0] = -float(offset_nm) / gear


def effort_offsets(model: mujoco.MjModel) -> np.ndarray:
    """Per DOF, the effort offset its joint motors hold in a compiled model."""
    out = np.zeros(model.nv)
    for a in range(model.nu):
        if int(model.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT) and int(model.actuator_biastype[a]) == int(
            mujoco.mjtBias.mjBIAS_AFFINE
        ):
            dof = int(model.jnt_dofadr[model.actuator_trnid[a, 0]])
            out[dof] -= float(model.actuator_gear[a, 0] * model.actuator_biasprm[a, 0])
    return out
