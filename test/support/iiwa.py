"""Helpers of `test_identify_iiwa` that other tests and benches use too:
a real 7-joint arm: pybullet's KUKA LBR iiwa URDF, a hidden flange payload and hidden joint damping.
"""

from __future__ import annotations

import numpy as np
import pytest

from support.synthetic import iiwa_setpoints, record_iiwa
from sysid_ros.core.identify import IIWA_JOINTS, Payload, problem_from_dict
from sysid_ros.core.sim import FeedbackNoise, SimRobot

pytest.importorskip("pybullet_data")


NOMINAL_PAYLOAD = Payload(0.5, com_m=(0.0, 0.0, 0.08))


TRUE_PAYLOAD_KG = 0.8


TRUE_DAMPING = (0.9, 0.7, 0.6, 0.5, 0.35, 0.25, 0.15)  # N m s/rad; the model file says 0.5 everywhere


HIDDEN = {"payload.mass": TRUE_PAYLOAD_KG, **{f"{j}.damping": d for j, d in zip(IIWA_JOINTS, TRUE_DAMPING)}}


NOISE = FeedbackNoise(position_rad=2e-4, velocity_rad_s=2e-3)


LINK7 = "lbr_iiwa_link_7"


def record(model_path, seed: int, seconds: float, physics: dict[str, float]):
    """PID tracking of multisine setpoints around the bent-elbow pose, starting on the first setpoint."""
    start = list(iiwa_setpoints(seed, seconds)[0])
    robot = SimRobot(str(model_path), physics=physics, noise=NOISE, seed=seed, initial_positions=start)
    samples = record_iiwa(robot, seed, seconds)
    assert np.all(np.abs(samples.effort) < 0.98 * robot.torque_limits_nm)  # never saturated
    return samples


def problem(model_path, train, val, parameters):
    doc = {
        "model": str(model_path),
        "joints": list(IIWA_JOINTS),
        "training": [{"npz": str(train), "control": "effort"}],
        "validation": [{"npz": str(val), "control": "effort"}] if val else [],
        "segment_s": 0.25,
        "smoothing_samples": 7,
        "initial_state": "measured",
        "noise": {"position_rad": NOISE.position_rad},
        "warm_start": False,
        "parameters": parameters,
        "optimizer": {"max_iters": 30},
    }
    return problem_from_dict(doc)


def damping_parameters(frozen_at: tuple[float, ...] | None = None) -> list[dict]:
    return [
        {
            "name": f"joint{k + 1}_damping",
            "kind": "joint_damping",
            "joint": j,
            "min": 0.0,
            "max": 3.0,
            "start": 0.5 if frozen_at is None else frozen_at[k],
            "frozen": frozen_at is not None,
        }
        for k, j in enumerate(IIWA_JOINTS)
    ]
