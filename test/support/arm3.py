"""Helpers of `test_identify_arm` that other tests and benches use too:
identify() on the 3-link arm: link masses and joint damping from short windows of a PID-tracking run.
"""

from __future__ import annotations

from support.synthetic import arm3_tracking_record
from sysid_ros.core.files import config_dir
from sysid_ros.core.identify import load_problem, problem_from_dict

PHYSICS = {
    "link1.mass": 2.2,
    "link2.mass": 1.1,
    "link3.mass": 0.6,
    "shoulder.damping": 0.6,
    "elbow.damping": 0.25,
    "wrist.damping": 0.12,
}


TRUTH = {k.replace(".", "_"): v for k, v in PHYSICS.items()}


def _record(seed: int, seconds: float):
    return arm3_tracking_record(seed, seconds, PHYSICS)


def arm3_problem(train, val=None):
    """The shipped problem file, pointed at these recordings (`.npz`, the measured effort as the control)."""
    base = load_problem(config_dir() / "identify_arm3.yaml")
    doc = {
        "model": "arm3",
        "joints": list(base.joints),
        "training": [{"npz": str(train), "control": "effort"}],
        "validation": [{"npz": str(val), "control": "effort"}] if val else [],
        "segment_s": base.segment_s,
        "smoothing_samples": base.smoothing_samples,
        "initial_state": base.initial_state,
        "noise": {"position_rad": 2e-4},
        "warm_start": False,
        "parameters": [
            {
                "name": p.name,
                "kind": p.kind,
                ("body" if p.kind.startswith("body") else "joint"): p.target,
                "min": list(p.min_value),
                "max": list(p.max_value),
                "frozen": p.frozen,
            }
            for p in base.parameters
        ],
    }
    return problem_from_dict(doc)
