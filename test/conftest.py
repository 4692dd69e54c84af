"""Test session set-up: a DDS domain of our own, traffic kept on this host, the venv as the ament prefix."""

from __future__ import annotations

import os
import tempfile

import pytest

from sysid_ros.ros.processes import isolate_ros_environment

DOMAIN_ID = isolate_ros_environment()  # before any test initializes rclpy
_CACHE = tempfile.TemporaryDirectory(prefix="sysid_ros_test_cache_")
os.environ["XDG_CACHE_HOME"] = _CACHE.name  # designed tapes are cached here, not in the user's ~/.cache
os.environ.setdefault("RCUTILS_LOGGING_BUFFERED_STREAM", "1")


def pytest_report_header(config: pytest.Config) -> str:
    return f"ROS_DOMAIN_ID={DOMAIN_ID} (LOCALHOST discovery), AMENT_PREFIX_PATH={os.environ['AMENT_PREFIX_PATH']}"


@pytest.fixture
def client():
    """This test's own ROS client node (background executor), closed after the test."""
    from sysid_ros.ros.client import RosClient

    c = RosClient("test_client")
    yield c
    c.close()


@pytest.fixture
def nodes(tmp_path):
    """Start sysid_ros nodes as processes: `nodes(node, name, params[, namespace=, composed=])`; every one is
    stopped by pid afterwards."""
    from sysid_ros.ros.processes import NodeProcess

    started: list[NodeProcess] = []

    def start(node: str, name: str, params: dict, namespace: str = "", composed: bool = False) -> NodeProcess:
        process = NodeProcess(node, name, params, tmp_path / "logs", namespace=namespace, composed=composed)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
