"""A fleet on one graph: `ros2 launch sysid_ros fleet.launch.py robots:=r1,r2 [sim:=true] [physics_file:=...]`.

One stack per robot, each in its own namespace (`/r1/...`, `/r2/...`): tape_recorder and servo_tuner
(config/servo_tuner.yaml, or `params_file`; its `/**/` sections serve every robot), with `sim:=true` a
simulated pendulum of its own (own noise seed, own hidden physics from `physics_file`: `{r1: {physics.pole.mass:
1.2}, ...}`), and a lifecycle_manager per robot that brings the stack to active in dependency order
(sim_robot, tape_recorder, servo_tuner). `/diagnostics` is shared; every status names its robot.
"""

import os

import yaml
from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node

from launch import LaunchDescription
from sysid_ros.launching import TUNE_CONFIGS, manager, placement, tuning_sim


def _stacks(context):
    share = get_package_share_directory("sysid_ros")
    robots = [r.strip().strip("/") for r in LaunchConfiguration("robots").perform(context).split(",") if r.strip()]
    if not robots:
        raise RuntimeError("robots:= names no robot (e.g. robots:=r1,r2)")
    tuner_file, sim_file, _ = TUNE_CONFIGS["pendulum"]
    params_file = LaunchConfiguration("params_file").perform(context) or os.path.join(share, "config", tuner_file)
    sim = LaunchConfiguration("sim").perform(context).lower() == "true"
    physics_file = LaunchConfiguration("physics_file").perform(context)
    physics = {}
    if physics_file:
        with open(physics_file) as stream:
            physics = yaml.safe_load(stream) or {}
    nodes = []
    for k, name in enumerate(robots):
        where, robot = placement(context, namespace=name, robot=name)
        nodes += [LifecycleNode(package="sysid_ros", executable=executable, name=executable, output="screen",
                                **where, parameters=[params_file, robot])
                  for executable in ("tape_recorder", "servo_tuner")]
        if sim:
            nodes.append(Node(package="sysid_ros", executable="sim_robot", name="sim_robot", output="screen", **where,
                              parameters=[os.path.join(share, "config", sim_file),
                                          {**tuning_sim("pendulum"), "seed": k, **physics.get(name, {}), **robot}]))
        nodes.append(manager(where, robot, ["sim_robot"] * sim + ["tape_recorder", "servo_tuner"]))
    return nodes


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("robots", default_value="r1", description="robot namespaces, comma-separated"),
        DeclareLaunchArgument("sim", default_value="false", description="a simulated pendulum per robot"),
        DeclareLaunchArgument("params_file", default_value="", description="tape_recorder + servo_tuner parameters"),
        DeclareLaunchArgument("physics_file", default_value="", description="YAML: robot -> hidden physics.*"),
        OpaqueFunction(function=_stacks),
    ])
