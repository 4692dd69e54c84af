"""Follow parameter changes online: `ros2 launch sysid_ros online.launch.py [params_file:=...]`.

The estimator is a lifecycle node: configure and activate it (or `autostart:=true`); it publishes
~/estimate, ~/estimate_array
and ~/events. With request_excitation:=true it asks the tape_recorder for an excitation tape.
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
    params_file = LaunchConfiguration("params_file").perform(context) or os.path.join(
        share, "config", "online_estimator.yaml")
    where, robot = placement(context)
    nodes = [LifecycleNode(package="sysid_ros", executable="online_estimator", name="online_estimator",
                           output="screen", **where, parameters=[params_file, robot])]
    return managed(context, nodes, ["online_estimator"], where, robot)


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value="", description="online_estimator parameters"),
        *stack_arguments(),
        OpaqueFunction(function=_nodes),
    ])
