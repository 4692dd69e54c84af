"""Start sim_robot: `ros2 launch sysid_ros sim_robot.launch.py model:=arm3 use_sim_time:=true real_time_factor:=4.0`."""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from sysid_ros.launching import placement, stack_arguments


def _sim_robot(context):
    share = get_package_share_directory("sysid_ros")
    model = LaunchConfiguration("model").perform(context)
    params_file = LaunchConfiguration("params_file").perform(context) or os.path.join(
        share, "config", "sim_robot_arm3.yaml" if model == "arm3" else "sim_robot.yaml")
    use_sim_time = LaunchConfiguration("use_sim_time").perform(context).lower() == "true"
    where, robot = placement(context)
    return [Node(
        package="sysid_ros", executable="sim_robot", name="sim_robot", output="screen", **where,
        parameters=[params_file, {"use_sim_time": use_sim_time, **robot,
                                  "real_time_factor": float(LaunchConfiguration("real_time_factor").perform(context))}],
    )]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("model", default_value="pendulum", description="pendulum or arm3"),
        DeclareLaunchArgument("params_file", default_value="", description="sim_robot parameters (default: by model)"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="publish /clock and run on it"),
        DeclareLaunchArgument("real_time_factor", default_value="1.0", description="with use_sim_time"),
        *stack_arguments(),
        OpaqueFunction(function=_sim_robot),
    ])
