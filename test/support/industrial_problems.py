"""Helpers of `test_identify_industrial_arm` that other tests and benches use too:
a real 6-joint industrial arm's workflow on logs like its controller writes (issue 23; test/industrial_arm.py):
"""

from __future__ import annotations

import re

from industrial_arm import JOINTS, LINKS

TOOL = '<body name="tool" pos="0 0.16 0"><inertial pos="0 0 0" mass="1.0" diaginertia="0.002 0.002 0.002"/></body>'


def _arm_problem(model: str, bag: str) -> dict:
    params = []
    for j in JOINTS:  # bounds from physics (the motors' torque limits)
        params += [
            {"name": f"{j}_damping", "kind": "joint_damping", "joint": j},
            {"name": f"{j}_frictionloss", "kind": "joint_frictionloss", "joint": j},
            {"name": f"{j}_offset", "kind": "joint_effort_offset", "joint": j},
        ]
    # the model's link masses are Menagerie's: wrist 3 is 0.202 kg there and 0.615 kg on the robot, outside
    # the default 0.5-2x of the nominal; wide bounds instead
    params += [{"name": f"{b}_mass", "kind": "body_mass", "body": b, "min": 0.05, "max": 30.0} for b in LINKS[1:]]
    return {
        "model": model,
        "joints": list(JOINTS),
        "training": [{"path": bag, "control": "effort"}],
        "segment_s": 0.25,
        "initial_state": "measured",
        "parameters": params,
        "optimizer": {"max_iters": 20},
    }


def _with_tool(identified_xml: str) -> str:
    """The identified MJCF with a payload body on the flange, written by hand as users write it."""
    joint = re.search(r'<joint name="wrist_3_joint"[^>]*/>', identified_xml)
    assert joint is not None
    return identified_xml[: joint.end()] + TOOL + identified_xml[joint.end() :]
