"""The ROS-free core: numpy, scipy and MuJoCo code that computes; importable without rclpy."""
