"""Thin rclpy nodes over the core: ROS inputs in, core calls, ROS outputs out (their shared plumbing: `ros/`).

- `sim_robot`: a simulated robot that behaves like a ros2_control robot; `tape_recorder`: plays tapes through
  the command interface inside the envelope and records bags; `identifier`: runs an identification problem.
- `servo_tuner`: tunes, proposes, applies and canaries gains; `online_estimator`: the adaptive estimator;
  `lifecycle_manager`: a robot's managed bring-up; `robot_stack`: recorder, tuner and manager in one process.
"""
