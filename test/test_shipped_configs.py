"""Every shipped tuning configuration tunes its simulated robot to a proposal over DDS, as a newcomer runs it.

The parameters are those of config/ as the launch files combine them (`sysid_ros.launching.TUNE_CONFIGS` and
`tuning_sim`: `tune.launch.py sim:=true [model:=arm3]`, `fleet.launch.py sim:=true`, whose robots differ from the
pendulum of tune.launch.py only by their noise seed), read from the files, not copied. Only the output folders and
the real-time factor (3x, to keep the test's minutes down) differ. The robots rest where the shipped sim_robot
files start them; nothing else places them.
"""

from __future__ import annotations

import pytest

from sysid_ros.core.files import load_ros_parameters, share_dir
from sysid_ros.core.tuner import load_proposal
from sysid_ros.demo import TuningRig
from sysid_ros.launching import TUNE_CONFIGS, tuning_sim

pytestmark = pytest.mark.ros

REAL_TIME_FACTOR = 3.0
TUNE_TIMEOUT_S = 3600.0


def shipped(model: str) -> tuple[dict, dict, dict]:
    """(sim_robot, tape_recorder, servo_tuner) parameters of the shipped combination for `model`."""
    tuner_file, sim_file, _ = TUNE_CONFIGS[model]
    config = share_dir() / "config"
    sim = {**load_ros_parameters(config / sim_file, "sim_robot"), **tuning_sim(model)}
    return (
        sim,
        load_ros_parameters(config / tuner_file, "tape_recorder"),
        load_ros_parameters(config / tuner_file, "servo_tuner"),
    )


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(TUNE_CONFIGS))
def test_the_shipped_config_tunes_to_a_proposal(model, tmp_path):
    sim, recorder, tuner = shipped(model)
    rig = TuningRig(tmp_path, REAL_TIME_FACTOR, sim, recorder, tuner)
    try:
        as_found = rig.gains()
        tuned = rig.tune(TUNE_TIMEOUT_S)
        assert tuned["ok"] and tuned["improved"], tuned["message"]
        assert rig.gains() == as_found  # the trial session restored the exact as-found gains
        proposal = load_proposal(tuned["proposal_file"])
        assert proposal.predicted_ratio < 1.0, proposal.summary
    finally:
        rig.close()


def test_an_arm_resting_outside_its_envelopes_is_told_what_to_do(tmp_path):
    """The shipped arm3 where it rested before its config parked it (every joint at 0, the shoulder 0.3 rad from its
    envelope's origin, the elbow 0.4): the tune fails at once, before any motion, naming each joint, the room and
    the remedy."""
    sim, recorder, tuner = shipped("arm3")
    rig = TuningRig(tmp_path, REAL_TIME_FACTOR, {**sim, "initial_positions": [0.0, 0.0, 0.0]}, recorder, tuner)
    try:
        as_found = rig.gains()
        tuned = rig.tune(600.0)
        assert not tuned["ok"]
        message = tuned["message"]
        assert "the arm rests outside its tuning envelopes: shoulder at " in message
        assert "outside the room tapes use: 0.03 to 0.57 rad (90% of travel_rad 0.3 around origin_rad 0.3)" in message
        # every joint outside is named, not only the first (the wrist at 0 is inside its room, -0.07 to 0.47 rad)
        assert "elbow at " in message and "wrist at " not in message and "(joint=shoulder,elbow)" in message
        assert "first bring the arm there" in message and "set the envelopes around where it rests" in message
        assert not list((tmp_path / "bags").glob("*"))  # nothing moved: no play was recorded
        assert rig.gains() == as_found
    finally:
        rig.close()
