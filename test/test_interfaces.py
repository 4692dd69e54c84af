"""The interface packages `make setup` builds (interfaces/): importable, and list_controllers on the wire as
ros2_control Jazzy's, so a real controller_manager answers our client."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# controller_manager_msgs/msg/ControllerState as ros2_control Jazzy (>= 4.28) defines it: names, types, order.
JAZZY_CONTROLLER_STATE = {
    "name": "string",
    "state": "string",
    "type": "string",
    "is_async": "boolean",
    "update_rate": "uint16",
    "claimed_interfaces": "sequence<string>",
    "required_command_interfaces": "sequence<string>",
    "required_state_interfaces": "sequence<string>",
    "is_chainable": "boolean",
    "is_chained": "boolean",
    "exported_state_interfaces": "sequence<string>",
    "reference_interfaces": "sequence<string>",
    "chain_connections": "sequence<controller_manager_msgs/ChainConnection>",
}


def test_list_controllers_has_the_jazzy_layout():
    from controller_manager_msgs.msg import ChainConnection, ControllerState
    from controller_manager_msgs.srv import ListControllers

    fields = ControllerState.get_fields_and_field_types()
    assert list(fields.items()) == list(JAZZY_CONTROLLER_STATE.items())
    assert ChainConnection.get_fields_and_field_types() == {
        "name": "string",
        "reference_interfaces": "sequence<string>",
    }
    assert ListControllers.Request.get_fields_and_field_types() == {}
    assert ListControllers.Response.get_fields_and_field_types() == {
        "controller": "sequence<controller_manager_msgs/ControllerState>"
    }


def test_actions_carry_feedback_and_results():
    from sysid_ros_interfaces.action import Identify, Record, Tune

    assert {"stage", "play", "seconds_left", "cost_so_far"} <= set(Tune.Feedback.get_fields_and_field_types())
    assert {"stage", "play", "seconds_left", "progress"} <= set(Record.Feedback.get_fields_and_field_types())
    assert {"stage", "progress", "cost_so_far"} <= set(Identify.Feedback.get_fields_and_field_types())
    for action in (Tune, Record, Identify):
        assert {"success", "message"} <= set(action.Result.get_fields_and_field_types())


def test_colcon_skips_our_controller_manager_msgs():
    """A ROS 2 install has the real package: colcon must never build ours over it."""
    assert (ROOT / "interfaces" / "controller_manager_msgs" / "COLCON_IGNORE").exists()
    assert not (ROOT / "interfaces" / "sysid_ros_interfaces" / "COLCON_IGNORE").exists()
