"""Helpers of `test_regression` that other tests and benches use too:
the linear estimator on a point-mass pendulum: hidden mass, damping and friction loss, simulated in MuJoCo.
"""

from __future__ import annotations

from functools import lru_cache

import mujoco
import numpy as np

from support.open_loop import simulate_open_loop, with_parameters
from sysid_ros.core.linear import PENDULUM_TERMS, JointFit, fit_pendulum
from sysid_ros.core.signals import quartic_derivatives

TRUTH = {"mass_kg": 1.3, "damping_nm_s_rad": 0.08, "friction_nm": 0.05}


LESSON_SG = {"mass_kg": 1.3266, "damping_nm_s_rad": 0.0868, "friction_nm": 0.0417}


LENGTH_M, ROTOR_KG_M2, NOISE_RAD = 0.5, 1e-4, 5e-4


OUR_WINDOW_S = 0.2  # quartic fits over 0.2 s: unbiased to 3 Hz, and noise-compensated (see the bench)


PENDULUM_XML = """<mujoco model="pendulum">
  <option timestep="0.002"/>
  <worldbody>
    <body name="pole">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.08" frictionloss="0.05" armature="1e-4"/>
      <inertial pos="0 0 -0.5" mass="1.3" diaginertia="1e-9 1e-9 1e-9"/>
    </body>
  </worldbody>
  <actuator><motor name="motor" joint="hinge" ctrllimited="true" ctrlrange="-3 3"/></actuator>
</mujoco>"""


@lru_cache(maxsize=1)
def pendulum() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(PENDULUM_XML)


def pendulum_with(params: dict[str, float]) -> mujoco.MjModel:
    """The pendulum with (mass, damping, friction loss) replaced."""
    return with_parameters(
        pendulum(),
        {
            "body_mass:pole": params["mass_kg"],
            "dof_damping:hinge": params["damping_nm_s_rad"],
            "dof_frictionloss:hinge": params["friction_nm"],
        },
    )


def multisine(t: np.ndarray, amplitude_nm: float, seed: int) -> np.ndarray:
    """Five sines at random frequencies in 0.2-3 Hz and random phases (the lesson's generator)."""
    rng = np.random.default_rng(seed)
    freqs, phases = rng.uniform(0.2, 3.0, 5), rng.uniform(0, 2 * np.pi, 5)
    return amplitude_nm * sum(np.sin(2 * np.pi * f * t + p) for f, p in zip(freqs, phases)) / 5


@lru_cache(maxsize=8)
def record(
    amplitude_nm: float = 2.5, torque_seed: int = 1, noise_seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(torque, true angle, measured angle) over 10 s; the state is recorded before each step."""
    model = pendulum()
    t = np.arange(round(10.0 / model.opt.timestep)) * model.opt.timestep
    torque = multisine(t, amplitude_nm, torque_seed)
    q_true = simulate_open_loop(model, torque)[:, 0]
    return torque, q_true, q_true + np.random.default_rng(noise_seed).normal(0.0, NOISE_RAD, t.size)


def ours(q: np.ndarray, torque: np.ndarray, **kwargs: object) -> JointFit:
    return fit_pendulum(
        quartic_derivatives(q, pendulum().opt.timestep, OUR_WINDOW_S),
        torque,
        length_m=LENGTH_M,
        rotor_inertia_kg_m2=ROTOR_KG_M2,
        **kwargs,
    )


def rel_errors(fit: JointFit) -> np.ndarray:
    return np.array([fit.fit.value(k) / TRUTH[k] - 1 for k in PENDULUM_TERMS])
