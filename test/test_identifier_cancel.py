"""identifier `~/cancel`: a running identification stops at its next progress step and writes nothing."""

from __future__ import annotations

import pytest
import rclpy
import yaml
from std_srvs.srv import Trigger

from support.pendulum_data import pendulum_record
from sysid_ros.core.bags import save_npz
from sysid_ros.nodes.identifier import IdentifierNode
from sysid_ros.ros.client import send_goal, wait_for


def test_cancel_stops_a_run_and_writes_nothing(tmp_path):
    from rclpy.parameter import Parameter

    samples, commands = pendulum_record(2.0)
    save_npz(tmp_path / "data.npz", samples, {"/effort_controller/commands": commands})
    problem = tmp_path / "problem.yaml"
    problem.write_text(
        yaml.safe_dump(
            {
                "name": "pendulum",
                "model": "pendulum",
                "joints": ["hinge"],
                "training": [str(tmp_path / "data.npz")],
                "parameters": [{"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0}],
            }
        )
    )
    out = tmp_path / "identified"
    context = rclpy.Context()
    rclpy.init(context=context, args=[])
    node = IdentifierNode(
        context=context,
        parameter_overrides=[Parameter("problem_file", value=str(problem)), Parameter("output_dir", value=str(out))],
    )
    try:
        node.trigger_configure()
        node.trigger_activate()
        assert node._on_cancel(Trigger.Request(), Trigger.Response()).message == "nothing is running"
        started = node._on_identify(Trigger.Request(), Trigger.Response())
        assert started.success, started.message
        assert node._on_cancel(Trigger.Request(), Trigger.Response()).success
        node._worker.join(60.0)
        level, message, document = node._done
        assert (level, message, document) == ("info", "identification cancelled by request: nothing written", "")
        assert not list(out.rglob("identified.yaml"))
        # the node is not stuck: the next run goes through
        assert node._on_identify(Trigger.Request(), Trigger.Response()).success
        node._worker.join(120.0)
        assert node._done[0] == "ok", node._done[1]
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def start_identifier(tmp_path, nodes, namespace: str):
    """An identifier process in `namespace` on a 20 s pendulum record, three parameters started far off and no
    regression warm start (which lands on the answer: a quiet machine then finished in 1.4 s, before any
    feedback to cancel on), so the optimiser runs for seconds and a cancel lands mid-run; its output folder."""
    samples, commands = pendulum_record(20.0)
    save_npz(tmp_path / "data.npz", samples, {"/effort_controller/commands": commands})
    problem = tmp_path / "problem.yaml"
    problem.write_text(
        yaml.safe_dump(
            {
                "name": "pendulum",
                "model": "pendulum",
                "joints": ["hinge"],
                "training": [str(tmp_path / "data.npz")],
                "warm_start": False,
                "parameters": [
                    {"name": "pole_mass", "kind": "body_mass", "body": "pole", "start": 0.5, "min": 0.2, "max": 5.0},
                    {"name": "damping", "kind": "joint_damping", "joint": "hinge", "start": 0.5, "min": 0, "max": 1},
                    {
                        "name": "friction",
                        "kind": "joint_frictionloss",
                        "joint": "hinge",
                        "start": 0.3,
                        "min": 0,
                        "max": 1,
                    },
                ],
            }
        )
    )
    out = tmp_path / "identified"
    nodes("identifier", "identifier", {"problem_file": str(problem), "output_dir": str(out)}, namespace=namespace)
    return out


@pytest.mark.ros
def test_cancel_over_dds_from_another_process(tmp_path, nodes, client):
    """The node in its own process (namespaced), identify then cancel through its services: it says so, writes
    nothing, and runs again."""
    from diagnostic_msgs.msg import DiagnosticArray

    out = start_identifier(tmp_path, nodes, "robot_c")
    diagnostics = client.collect(DiagnosticArray, "/diagnostics", 50)
    assert client.change_state("/robot_c/identifier", "configure") == (True, "inactive")
    assert client.change_state("/robot_c/identifier", "activate") == (True, "active")
    assert client.call(Trigger, "/robot_c/identifier/cancel", Trigger.Request()).message == "nothing is running"
    assert client.call(Trigger, "/robot_c/identifier/identify", Trigger.Request()).success
    assert client.call(Trigger, "/robot_c/identifier/cancel", Trigger.Request()).success

    def said(text: str) -> bool:
        return any(text in status.message for array in diagnostics for status in array.status)

    wait_for(lambda: said("cancelled by request"), timeout_s=120, what="the cancelled run's diagnostic")
    assert not said("identified pendulum") and not list(out.rglob("identified.yaml"))
    assert client.call(Trigger, "/robot_c/identifier/identify", Trigger.Request()).success  # not stuck: runs again


@pytest.mark.ros
def test_identify_action_feedback_cancel_and_result(tmp_path, nodes, client):
    """The `~/identify` action from another process: feedback (stage, fraction, the optimizer's cost) while it
    runs, a cancel that ends CANCELED with nothing written, then a run that answers with its results and verdict."""
    import math

    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient
    from sysid_ros_interfaces.action import Identify

    out = start_identifier(tmp_path, nodes, "robot_d")
    wait_for(
        lambda: ("identifier", "/robot_d") in client.node.get_node_names_and_namespaces(),
        180.0,
        "the identifier to start",
    )  # imports can take over a minute on a loaded 2-core machine
    assert client.change_state("/robot_d/identifier", "configure") == (True, "inactive")
    assert client.change_state("/robot_d/identifier", "activate") == (True, "active")
    action = ActionClient(client.node, Identify, "/robot_d/identifier/identify")
    assert action.wait_for_server(timeout_sec=60.0)

    def run(cancel_when=None):
        goal, feedback = send_goal(action, Identify.Goal())
        assert goal.accepted
        done = goal.get_result_async()
        if cancel_when is not None:
            wait_for(lambda: any(cancel_when(f) for _, f in feedback), 300.0, "feedback to cancel on")
            goal.cancel_goal_async()
        return wait_for(lambda: done.result() if done.done() else None, 600.0, "the result"), feedback

    cancelled, feedback = run(cancel_when=lambda f: f.stage == "optimize" and math.isfinite(f.cost_so_far))
    assert cancelled.status == GoalStatus.STATUS_CANCELED, cancelled.result.message
    assert "nothing written" in cancelled.result.message and not list(out.rglob("identified.yaml"))
    assert all(0.0 <= f.progress <= 1.0 for _, f in feedback)
    finished, feedback = run()
    assert finished.status == GoalStatus.STATUS_SUCCEEDED, finished.result.message
    assert finished.result.verdict in ("ok", "suspect") and finished.result.results_file.endswith("identified.yaml")
    assert yaml.safe_load(finished.result.outcome)["verdict"] == finished.result.verdict
    times = [t for t, _ in feedback]
    assert max((b - a for a, b in zip(times, times[1:])), default=0.0) <= 5.0
