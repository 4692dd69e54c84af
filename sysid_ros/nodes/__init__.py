"""Thin rclpy nodes over the core: ROS inputs in, core calls, ROS outputs out."""
