"""Test session set-up: a DDS domain of our own, traffic kept on this host, the venv as the ament prefix."""

from __future__ import annotations

import fcntl
import os
import random
import sys
from pathlib import Path

import pytest

_LOCK_DIR = Path("/tmp/sysid_ros_domains")
_held_lock = None


def _claim_domain_id() -> int:
    """A ROS_DOMAIN_ID in 1..232 no other test run on this host holds (233+ makes Fast DDS exit)."""
    global _held_lock
    _LOCK_DIR.mkdir(exist_ok=True)
    ids = list(range(1, 233))
    random.Random(os.getpid()).shuffle(ids)
    for domain in ids:
        handle = open(_LOCK_DIR / f"{domain}.lock", "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _held_lock = handle  # held until this process exits
        return domain
    raise RuntimeError("no free ROS domain id in 1..232")


os.environ["ROS_DOMAIN_ID"] = str(_claim_domain_id())
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("AMENT_PREFIX_PATH", sys.prefix)
os.environ.setdefault("RCUTILS_LOGGING_BUFFERED_STREAM", "1")


def pytest_report_header(config: pytest.Config) -> str:
    return f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']} (LOCALHOST discovery), AMENT_PREFIX_PATH={os.environ['AMENT_PREFIX_PATH']}"
