"""What every sysid_ros launch file shares: where a robot's stack goes (namespace, robot name), its bring-up.

A robot's nodes go in its namespace (`namespace:=r1`): every topic, service and parameter service they use
is relative, so the whole stack moves; `/diagnostics` stays global and each status names the robot
(`robot:=`, default the namespace). A namespaced robot runs its own simulated time on `<ns>/clock`, so its
nodes take `/clock` from there. With `autostart:=true` a `lifecycle_manager` in the namespace brings the
lifecycle nodes to active in dependency order (sim_robot, tape_recorder, then the rest). Imports of
`launch` stay inside the functions: this module is imported by launch files only.
"""

from __future__ import annotations

from typing import Any


def stack_arguments() -> list:
    from launch.actions import DeclareLaunchArgument

    return [
        DeclareLaunchArgument(
            "namespace",
            default_value="",
            description="the robot's namespace (e.g. r1): moves its nodes, topics and services",
        ),
        DeclareLaunchArgument(
            "robot",
            default_value="",
            description="the robot's name in every /diagnostics status (default: the namespace)",
        ),
        DeclareLaunchArgument(
            "autostart",
            default_value="false",
            description="a lifecycle_manager brings the lifecycle nodes to active, in order",
        ),
    ]


def placement(context: Any, namespace: str | None = None, robot: str | None = None) -> tuple[dict, dict]:
    """(Node keyword arguments that place a node in the robot's namespace, the `robot` parameter to add)."""
    from launch.substitutions import LaunchConfiguration

    ns = (LaunchConfiguration("namespace").perform(context) if namespace is None else namespace).strip("/")
    name = (LaunchConfiguration("robot").perform(context) if robot is None else robot) or ns
    where = {"namespace": ns, "remappings": [("/clock", "clock")] if ns else []}
    return where, ({"robot": name} if name else {})


def autostart(context: Any) -> bool:
    from launch.substitutions import LaunchConfiguration

    return LaunchConfiguration("autostart").perform(context).lower() == "true"


TUNE_CONFIGS = {
    "pendulum": ("servo_tuner.yaml", "sim_robot.yaml", 250.0),
    "arm3": ("servo_tuner_arm3.yaml", "sim_robot_arm3.yaml", 200.0),
}
"""model -> (servo_tuner + tape_recorder file, sim_robot file, the tuner's rate) in config/: what tune.launch.py
(and fleet.launch.py, pendulum) start with `sim:=true`. test_shipped_configs tunes each to a proposal."""


def tuning_sim(model: str) -> dict[str, Any]:
    """What a simulated robot to tune gets over its config file: position-controlled at the tuner's rate, on
    simulated time at real time."""
    rate = TUNE_CONFIGS[model][2]
    return {
        "use_sim_time": True,
        "forward_interface": "position",
        "command_rate_hz": rate,
        "publish_rate_hz": rate,
        "real_time_factor": 1.0,
    }


PLAIN_NODES = ("sim_robot",)  # our nodes without lifecycle services: waited for, never transitioned


def manager(where: dict, robot: dict, node_names: list[str]) -> Any:
    """The robot's lifecycle_manager, bringing `node_names` (dependency order) to active at start."""
    from launch_ros.actions import Node

    params = {"node_names": node_names, "autostart": True, **robot}
    plain = [name for name in node_names if name in PLAIN_NODES]
    if plain:  # an empty list has no type in a ROS parameter: leave it out
        params["plain_nodes"] = plain
    return Node(
        package="sysid_ros",
        executable="lifecycle_manager",
        name="lifecycle_manager",
        output="screen",
        **where,
        parameters=[params],
    )


def managed(context: Any, nodes: list, names: list[str], where: dict, robot: dict) -> list:
    """`nodes`, plus their lifecycle_manager (bringing `names`, in dependency order, to active) with autostart."""
    return [*nodes, manager(where, robot, names)] if autostart(context) else nodes
