"""lifecycle_manager over DDS: ordered bring-up and bring-down of a namespaced robot, a clear failed
transition, `~/is_active`, and nav2's failure semantics: a node that leaves active, or dies, is reported and
the others are brought down in reverse order. A configured recorder refuses what it would not enforce, and the
manager exits on Ctrl-C without a traceback."""

from __future__ import annotations

import signal

import pytest
from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.srv import GetState
from std_srvs.srv import SetBool, Trigger

from support.recorder import SIM, recorder_params
from sysid_ros.ros.client import RESEND_S, wait_for

pytestmark = pytest.mark.ros


def statuses(diagnostics: list, name: str) -> list:
    return [s for a in diagnostics for s in a.status if s.name == name]


def test_bring_up_down_failure_and_heartbeat(nodes, client, tmp_path):
    diagnostics = client.collect(DiagnosticArray, "/diagnostics", 1000)
    # r1: a working stack brought up at start; r2: a recorder that cannot configure (no joints named)
    nodes("sim_robot", "sim_robot", SIM, namespace="r1")
    nodes("tape_recorder", "tape_recorder", recorder_params(tmp_path / "bags"), namespace="r1")
    estimator = nodes("online_estimator", "online_estimator", {}, namespace="r1")
    stack = ["sim_robot", "tape_recorder", "online_estimator"]
    manager = nodes(
        "lifecycle_manager",
        "lifecycle_manager",
        {"node_names": stack, "autostart": True, "plain_nodes": ["sim_robot"], "heartbeat_period_s": 0.5},
        namespace="r1",
    )
    nodes("tape_recorder", "tape_recorder", recorder_params(tmp_path / "bags", joints=[""]), namespace="r2")
    nodes("lifecycle_manager", "lifecycle_manager", {"node_names": ["tape_recorder"]}, namespace="r2")

    def state(node: str) -> str:
        return client.call(GetState, f"{node}/get_state", GetState.Request()).current_state.label

    def is_active(ns: str):
        return client.call(Trigger, f"{ns}/lifecycle_manager/is_active", Trigger.Request(), resend_s=RESEND_S)

    def manage(up: bool):
        return client.call(SetBool, "r1/lifecycle_manager/manage", SetBool.Request(data=up), 120.0)

    wait_for(lambda: is_active("r1").success, 120.0, "r1's stack to come up")
    assert is_active("r1").message == "sim_robot: running, tape_recorder: active, online_estimator: active"
    up = wait_for(
        lambda: next(
            (s for s in statuses(diagnostics, "/r1/lifecycle_manager") if s.message.startswith("active:")), None
        ),
        30.0,
        "the bring-up report",
    )
    assert up.hardware_id == "r1" and "sim_robot, tape_recorder, online_estimator in" in up.message

    # an active recorder refuses what it would not enforce: a parameter read at configure, a value out of range
    refused = client.set_parameters(
        "r1/tape_recorder", {"envelope.hinge.travel_rad": 50.0, "command_rate_hz": -5.0, "tape.seed": -1}
    )
    assert [r.successful for r in refused] == [False] * 3
    assert "read at configure" in refused[0].reason
    assert "out of range" in refused[1].reason and "out of range" in refused[2].reason
    assert client.get_parameters("r1/tape_recorder", ["envelope.hinge.travel_rad"]) == [
        recorder_params(tmp_path)["envelope.hinge.travel_rad"]
    ]

    # a failed transition stops the sequence and says which node, which transition, and where it was left
    response = client.call(SetBool, "r2/lifecycle_manager/manage", SetBool.Request(data=True), 120.0)
    assert not response.success
    assert response.message == "/r2/tape_recorder failed to configure (left unconfigured); see its log"
    assert not is_active("r2").success
    assert any(
        s.level == s.ERROR and s.message == response.message for s in statuses(diagnostics, "/r2/lifecycle_manager")
    )

    # a node taken out of active behind the manager's back: reported, and the others brought down in reverse order
    seen = len(diagnostics)
    assert client.change_state("r1/tape_recorder", "deactivate") == (True, "inactive")
    lost = wait_for(
        lambda: next((s for s in statuses(diagnostics[seen:], "/r1/lifecycle_manager") if s.level == s.ERROR), None),
        30.0,
        "the heartbeat to notice",
    )
    assert lost.message == "not active: tape_recorder (inactive)"
    reset = wait_for(
        lambda: next(
            (s for s in statuses(diagnostics[seen:], "/r1/lifecycle_manager") if "brought down" in s.message), None
        ),
        60.0,
        "the others brought down",
    )
    assert reset.level == reset.ERROR
    assert reset.message == (
        "not active: tape_recorder (inactive): brought down: online_estimator, tape_recorder, "
        "sim_robot in reverse order"
    )
    assert state("r1/online_estimator") == "unconfigured" and state("r1/tape_recorder") == "unconfigured"
    assert not is_active("r1").success

    # ~/manage: up again, then a managed node dies: the others come down, the dead one is not waited for
    response = manage(True)
    assert response.success and is_active("r1").success
    seen = len(diagnostics)
    estimator.stop(signal.SIGKILL)
    reset = wait_for(
        lambda: next(
            (s for s in statuses(diagnostics[seen:], "/r1/lifecycle_manager") if "brought down" in s.message), None
        ),
        60.0,
        "the others brought down",
    )
    assert reset.message.startswith("not active: online_estimator (not answering)")
    assert reset.message.endswith("brought down: tape_recorder, sim_robot in reverse order")
    assert state("r1/tape_recorder") == "unconfigured"

    # Ctrl-C ends the manager cleanly
    assert manager.stop(signal.SIGINT) == 0
    log = manager.log_path.read_text()
    assert "Traceback" not in log and "RCLError" not in log, log
