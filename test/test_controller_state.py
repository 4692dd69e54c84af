"""Before it plays, the tape_recorder asks ros2_control's controller manager (`list_controllers`, here sim_robot's)
whether the command's controller is active: an inactive one already subscribes, so subscribers prove nothing.
Without a controller manager it says so once and plays on the subscriber check."""

from __future__ import annotations

import pytest
from rcl_interfaces.srv import SetParameters
from rclpy.parameter import Parameter

from support.recorder import SIM, recorder_params
from sysid_ros.ros.client import request_play, wait_for

pytestmark = pytest.mark.ros


def test_an_inactive_controller_is_refused(nodes, client, tmp_path):
    nodes("sim_robot", "sim_robot", {**SIM, "inactive_controllers": ["forward_command_controller"]})
    recorder = nodes("tape_recorder", "tape_recorder", recorder_params(tmp_path / "bags", **{"tape.kind": "sweep"}))
    lonely = nodes(
        "tape_recorder", "lonely_recorder", recorder_params(tmp_path / "lonely", controller_manager="no_such_manager")
    )
    for node in ("tape_recorder", "lonely_recorder"):  # process start-up: tens of seconds on a loaded host
        wait_for(
            lambda: f"/{node}/change_state" in dict(client.node.get_service_names_and_types()),
            300.0,
            f"/{node} to come up",
        )
        for transition, state in (("configure", "inactive"), ("activate", "active")):
            assert client.change_state(node, transition) == (True, state)
    refused = request_play(client)
    assert not refused.success and refused.message == (
        "refused: controller forward_command_controller is inactive in /controller_manager: activate it first"
    )
    none = Parameter("inactive_controllers", Parameter.Type.STRING_ARRAY, [])  # an empty list has no type of its own
    request = SetParameters.Request(parameters=[none.to_parameter_msg()])
    assert client.call(SetParameters, "sim_robot/set_parameters", request).results[0].successful
    played = wait_for(
        lambda: (lambda r: r if r.success else None)(request_play(client)),
        30.0,
        "the controller manager to list it active",
    )
    assert played.message.startswith("playing sweep")  # accepted: how the short sweep ends is not the point here
    # no controller manager: said once, and the subscriber check stands alone
    wait_for(
        lambda: "no controller manager answers /no_such_manager/list_controllers" in lonely.log(),
        60.0,
        "the recorder without a controller manager to say so",
    )
    assert lonely.log().count("no controller manager answers") == 1
    assert recorder.alive()


def test_a_controller_of_another_interface_is_refused(nodes, tmp_path):
    """The shipped sim_robot (its forward controller on the effort interface) and the shipped recorder (a position
    stream): `sysid-ros record` refuses in one line naming both, before anything moves, and writes no bag
    (it played position values as torques before: "completed", 7 mrad of motion)."""
    import subprocess
    import sys

    from sysid_ros.core.files import config_dir, load_ros_parameters

    nodes("sim_robot", "sim_robot", load_ros_parameters(config_dir() / "sim_robot.yaml", "sim_robot"))
    out = tmp_path / "bags"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sysid_ros.cli",
            "record",
            "--params-file",
            str(config_dir() / "tape_recorder.yaml"),
            "--out",
            str(out),
            "--timeout",
            "300",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    line = (
        "refused: controller forward_command_controller commands hinge/effort but forward_interface is position "
        "(the play would send hinge/position): set forward_interface: effort, or name a position controller"
    )
    assert done.stderr.splitlines()[-1] == line and "Traceback" not in done.stderr
    assert not out.exists() or not any(out.iterdir())
