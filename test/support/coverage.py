"""Helpers of `test_interval_coverage` that other tests and benches use too:
do the 95 % intervals cover the truth? Many noise realizations and multisine draws of the hidden pendulum.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from support.synthetic import multisine, record_effort
from sysid_ros.core.bags import save_npz
from sysid_ros.core.identify import identify, problem_from_dict
from sysid_ros.core.linear import fit_pendulum
from sysid_ros.core.signals import savgol_derivatives
from sysid_ros.core.sim import FeedbackNoise, SimRobot

PHYSICS = {"pole.mass": 1.3, "hinge.damping": 0.08, "hinge.frictionloss": 0.05}


NAMES = ("mass", "damping", "friction")


TRUTH = np.array([1.3, 0.08, 0.05])


NOISE_RAD = 5e-4


DT_S = 0.002


FREQS_HZ = (0.2, 0.7, 1.3, 2.1, 3.0)


LENGTH_M, ROTOR_KG_M2 = 0.5, 1e-4  # config/models/pendulum.xml: point mass 0.5 m below the hinge, armature 1e-4


TOPIC = "/effort_controller/commands"


@lru_cache(maxsize=64)
def record(seed: int, seconds: float = 10.0):
    """One draw: multisine phases from `seed`, feedback noise from `seed`; returns (samples, commands)."""
    robot = SimRobot("pendulum", physics=PHYSICS, noise=FeedbackNoise(position_rad=NOISE_RAD), seed=seed)
    t = np.arange(0, seconds + 1e-9, DT_S)
    u = multisine(t, FREQS_HZ, 2.5, seed=1000 + seed)
    return record_effort(robot, lambda ts: [u[int(round(ts / DT_S))]], seconds)


def regression_interval(
    seed: int, filter_window_s: float = 0.2, polyorder: int = 4, filter_torque: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, 95 % half-widths, flagged: a whole-fit or this parameter's warning) of the regression on one draw."""
    samples, commands = record(seed)
    tau = commands.held_at(samples.time_ns)[:, 0]
    fit = fit_pendulum(
        savgol_derivatives(samples.position[:, 0], DT_S, filter_window_s, polyorder),
        tau,
        length_m=LENGTH_M,
        rotor_inertia_kg_m2=ROTOR_KG_M2,
        filter_torque=filter_torque,
    ).fit
    flagged = np.array([bool(fit.warnings) or name in fit.parameter_warnings for name in fit.names])
    return fit.values.copy(), fit.half_width_95.copy(), flagged


def pipeline_interval(
    seed: int, folder: Path, initial_state: str = "estimate", start_noise: str = "weight"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(values, 95 % half-widths, identifiable, widening over the library's half-widths) of `identify`."""
    samples, commands = record(seed)
    path = save_npz(Path(folder) / f"seed{seed}.npz", samples, {TOPIC: commands})
    doc = {
        "model": "pendulum",
        "joints": ["hinge"],
        "training": [str(path)],
        "noise": {"position_rad": NOISE_RAD},
        "initial_state": initial_state,
        "start_noise": start_noise,
        "parameters": [
            {"name": "mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0, "start": 1.0},
            {"name": "damping", "kind": "joint_damping", "joint": "hinge", "min": 0.0, "max": 1.0, "start": 0.02},
            {"name": "friction", "kind": "joint_frictionloss", "joint": "hinge", "min": 0.0, "max": 1.0, "start": 0.02},
        ],
    }
    result = identify(problem_from_dict(doc))
    by_name = {p.name: p for p in result.parameters}
    widening = result.metrics.get("start_state_widening", {})
    return (
        np.array([by_name[n].value[0] for n in NAMES]),
        np.array([by_name[n].half_width_95[0] for n in NAMES]),
        np.array([by_name[n].identifiable for n in NAMES]),
        np.array([widening.get(n, [1.0])[0] for n in NAMES]),
    )


def covered(values: np.ndarray, half: np.ndarray) -> np.ndarray:
    return np.abs(np.asarray(values) - TRUTH) <= np.asarray(half)


REGRESSION_SEEDS = range(20)


PIPELINE_SEEDS = (0, 1, 2, 4, 5, 6, 7, 8)
