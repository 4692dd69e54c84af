"""sysid_ros: identify a robot's dynamics and tune its servos on the robot, with ROS 2."""

__version__ = "0.1.0"
