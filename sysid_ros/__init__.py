"""sysid_ros: identify a robot's dynamics and tune its servos on the robot, with ROS 2.

- `core/`: the ROS-free library that computes (numpy, scipy, MuJoCo); importable without rclpy.
- `nodes/`: the thin rclpy nodes; `ros/`: the rclpy plumbing they, the CLI and the demo share.
- `cli/`: the `sysid-ros` command; `demo`: `make demo`, the main job on the simulated robot;
  `launching`: what the launch files share.
"""

__version__ = "0.1.0"
