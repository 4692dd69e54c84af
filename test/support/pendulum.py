"""Helpers of `test_identify_pendulum` that other tests and benches use too:
identify() on the pendulum: hidden truth recovered from SimRobot recordings (a real rosbag2 bag and .npz).
"""

from __future__ import annotations

from support.synthetic import record_pendulum
from sysid_ros.core.identify import problem_from_dict
from sysid_ros.core.sim import FeedbackNoise

TRUTH = {"pole_mass": 1.3, "hinge_damping": 0.08, "hinge_frictionloss": 0.05}


PHYSICS = {"pole.mass": 1.3, "hinge.damping": 0.08, "hinge.frictionloss": 0.05}


def _record(seed: int, seconds: float, noise: FeedbackNoise):
    """Five sines 0.2-3 Hz, peak 2.5 N m, commanded at 500 Hz (held 2 ms), feedback at 500 Hz."""
    return record_pendulum(PHYSICS, seed, seconds, noise)


def problem_doc(train, val=None, **extra) -> dict:
    """The pendulum's identification problem as a document (`validation` only when `val` is given)."""
    doc = {
        "model": "pendulum",
        "joints": ["hinge"],
        "training": [str(train)],
        "noise": {"position_rad": 5e-4},
        "parameters": [
            {"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0, "start": 1.0},
            {"name": "hinge_damping", "kind": "joint_damping", "joint": "hinge", "min": 0.0, "max": 1.0, "start": 0.02},
            {
                "name": "hinge_frictionloss",
                "kind": "joint_frictionloss",
                "joint": "hinge",
                "min": 0.0,
                "max": 1.0,
                "start": 0.02,
            },
        ],
    }
    if val is not None:
        doc["validation"] = [str(val)]
    doc.update(extra)
    return doc


def _problem(train, val, **extra):
    return problem_from_dict({"validation": [], **problem_doc(train, val, **extra)})
