"""Identify from bags: `ros2 launch sysid_ros identify.launch.py problem_file:=/abs/path/problem.yaml
training_bags:="/abs/bag1 /abs/bag2" validation_bags:=/abs/bag3`.

`problem_file` is required (the shipped config/identify_*.yaml are examples whose data paths are yours to
set); `training_bags`/`validation_bags` (space-separated) replace the problem's own data.
The identifier is a lifecycle node: configure and activate it (or `autostart:=true`), then call
`identifier/identify` (in `namespace:=`).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode

from launch import LaunchDescription
from sysid_ros.launching import managed, placement, stack_arguments


def _nodes(context):
    share = get_package_share_directory("sysid_ros")
    problem = LaunchConfiguration("problem_file").perform(context)
    if not problem:
        raise RuntimeError("identify.launch.py needs problem_file:=/abs/path/problem.yaml "
                           "(see config/identify_pendulum.yaml and docs/identification.md)")
    where, robot = placement(context)
    overrides = {"problem_file": problem, **robot}
    for key in ("training_bags", "validation_bags"):
        bags = LaunchConfiguration(key).perform(context).split()
        if bags:  # an empty list has no type in ROS 2 parameters: leave it out
            overrides[key] = bags
    nodes = [LifecycleNode(package="sysid_ros", executable="identifier", name="identifier", output="screen", **where,
                           parameters=[os.path.join(share, "config", "identifier.yaml"), overrides])]
    return managed(context, nodes, ["identifier"], where, robot)


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("problem_file", default_value="", description="identification problem YAML (required)"),
        DeclareLaunchArgument("training_bags", default_value="", description="bags to train on (space-separated)"),
        DeclareLaunchArgument("validation_bags", default_value="", description="held-out bags (space-separated)"),
        *stack_arguments(),
        OpaqueFunction(function=_nodes),
    ])
