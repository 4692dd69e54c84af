"""Joint states nobody should send: 5 messages of 10^6 joint names each reach the tape_recorder and the
online_estimator over DDS. Both stay up, drop them undecoded and say so; what they keep afterwards is measured
in bench/bench_feedback_bounds.py."""

from __future__ import annotations

import pytest
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState

from support.recorder import recorder_params
from sysid_ros.ros.client import wait_for

pytestmark = pytest.mark.ros

NAMES = 10**6


def test_huge_joint_states_are_dropped_and_said(nodes, client, tmp_path):
    recorder = nodes("tape_recorder", "tape_recorder", recorder_params(tmp_path / "bags"))
    estimator = nodes("online_estimator", "online_estimator", {})
    for node in ("tape_recorder", "online_estimator"):
        for transition, state in (("configure", "inactive"), ("activate", "active")):
            assert client.change_state(node, transition) == (True, state)
    diagnostics = client.collect(DiagnosticArray, "/diagnostics", 1000)
    publisher = client.publisher(JointState, "joint_states", 10)
    client.wait_for_subscribers(publisher, 2)
    huge = JointState(name=[f"j{k}" for k in range(NAMES)], position=[0.0] * NAMES)
    for _ in range(5):
        publisher.publish(huge)

    def said() -> str:
        return next(
            (
                s.message
                for a in diagnostics
                for s in a.status
                if s.name == "/tape_recorder" and s.message.startswith("dropped")
            ),
            "",
        )

    assert "joint state message(s) over" in wait_for(said, 120.0, "the recorder to say it dropped them")
    wait_for(lambda: "dropped" in estimator.log(), 120.0, "the estimator to say it dropped them")
    assert recorder.alive() and estimator.alive()
    assert (
        client.lifecycle_state("tape_recorder") == "active" and client.lifecycle_state("online_estimator") == "active"
    )
