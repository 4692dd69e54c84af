"""Helpers of `test_online_payload` that other tests and benches use too:
a whole arm's payload followed online: pybullet's KUKA iiwa (7 joints) picks up 1.5 kg and puts it down.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from support.synthetic import multisine, record_position
from sysid_ros.core.gains import PidGains
from sysid_ros.core.identify import IIWA_JOINTS, Payload, iiwa_mjcf
from sysid_ros.core.online import (
    OnlineEstimator,
)
from sysid_ros.core.signals import JointSamples
from sysid_ros.core.sim import FeedbackNoise, SimRobot

pytest.importorskip("pybullet_data")


S = 1_000_000_000


DT_S = 0.002


PAYLOAD = Payload(1.5, com_m=(0.0, 0.0, 0.08))


POSE_RAD = np.array([0.0, 0.6, 0.0, -1.2, 0.0, 0.9, 0.0])


AMPLITUDE_RAD = np.array([0.5, 0.35, 0.5, 0.4, 0.6, 0.5, 0.8])


FREQS_HZ = (0.2, 0.5, 0.8, 1.1, 1.5)


GAINS = {
    j: PidGains(p=p, i=0.0, d=d)
    for j, p, d in zip(IIWA_JOINTS, (600, 600, 200, 300, 100, 60, 40), (30, 30, 8, 15, 4, 2.5, 1.5))
}


NOISE = FeedbackNoise(position_rad=2e-4, velocity_rad_s=2e-3)


CHANGES = ((10.0, 1.5), (20.0, 0.0))  # (time s, payload kg): attached, removed


@lru_cache(maxsize=2)
def models(folder: str) -> tuple[str, str]:
    """(the robot's model with the payload body, the estimator's model without it)."""
    return (str(iiwa_mjcf(f"{folder}/iiwa_payload.xml", payload=PAYLOAD)), str(iiwa_mjcf(f"{folder}/iiwa.xml")))


def setpoints(seconds: float, seed: int) -> np.ndarray:
    t = np.arange(0, seconds + 1e-9, DT_S)
    return POSE_RAD + np.column_stack(
        [a * multisine(t, FREQS_HZ, 1.0, seed=10 * seed + j) for j, a in enumerate(AMPLITUDE_RAD)]
    )


def payload_record(robot_model: str, seconds: float, changes=CHANGES, seed: int = 1) -> JointSamples:
    """PID tracking of multisine setpoints; `payload.mass` set to each change's value at its time."""
    return tracking_record(robot_model, setpoints(seconds, seed), seconds, changes, seed)


def tracking_record(robot_model: str, sp: np.ndarray, seconds: float, changes=(), seed: int = 1) -> JointSamples:
    """PID tracking of setpoints `sp` (one row per DT_S); `payload.mass` set to each change's value at its time."""
    robot = SimRobot(robot_model, physics={"payload.mass": 0.0}, noise=NOISE, seed=seed, initial_positions=list(sp[0]))
    parts, start = [], 0.0
    for when, mass in (*changes, (seconds, None)):
        parts.append(
            record_position(
                robot,
                lambda ts, t0=start: sp[min(int(round((t0 + ts) / DT_S)), len(sp) - 1)],
                when - start - DT_S,
                GAINS,
            )
        )
        if mass is not None:
            robot.set_physical("payload.mass", mass)
        start = when
    return JointSamples(
        IIWA_JOINTS,
        np.concatenate([p.time_ns for p in parts]),
        np.concatenate([p.position for p in parts]),
        None,
        np.concatenate([p.effort for p in parts]),
        source="SimRobot iiwa",
    )


def follow(config, samples: JointSamples, chunk: int = 50):
    """(events, times s, estimates (rows x parameters)) feeding `chunk` samples at a time."""
    est = OnlineEstimator(config)
    events, times, values = [], [], []
    for k in range(0, len(samples), chunk):
        events += est.update(samples.slice(k, k + chunk))
        times.append(est.estimate.time_ns / S)
        values.append(est.estimate.values)
    return events, np.array(times), np.array(values)
