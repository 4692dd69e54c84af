"""ament_python build of sysid_ros: `colcon build` on a robot, `pip install -e .` in a venv."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "sysid_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*", "bench", "bench.*"]),
    package_data={PACKAGE: ["py.typed"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
        (f"share/{PACKAGE}/config/models", glob("config/models/*")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="sysid_ros developers",
    maintainer_email="sysid-ros@example.com",
    description="Identify a robot's dynamics and tune its servos on the robot, with ROS 2.",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "sim_robot = sysid_ros.nodes.sim_robot:main",
            "tape_recorder = sysid_ros.nodes.tape_recorder:main",
            "identifier = sysid_ros.nodes.identifier:main",
            "online_estimator = sysid_ros.nodes.online_estimator:main",
            "servo_tuner = sysid_ros.nodes.servo_tuner:main",
            "lifecycle_manager = sysid_ros.nodes.lifecycle_manager:main",
            "robot_stack = sysid_ros.nodes.robot_stack:main",
            "sysid-ros = sysid_ros.cli:main",
        ],
    },
)
