"""Record excitation tapes: `ros2 launch sysid_ros record.launch.py [sim:=true] [params_file:=...]`.

With `sim:=true` it also starts sim_robot (the pendulum, position interface) on simulated time.
On a real robot, point `params_file` at a copy of config/tape_recorder.yaml with the robot's joints,
controller and envelopes. The recorder is a lifecycle node: `autostart:=true` brings it up, or configure and
activate it (`ros2 lifecycle set /tape_recorder configure`, then `activate`), then `ros2 service call
/tape_recorder/play std_srvs/srv/Trigger`.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node

from launch import LaunchDescription
from sysid_ros.launching import managed, placement, stack_arguments


def _nodes(context):
    share = get_package_share_directory("sysid_ros")
    sim = LaunchConfiguration("sim").perform(context).lower() == "true"
    params_file = LaunchConfiguration("params_file").perform(context) or os.path.join(
        share, "config", "tape_recorder.yaml")
    where, robot = placement(context)
    nodes = [LifecycleNode(package="sysid_ros", executable="tape_recorder", name="tape_recorder", output="screen",
                           **where, parameters=[params_file, robot])]
    if sim:
        nodes.append(Node(package="sysid_ros", executable="sim_robot", name="sim_robot", output="screen", **where,
                          parameters=[os.path.join(share, "config", "sim_robot.yaml"),
                                      {"use_sim_time": True, "forward_interface": "position",
                                       "real_time_factor": 1.0, **robot}]))
    return managed(context, nodes, ["sim_robot", "tape_recorder"] if sim else ["tape_recorder"], where, robot)


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("sim", default_value="false", description="also start sim_robot"),
        DeclareLaunchArgument("params_file", default_value="", description="tape_recorder parameters"),
        *stack_arguments(),
        OpaqueFunction(function=_nodes),
    ])
