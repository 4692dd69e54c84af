"""identifier `~/cancel`: a running identification stops at its next progress step and writes nothing."""

from __future__ import annotations

import rclpy
import yaml
from std_srvs.srv import Trigger

from sysid_ros.core.bags.arrays_io import save_npz
from sysid_ros.nodes.identifier import IdentifierNode
from test_identify_problem import pendulum_record


def test_cancel_stops_a_run_and_writes_nothing(tmp_path):
    from rclpy.parameter import Parameter

    samples, commands = pendulum_record(2.0)
    save_npz(tmp_path / "data.npz", samples, {"/effort_controller/commands": commands})
    problem = tmp_path / "problem.yaml"
    problem.write_text(yaml.safe_dump({
        "name": "pendulum", "model": "pendulum", "joints": ["hinge"], "training": [str(tmp_path / "data.npz")],
        "parameters": [{"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0}]}))
    out = tmp_path / "identified"
    context = rclpy.Context()
    rclpy.init(context=context, args=[])
    node = IdentifierNode(context=context, parameter_overrides=[
        Parameter("problem_file", value=str(problem)), Parameter("output_dir", value=str(out))])
    try:
        node.trigger_configure()
        node.trigger_activate()
        assert node._on_cancel(Trigger.Request(), Trigger.Response()).message == "nothing is running"
        started = node._on_identify(Trigger.Request(), Trigger.Response())
        assert started.success, started.message
        assert node._on_cancel(Trigger.Request(), Trigger.Response()).success
        node._worker.join(60.0)
        level, message, document = node._done
        assert (level, message, document) == ("warn", "identification cancelled by request: nothing written", "")
        assert not list(out.rglob("identified.yaml"))
        # the node is not stuck: the next run goes through
        assert node._on_identify(Trigger.Request(), Trigger.Response()).success
        node._worker.join(120.0)
        assert node._done[0] == "ok", node._done[1]
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)
