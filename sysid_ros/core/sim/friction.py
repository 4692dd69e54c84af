"""A joint's friction loss over a velocity band, as MuJoCo holds it, written and read.

MuJoCo's friction-loss constraint gives, in `mj_inverse` and in a step alike, the force
clamp(-(qacc + B qvel) / R, +-frictionloss), with R = dof_invweight0 (1 - imp) / imp (imp: the impedance, solimp's
dmin at zero violation) and B the reference damping (a direct `solref` (-k, -b): B = b / dmax; a time constant:
B = 2 / (dmax timeconst dampratio)). Below the accelerations' scale that is frictionloss x clip(qvel / band) with
band = frictionloss R / B: a ramp through zero velocity that saturates at the friction loss. `hold_band` writes a
band (the impedance at MuJoCo's floor, so the acceleration term is 1e-4 of the velocity's), `friction_bands` reads
the band any model holds (a stiff constraint's is close to 0: a sign).
"""

from __future__ import annotations

import mujoco
import numpy as np

IMPEDANCE = 1.0e-4
"""The friction constraint's impedance where a band is written: MuJoCo's floor (mjMINIMP), the softest it holds,
so R is large and qacc / B (the acceleration's share) stays below 0.2 % of the friction loss (measured on the
Panda at 5 rad/s^2, test_friction_band)."""


def hold_band(joint: mujoco.MjsJoint, frictionloss: float, band_rad_s: float, invweight0: float) -> None:
    """Write `frictionloss` (N m) acting as frictionloss x clip(qvel / `band_rad_s`) into `joint` (a spec's), for a
    DOF whose compiled `dof_invweight0` is `invweight0` (it sets R: compile the model with its final inertias
    first)."""
    joint.frictionloss = frictionloss
    joint.solimp_friction = [IMPEDANCE, IMPEDANCE, 0.001, 0.5, 2.0]
    joint.solref_friction = [-1.0, -frictionloss * invweight0 * (1.0 - IMPEDANCE) / band_rad_s]


def friction_bands(model: mujoco.MjModel) -> np.ndarray:
    """Each DOF's friction band in rad/s (frictionloss R / B, see the module's docstring); 0 where it has no
    friction loss."""
    dmin = np.clip(model.dof_solimp[:, 0], mujoco.mjMINIMP, mujoco.mjMAXIMP)
    dmax = np.clip(model.dof_solimp[:, 1], mujoco.mjMINIMP, mujoco.mjMAXIMP)
    r = model.dof_invweight0 * (1.0 - dmin) / dmin
    solref = model.dof_solref
    timeconst = np.maximum(solref[:, 0], 2.0 * model.opt.timestep)  # MuJoCo's refsafe
    damping = np.where(
        solref[:, 0] < 0, -solref[:, 1] / dmax, 2.0 / (dmax * timeconst * np.maximum(solref[:, 1], 1e-12))
    )
    return np.where(model.dof_frictionloss > 0, model.dof_frictionloss * r / np.maximum(damping, 1e-300), 0.0)
