"""The servo_tuner node tunes the 3-link arm over DDS (tune_arm: each joint tip to base, then the whole-arm
check), the proposal is applied and the canary keeps it; the controller ends with exactly the proposal.

sim_robot runs arm3 with hidden masses, damping and friction loss, position-controlled at 200 Hz with poor
factory gains and a 0.02 mrad encoder, at 3x real time. The tuner's host feed-forward is mj_inverse of the
nominal model (the masses it was built with) plus each joint's identified friction.
"""

from __future__ import annotations

import pytest

from sysid_ros.core.tuner import load_proposal
from sysid_ros.demo import TuningRig

pytestmark = [pytest.mark.ros, pytest.mark.slow]

JOINTS = ["shoulder", "elbow", "wrist"]
RATE_HZ = 200.0
AS_FOUND = {"shoulder": (100.0, 10.0), "elbow": (40.0, 4.0), "wrist": (10.0, 0.5)}  # poor (p, d); no integral
ENVELOPE = {
    f"envelope.{j}.{k}": v
    for j, e in {
        "shoulder": (0.3, 0.3, 1.0, 60.0),
        "elbow": (0.4, 0.3, 1.0, 30.0),
        "wrist": (0.2, 0.3, 1.5, 10.0),
    }.items()
    for k, v in zip(("origin_rad", "travel_rad", "max_speed_rad_s", "max_torque_nm"), e)
}
HIDDEN = {
    "physics.link1.mass": 2.3,
    "physics.link2.mass": 1.05,
    "physics.link3.mass": 0.58,
    "physics.shoulder.damping": 0.62,
    "physics.elbow.damping": 0.24,
    "physics.wrist.damping": 0.125,
}
SIM = {
    "model": "arm3",
    "joints": JOINTS,
    "use_sim_time": True,
    "forward_interface": "position",
    "command_rate_hz": RATE_HZ,
    "publish_rate_hz": RATE_HZ,
    "noise.position_rad": 2e-5,
    "noise.velocity_rad_s": 0.0,
    "initial_positions": [0.3, 0.4, 0.2],  # parked at home, inside the envelope
    "gain_guard.p_max": 2000.0,
    "gain_guard.d_max": 100.0,
    **HIDDEN,
    **{
        f"gains.{j}.{g}": v
        for j, (p, d) in AS_FOUND.items()
        for g, v in (("p", p), ("d", d), ("i", 0.0), ("i_clamp", 0.0), ("ff_velocity_scale", 0.0))
    },
}
RECORDER = {
    "joints": JOINTS,
    "command_mode": "trajectory",
    "command_rate_hz": RATE_HZ,
    "safety.stale_after_s": 3.0,
    "model": "arm3",
    **ENVELOPE,
}
TUNER = {
    "joints": JOINTS,
    "controller": "sim_robot",
    "model": "arm3",
    "command_rate_hz": RATE_HZ,
    "guard.p_max": 2000.0,
    "guard.d_max": 100.0,
    "goal.twin_screening": True,
    **ENVELOPE,
}


def test_the_arm_is_tuned_applied_and_kept(tmp_path):
    rig = TuningRig(tmp_path, 3.0, SIM, RECORDER, TUNER)
    try:
        as_found = rig.gains()
        tuned = rig.request("tune", "tune", 3600.0)
        assert tuned["ok"] and tuned["improved"], tuned["message"]
        assert rig.gains() == as_found  # the trial session restored the exact as-found gains
        proposal = load_proposal(tuned["proposal_file"])
        assert proposal.predicted_ratio < 0.75, proposal.summary
        verdict = rig.request("apply", "canary", 900.0)
        assert verdict.get("kept"), verdict  # an apply that failed has no "kept": show its whole answer
        assert rig.gains() == tuned["parameters"]
    finally:
        rig.close()
