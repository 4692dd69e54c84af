"""A stand-in ros2_control controller: a real rclpy node declaring exactly one controller's PID parameters.

The C++ controllers cannot run here (no controller_manager wheels), so each stand-in declares, per joint
under `gains.<joint>.`, the parameters (names, types, defaults, read-only flags) of the upstream
`generate_parameter_library` definitions in ros-controls/ros2_controllers:

- jtc: jazzy 08384a2c4 joint_trajectory_controller/src/joint_trajectory_controller_parameters.yaml
- pid_controller: jazzy b0128fed7 pid_controller/src/pid_controller.yaml
- jtc_toolbox5: master 94e74de35 joint_trajectory_controller/src/joint_trajectory_controller_parameters.yaml
- pid_controller_toolbox5: master 94e74de35 pid_controller/src/pid_controller.yaml
  (the PID fields are control_toolbox >= 5's, see control_toolbox/src/pid_ros.cpp)
- velocity_pid: a made-up layout (kp, kv) that no style knows.

Run: `python standin_controller.py STYLE JOINT [JOINT ...] --ros-args -r __node:=NAME [--params-file F]`.
Like the real controllers it takes start-up values from `--params-file` (overrides of declared names).
"""

from __future__ import annotations

import math
import sys

INF = math.inf
TOOLBOX5 = {
    "p": 0.0,
    "i": 0.0,
    "d": 0.0,
    "u_clamp_max": INF,
    "u_clamp_min": -INF,
    "i_clamp_max": INF,
    "i_clamp_min": -INF,
    "antiwindup_strategy": "none",
    "tracking_time_constant": 0.0,
}
DECLARED = {
    "jtc": {"p": 0.0, "i": 0.0, "d": 0.0, "i_clamp": 0.0, "ff_velocity_scale": 0.0},
    "pid_controller": {
        "p": 0.0,
        "i": 0.0,
        "d": 0.0,
        "antiwindup": False,
        "i_clamp_max": 0.0,
        "i_clamp_min": 0.0,
        "feedforward_gain": 0.0,
        "angle_wraparound": False,
        "save_i_term": True,
    },
    "jtc_toolbox5": {**TOOLBOX5, "ff_velocity_scale": 0.0, "error_deadband": 0.0},
    "pid_controller_toolbox5": {
        **TOOLBOX5,
        "error_deadband": 1e-16,
        "feedforward_gain": 0.0,
        "angle_wraparound": False,
        "save_i_term": True,
        "activate_state_publisher": False,
    },
    "velocity_pid": {"kp": 1.0, "kv": 0.1},
}


def main() -> None:
    import rclpy
    from rclpy.node import Node
    from rclpy.utilities import remove_ros_args

    rclpy.init(args=sys.argv)
    style, *joints = remove_ros_args(sys.argv)[1:]
    node = Node("controller")
    for joint in joints:
        for name, default in DECLARED[style].items():
            node.declare_parameter(f"gains.{joint}.{name}", default)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
