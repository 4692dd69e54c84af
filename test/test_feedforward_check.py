"""Feed-forward in trajectory points' effort: the first play with one tells whether the controller adds it.

sim_robot over DDS adds the points' effort to its PID output, or (`trajectory_effort: false`) ignores it as
some ros2_control controllers do. A feed-forward of a constant 0.8 N m (of a 3 N m cap) under gentle jogs
is far above the drive's torque noise, so a play tells (two must agree); when it is ignored the plant stops sending
it and
offers the tuner no feed-forward terms (gains-only tuning), with a note.
"""

from __future__ import annotations

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray

from sysid_ros.core.gains import GainsJournal
from sysid_ros.core.linear import JointModel
from sysid_ros.core.tapes import Envelope, jog
from sysid_ros.core.tuner import Controller, DriveGains
from sysid_ros.demo import TUNE_ENVELOPE, TUNE_RATE_HZ, TUNE_RECORDER, TUNED_PENDULUM
from sysid_ros.ros.client import wait_for
from sysid_ros.ros.controller_gains import ControllerGains
from sysid_ros.ros.ros_plant import RosArm

pytestmark = pytest.mark.ros

ENVELOPE = Envelope(**{k.rpartition(".")[2]: v for k, v in TUNE_ENVELOPE.items()})
OFFSET = JointModel(offset_nm=0.8)


@pytest.mark.parametrize("honoured", (True, False))
def test_the_first_play_with_feedforward_tells(nodes, client, tmp_path, honoured):
    nodes("sim_robot", "sim_robot", {**TUNED_PENDULUM, "real_time_factor": 3.0, "trajectory_effort": honoured})
    nodes("tape_recorder", "tape_recorder", {**TUNE_RECORDER, "output_dir": str(tmp_path / "bags")})
    client.collect(DiagnosticArray, "/diagnostics", 1000)
    for transition in ("configure", "activate"):
        assert client.change_state("tape_recorder", transition)[0]
    wait_for(lambda: client.node.count_publishers("/joint_states") > 0, what="sim_robot")
    gains = ControllerGains(client, "sim_robot", GainsJournal(tmp_path / "gains.jsonl"), timeout_s=20.0)
    arm = RosArm(
        "pendulum",
        ("hinge",),
        {"hinge": ENVELOPE},
        TUNE_RATE_HZ,
        arm_feedforward=False,
        client=client,
        gains=gains,
        workdir=tmp_path / "tuner",
    )
    stiff = Controller(DriveGains(kp=40.0, kd=1.5), OFFSET)
    tape = jog({"hinge": ENVELOPE}, TUNE_RATE_HZ, seed=1, jogs=4)
    with arm.trials("test"):
        for _ in range(2):  # two plays must agree
            [tel] = arm.play(tape, {"hinge": stiff}).values()
    assert tel.aborted is None and arm.feedforward_honoured is honoured
    if honoured:
        assert np.any(tel.feedforward) and arm.notes == [] and arm.box_terms
    else:  # the telemetry says what ran; nothing more is sent as feed-forward; the tuner gets no terms
        assert not np.any(tel.feedforward) and "ignores the feed-forward" in arm.notes[0]
        assert arm.box_terms == () and not np.any(arm.reference(tape, {"hinge": stiff})[4])
