"""Test session set-up: a DDS domain of our own, traffic kept on this host, the venv as the ament prefix."""

from __future__ import annotations

import os

import pytest

from sysid_ros.nodes.processes import isolate_ros_environment

DOMAIN_ID = isolate_ros_environment()  # before any test initializes rclpy
os.environ.setdefault("RCUTILS_LOGGING_BUFFERED_STREAM", "1")


def pytest_report_header(config: pytest.Config) -> str:
    return (f"ROS_DOMAIN_ID={DOMAIN_ID} (LOCALHOST discovery), "
            f"AMENT_PREFIX_PATH={os.environ['AMENT_PREFIX_PATH']}")
