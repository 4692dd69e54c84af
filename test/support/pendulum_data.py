"""Helpers of `test_identify_problem` that other tests and benches use too:
problem files: parsed, and every mistake refused with a message naming it BEFORE any optimisation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rosbags.typesys import Stores, get_typestore

from support.synthetic import multisine, record_effort
from sysid_ros.core.bags import save_npz
from sysid_ros.core.sim import SimRobot

TS = get_typestore(Stores.ROS2_JAZZY)


def pendulum_record(seconds: float = 1.0):
    """(samples, effort commands) of the embedded pendulum driven by a multisine torque, 500 Hz."""
    robot = SimRobot("pendulum", start_time_ns=1_700_000_000_000_000_001)
    t = np.arange(0, seconds + 1e-9, 0.002)
    u = multisine(t, [1.0, 2.0], 1.5)
    return record_effort(robot, lambda ts: [u[int(round(ts / 0.002))]], seconds)


def pendulum_npz(folder: Path):
    """`pendulum_record()` saved as `folder/ok.npz` with its effort commands; returns (samples, commands)."""
    samples, commands = pendulum_record()
    save_npz(folder / "ok.npz", samples, {"/effort_controller/commands": commands})
    return samples, commands


def _doc(d, **changes):
    doc = {
        "model": "pendulum",
        "joints": ["hinge"],
        "training": [str(d / "ok.npz")],
        "parameters": [
            {"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0},
            {"name": "hinge_damping", "kind": "joint_damping", "joint": "hinge", "min": 0, "max": 1},
        ],
    }
    doc.update(changes)
    return doc


def _param(**p):
    return [{"name": "p", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0, **p}]
