"""A friction loss over a velocity band as the torque-space fit writes it (`sim.friction.hold_band`): MuJoCo's own
`mj_inverse` gives frictionloss x clip(qvel / band) on the Panda's seven joints, and `friction_bands` reads back
the band of any model (the written one, MuJoCo's default soft constraint, a stiff one)."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from sysid_ros.core.sim import friction_bands, hold_band

MODEL = Path(__file__).parent / "data/real/panda_menagerie/panda_torque.xml"
JOINTS = [f"joint{k}" for k in range(1, 8)]
FRICTION = np.array([0.5, 0.8, 0.3, 0.6, 0.2, 0.1, 0.3])
BANDS = np.array([0.01, 0.03, 0.1, 0.1, 0.01, 0.03, 0.1])


def without_friction() -> mujoco.MjSpec:
    spec = mujoco.MjSpec.from_file(str(MODEL))
    for joint in JOINTS:
        spec.joint(joint).frictionloss = 0.0
    return spec


def banded() -> mujoco.MjModel:
    spec = without_friction()
    invweight0 = spec.copy().compile().dof_invweight0
    for k, joint in enumerate(JOINTS):
        hold_band(spec.joint(joint), FRICTION[k], BANDS[k], invweight0[k])
    return spec.compile()


def test_mj_inverse_gives_the_friction_loss_over_its_band():
    """Random poses, velocities through and beyond each band and accelerations of 5 rad/s^2: the friction
    mj_inverse adds is frictionloss x clip(qvel / band) within 0.5 % of the friction loss (the acceleration's
    share, qacc / B, is about 0.2 % of it)."""
    model, plain = banded(), without_friction().compile()
    data, bare = mujoco.MjData(model), mujoco.MjData(plain)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(300):
        data.qpos[:7] = model.qpos0[:7] + rng.normal(0.0, 0.3, 7)
        data.qvel[:7] = rng.normal(0.0, 0.1, 7) * rng.choice([0.1, 1.0, 3.0], 7)
        data.qacc[:7] = rng.normal(0.0, 5.0, 7)
        bare.qpos[:], bare.qvel[:], bare.qacc[:] = data.qpos, data.qvel, data.qacc
        mujoco.mj_inverse(model, data)
        mujoco.mj_inverse(plain, bare)
        friction = (data.qfrc_inverse - bare.qfrc_inverse)[:7]
        expected = FRICTION * np.clip(data.qvel[:7] / BANDS, -1.0, 1.0)
        worst = max(worst, float(np.max(np.abs(friction - expected) / FRICTION)))
    assert worst < 5e-3, worst


def test_friction_bands_reads_what_any_model_holds():
    assert friction_bands(banded())[:7] == pytest.approx(BANDS, rel=1e-9)
    spec = mujoco.MjSpec.from_file(str(MODEL))
    for k, joint in enumerate(JOINTS):
        spec.joint(joint).frictionloss = FRICTION[k]
    default = friction_bands(spec.compile())[:7]  # solref (0.02, 1), solimp 0.9: a band of a few mrad/s
    assert np.all((default > 1e-4) & (default < 0.01)), default
    for joint in JOINTS:
        spec.joint(joint).solref_friction = (-1.0, -1.0e4)
        spec.joint(joint).solimp_friction = (0.99, 0.99, 0.001, 0.5, 2.0)
    assert np.all(friction_bands(spec.compile())[:7] < 1e-5)  # stiff: a sign
    spec.joint("joint1").frictionloss = 0.0
    assert friction_bands(spec.compile())[0] == 0.0  # no friction loss, no band
