"""Tune servos: `ros2 launch sysid_ros tune.launch.py [sim:=true] [model:=pendulum|arm3] [params_file:=...]`.

Starts the servo_tuner and the tape_recorder it plays through (both lifecycle nodes, parameters from one
file: config/servo_tuner.yaml, or servo_tuner_arm3.yaml for `model:=arm3`). With `sim:=true` it also
starts sim_robot with that model, position-controlled at the tuner's rate on simulated time.
On a real robot point `params_file` at a copy naming the robot's joints, controller, MJCF and envelopes.
`autostart:=true` brings them up in order (a lifecycle_manager); or configure and activate both nodes
(`ros2 lifecycle set /tape_recorder configure`, `... activate`, the same for /servo_tuner), then
`sysid-ros tune`, `sysid-ros apply`, and if ever needed `sysid-ros rollback` (each with `--namespace`).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node

from launch import LaunchDescription
from sysid_ros.launching import TUNE_CONFIGS, managed, placement, stack_arguments, tuning_sim


def _nodes(context):
    share = get_package_share_directory("sysid_ros")
    model = LaunchConfiguration("model").perform(context)
    tuner_file, sim_file, _ = TUNE_CONFIGS["arm3" if model == "arm3" else "pendulum"]
    params_file = LaunchConfiguration("params_file").perform(context) or os.path.join(share, "config", tuner_file)
    where, robot = placement(context)
    nodes = [LifecycleNode(package="sysid_ros", executable=name, name=name, output="screen", **where,
                           parameters=[params_file, robot]) for name in ("tape_recorder", "servo_tuner")]
    if LaunchConfiguration("sim").perform(context).lower() == "true":
        nodes.append(Node(package="sysid_ros", executable="sim_robot", name="sim_robot", output="screen", **where,
                          parameters=[os.path.join(share, "config", sim_file),
                                      {**tuning_sim("arm3" if model == "arm3" else "pendulum"), **robot}]))
    sim = LaunchConfiguration("sim").perform(context).lower() == "true"
    return managed(context, nodes, ["sim_robot"] * sim + ["tape_recorder", "servo_tuner"], where, robot)


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("sim", default_value="false", description="also start sim_robot"),
        DeclareLaunchArgument("model", default_value="pendulum", description="with sim: pendulum or arm3"),
        DeclareLaunchArgument("params_file", default_value="", description="servo_tuner + tape_recorder parameters"),
        *stack_arguments(),
        OpaqueFunction(function=_nodes),
    ])
