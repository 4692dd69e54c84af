"""Helpers of `test_online_steady` that other tests and benches use too:
ten minutes of steady operation: the online estimator must raise no change and keep the mass.
"""

from __future__ import annotations

from functools import lru_cache

import mujoco
import numpy as np

from support.online_pendulum import NOISE, multisine_reference
from sysid_ros.core.signals import JointSamples
from sysid_ros.core.sim import SimRobot

DURATION_S = 600.0


CAP_NM, KP, KD = 3.0, 80.0, 6.0


def steady_record(duration_s: float, seed: int = 0, mass_kg: float | None = None) -> JointSamples:
    """PD tracking of the five-sine reference on the embedded pendulum, noise added as SimRobot does."""
    robot = SimRobot("pendulum", physics={"pole.mass": mass_kg} if mass_kg else None)
    model, data = robot.model, robot.data
    n = int(round(duration_s / model.opt.timestep))
    t_ref, p_ref, v_ref = multisine_reference(duration_s, seed)
    t = np.arange(n) * model.opt.timestep
    ref, vref = np.interp(t, t_ref, p_ref), np.interp(t, t_ref, v_ref)
    q, tau = np.empty(n), np.empty(n)
    qpos, qvel, ctrl = data.qpos, data.qvel, data.ctrl
    for k in range(n):
        u = KP * (ref[k] - qpos[0]) + KD * (vref[k] - qvel[0])
        u = CAP_NM if u > CAP_NM else (-CAP_NM if u < -CAP_NM else u)
        q[k], tau[k] = qpos[0], u
        ctrl[0] = u
        mujoco.mj_step(model, data)
    rng = np.random.default_rng(seed)
    return JointSamples(
        ("hinge",),
        np.arange(n, dtype=np.int64) * robot.dt_ns,
        (q + rng.normal(0.0, NOISE.position_rad, n))[:, None],
        effort=(tau + rng.normal(0.0, NOISE.effort_nm, n))[:, None],
        source="bare pendulum loop",
    )


@lru_cache(maxsize=1)
def ten_minutes() -> JointSamples:
    return steady_record(DURATION_S)


ARM_STEADY_S = 60.0  # 10 s wall; the 10 minutes are bench_online.py --arm's
