"""Every lifecycle transition id sent to every lifecycle node in every state it reaches, over DDS.

rclpy raises inside its `change_state` service callback for a transition the current state does not have
(requested by numeric id), which used to kill the node's process (with a composed robot_stack: the recorder,
the tuner and the lifecycle manager at once). rclcpp answers such a request with `success: false`; so must ours
(`ros/guards.py`). One process per node kind, its states walked in sequence: unconfigured (after a configure
that failed, for the identifier without a problem file), inactive, active, inactive, unconfigured, finalized.
"""

from __future__ import annotations

import pytest
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetAvailableTransitions, GetState

from sysid_ros.demo import TUNE_RECORDER, TUNED_PENDULUM, TUNER
from sysid_ros.ros.client import RESEND_S

pytestmark = pytest.mark.ros

IDS = sorted(getattr(Transition, k) for k in dir(Transition) if k.startswith("TRANSITION_"))
VALID = {"unconfigured": {1, 5}, "inactive": {2, 3, 6}, "active": {4, 7}, "finalized": set()}
"""rcl's default state machine: the transitions each primary state has."""
WALK = [
    ("configure", "inactive"),
    ("activate", "active"),
    ("deactivate", "inactive"),
    ("cleanup", "unconfigured"),
    ("shutdown", "finalized"),
]


def test_every_transition_id_in_every_state_leaves_every_node_alive(nodes, client, tmp_path):
    ns = "r1"
    nodes("sim_robot", "sim_robot", {**TUNED_PENDULUM, "real_time_factor": 3.0}, namespace=ns)
    processes = {
        "tape_recorder": nodes(
            "tape_recorder", "tape_recorder", {**TUNE_RECORDER, "output_dir": str(tmp_path / "b")}, namespace=ns
        ),
        "servo_tuner": nodes("servo_tuner", "servo_tuner", {**TUNER, "output_dir": str(tmp_path / "t")}, namespace=ns),
        "online_estimator": nodes("online_estimator", "online_estimator", {}, namespace=ns),
        "identifier": nodes("identifier", "identifier", {"output_dir": str(tmp_path / "i")}, namespace=ns),
    }

    def state(node: str) -> str:
        return client.call(
            GetState, f"{node}/get_state", GetState.Request(), 120.0, resend_s=RESEND_S
        ).current_state.label

    def by_id(node: str, transition_id: int) -> bool:
        request = ChangeState.Request(transition=Transition(id=transition_id))
        return client.call(ChangeState, f"{node}/change_state", request, 60.0).success

    walked: dict[str, list[str]] = {}
    for name, process in processes.items():
        node = f"{ns}/{name}"
        walked[name] = []
        for transition, goal in [(None, "unconfigured"), *WALK]:
            if transition is not None:
                ok, now = client.change_state(node, transition, 120.0)
                if not ok:  # a configure that fails (the identifier has no problem file): still unconfigured
                    assert (transition, now) == ("configure", "unconfigured"), (node, transition, now)
                    goal = now
            now = state(node)
            assert now == goal, (node, transition, now)
            available = client.call(
                GetAvailableTransitions,
                f"{node}/get_available_transitions",
                GetAvailableTransitions.Request(),
                resend_s=RESEND_S,
            ).available_transitions
            assert {t.transition.id for t in available} == VALID[now], (node, now)
            for transition_id in IDS:
                if transition_id in VALID[now]:
                    continue
                assert by_id(node, transition_id) is False, (node, now, transition_id)
                assert process.alive(), (node, now, transition_id, process.log()[-2000:])
            assert state(node) == now, (node, now)  # every refused request left it where it was
            walked[name].append(now)
            if transition == "configure" and now == "unconfigured":  # the case: activate after it failed
                assert by_id(node, Transition.TRANSITION_ACTIVATE) is False and state(node) == "unconfigured"
                ok, now = client.change_state(node, "shutdown", 60.0)
                assert (ok, now) == (True, "finalized")
                for transition_id in IDS:
                    assert by_id(node, transition_id) is False and process.alive(), (node, transition_id)
                walked[name].append(now)
                break
        log = process.log()
        assert "Traceback" not in log, log[-3000:]
        assert "refused: state" in log  # each refusal said why, at WARN
    assert walked == {
        "tape_recorder": ["unconfigured", "inactive", "active", "inactive", "unconfigured", "finalized"],
        "servo_tuner": ["unconfigured", "inactive", "active", "inactive", "unconfigured", "finalized"],
        "online_estimator": ["unconfigured", "inactive", "active", "inactive", "unconfigured", "finalized"],
        "identifier": ["unconfigured", "unconfigured", "finalized"],
    }
    assert all(p.alive() for p in processes.values())
