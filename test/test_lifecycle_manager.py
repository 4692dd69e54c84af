"""lifecycle_manager over DDS: ordered bring-up and bring-down of a namespaced robot, a clear failed
transition, `~/is_active`, and a heartbeat that reports a node leaving active."""

from __future__ import annotations

import pytest
from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.srv import GetState
from std_srvs.srv import SetBool, Trigger

from sysid_ros.nodes.client import wait_for
from test_tape_recorder_node import SIM, recorder_params

pytestmark = pytest.mark.ros


def statuses(diagnostics: list, name: str) -> list:
    return [s for a in diagnostics for s in a.status if s.name == name]


def test_bring_up_down_failure_and_heartbeat(nodes, client, tmp_path):
    diagnostics = client.collect(DiagnosticArray, "/diagnostics", 1000)
    # r1: a working stack brought up at start; r2: a recorder that cannot configure (no joints named)
    nodes("sim_robot", "sim_robot", SIM, namespace="r1")
    nodes("tape_recorder", "tape_recorder", recorder_params(tmp_path / "bags"), namespace="r1")
    nodes("lifecycle_manager", "lifecycle_manager", {"node_names": ["sim_robot", "tape_recorder"], "autostart": True,
                                                     "plain_nodes": ["sim_robot"], "heartbeat_period_s": 0.5},
          namespace="r1")
    nodes("tape_recorder", "tape_recorder", recorder_params(tmp_path / "bags", joints=[""]), namespace="r2")
    nodes("lifecycle_manager", "lifecycle_manager", {"node_names": ["tape_recorder"]}, namespace="r2")

    def state(node: str) -> str:
        return client.call(GetState, f"{node}/get_state", GetState.Request()).current_state.label

    def is_active(ns: str):
        return client.call(Trigger, f"{ns}/lifecycle_manager/is_active", Trigger.Request())

    wait_for(lambda: is_active("r1").success, 120.0, "r1's stack to come up")
    assert is_active("r1").message == "sim_robot: running, tape_recorder: active"
    up = wait_for(lambda: next((s for s in statuses(diagnostics, "/r1/lifecycle_manager")
                                if s.message.startswith("active:")), None), 30.0, "the bring-up report")
    assert up.hardware_id == "r1" and "sim_robot, tape_recorder in" in up.message

    # a failed transition stops the sequence and says which node, which transition, and where it was left
    response = client.call(SetBool, "r2/lifecycle_manager/manage", SetBool.Request(data=True), 120.0)
    assert not response.success
    assert response.message == "/r2/tape_recorder failed to configure (left unconfigured); see its log"
    assert not is_active("r2").success
    assert any(s.level == s.ERROR and s.message == response.message
               for s in statuses(diagnostics, "/r2/lifecycle_manager"))

    # heartbeat: a node taken out of active behind the manager's back is reported
    seen = len(diagnostics)
    assert client.change_state("r1/tape_recorder", "deactivate") == (True, "inactive")
    lost = wait_for(lambda: next((s for s in statuses(diagnostics[seen:], "/r1/lifecycle_manager")
                                  if s.level == s.ERROR), None), 30.0, "the heartbeat to notice")
    assert lost.message == "not active: tape_recorder (inactive)"
    assert not is_active("r1").success

    # ~/manage: up again (only what is missing), then down in reverse order
    response = client.call(SetBool, "r1/lifecycle_manager/manage", SetBool.Request(data=True), 120.0)
    assert response.success and state("r1/tape_recorder") == "active" and is_active("r1").success
    response = client.call(SetBool, "r1/lifecycle_manager/manage", SetBool.Request(data=False), 120.0)
    assert response.success, response.message
    assert state("r1/tape_recorder") == "unconfigured" and not is_active("r1").success
