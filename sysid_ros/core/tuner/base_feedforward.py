"""The feed-forward an arm plant adds by itself, as a joint model, so a twin of one joint can add the same.

An arm plant adds mj_inverse of the robot's nominal model to every command. For one joint moving while the
others hold still, that torque is exactly J qdd + gs sin q + gc cos q (a rigid subtree turning about a fixed
axis; the nominal model has no damping or friction loss), so three coefficients fitted to mj_inverse at a
few points reproduce it; the fit's residual is checked.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import mujoco
import numpy as np

from ..errors import ModelError
from ..linear import JointModel
from ..tapes import Tape
from .plants.joint import Plant, Telemetry
from .servo import Controller


def joint_base_feedforward(
    nominal: mujoco.MjModel, joints: tuple[str, ...], joint: str, home: dict[str, float]
) -> JointModel:
    """mj_inverse's torque on `joint` as it moves alone (the other `joints` at `home`), as a JointModel."""
    data = mujoco.MjData(nominal)
    for name in joints:
        data.qpos[nominal.joint(name).qposadr[0]] = home[name]
    qadr, dadr = nominal.joint(joint).qposadr[0], nominal.joint(joint).dofadr[0]
    q = home[joint] + np.linspace(-1.0, 1.0, 9)  # inside any joint limit (a limit would add its force)
    rows, torque = [], []
    for qk in q:
        for qdd in (0.0, 1.0):
            data.qpos[qadr], data.qvel[:], data.qacc[:] = qk, 0.0, 0.0
            data.qacc[dadr] = qdd
            mujoco.mj_inverse(nominal, data)
            rows.append((qdd, np.sin(qk), np.cos(qk)))
            torque.append(data.qfrc_inverse[dadr])
    a, b = np.array(rows), np.array(torque)
    theta, *_ = np.linalg.lstsq(a, b, rcond=None)
    if np.max(np.abs(a @ theta - b)) > 1e-6 * (1.0 + np.max(np.abs(b))):
        raise ModelError(f"the nominal model's torque on {joint} is not J qdd + gs sin q + gc cos q", joint=joint)
    return JointModel(inertia_kg_m2=float(theta[0]), gravity_sin_nm=float(theta[1]), gravity_cos_nm=float(theta[2]))


def plus(a: JointModel | None, b: JointModel) -> JointModel:
    """The sum of two joint models' terms (`a`'s Coulomb band)."""
    if a is None:
        return b
    values = {
        f.name: getattr(a, f.name) + getattr(b, f.name) for f in fields(JointModel) if f.name != "coulomb_band_rad_s"
    }
    return JointModel(**values, coulomb_band_rad_s=a.coulomb_band_rad_s)


@dataclass
class WithBase:
    """A plant (a twin) whose controllers also get `base` feed-forward, as the real plant adds it itself."""

    plant: Plant
    base: JointModel

    def __getattr__(self, name: str):
        return getattr(self.plant, name)

    def play(self, tape: Tape, controller: Controller) -> Telemetry:
        return self.plant.play(
            tape, Controller(controller.gains, plus(controller.feedforward, self.base), controller.label)
        )
