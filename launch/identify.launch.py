"""Identify from bags: `ros2 launch sysid_ros identify.launch.py problem_file:=/abs/path/problem.yaml`.

The identifier is a lifecycle node: configure and activate it, then call `/identifier/identify`.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode


def _nodes(context):
    share = get_package_share_directory("sysid_ros")
    problem = LaunchConfiguration("problem_file").perform(context) or os.path.join(
        share, "config", "identify_pendulum.yaml")
    return [LifecycleNode(package="sysid_ros", executable="identifier", name="identifier", namespace="",
                          output="screen", parameters=[os.path.join(share, "config", "identifier.yaml"),
                                                       {"problem_file": problem}])]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("problem_file", default_value="", description="identification problem YAML"),
        OpaqueFunction(function=_nodes),
    ])
