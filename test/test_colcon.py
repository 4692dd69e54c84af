"""The package builds and tests as a ROS 2 package: `colcon build` and `colcon test` (colcon from PyPI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COLCON = Path(sys.executable).with_name("colcon")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("SYSID_ROS_IN_COLCON") == "1", reason="already inside colcon test"),
    pytest.mark.skipif(not COLCON.exists(), reason="colcon is not installed in this venv"),
]


def _colcon(*args: str, base: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SYSID_ROS_IN_COLCON": "1"}
    return subprocess.run(
        [
            str(COLCON),
            "--log-base",
            str(base / "log"),
            *args,
            "--base-paths",
            str(ROOT),
            "--build-base",
            str(base / "build"),
            "--install-base",
            str(base / "install"),
        ],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_colcon_finds_the_interface_packages_as_a_workspace_would(tmp_path: Path):
    """`colcon build --base-paths src src/sysid_ros/interfaces` (README) builds sysid_ros_interfaces as the
    ament_cmake package `make setup` builds (same CMakeLists), and never our controller_manager_msgs (COLCON_IGNORE:
    a ROS 2 install has the real one). Building it here again would only repeat `make setup`'s minute of CPU."""
    listed = subprocess.run(
        [str(COLCON), "--log-base", str(tmp_path / "log"), "list", "--base-paths", str(ROOT), str(ROOT / "interfaces")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    packages = {line.split("\t")[0]: line.split("\t")[2] for line in listed.stdout.splitlines()}
    assert packages == {"sysid_ros": "(ros.ament_python)", "sysid_ros_interfaces": "(ros.ament_cmake)"}, listed.stdout


def test_colcon_build_install_and_test(tmp_path: Path):
    built = _colcon("build", base=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    prefix = tmp_path / "install" / "sysid_ros"
    for path in (
        "lib/sysid_ros/sim_robot",
        "lib/sysid_ros/sysid-ros",
        "share/sysid_ros/package.xml",
        "share/sysid_ros/launch/sim_robot.launch.py",
        "share/sysid_ros/config/sim_robot.yaml",
        "share/sysid_ros/config/models/arm3.xml",
        "share/ament_index/resource_index/packages/sysid_ros",
    ):
        assert (prefix / path).exists(), f"colcon did not install {path}"
    # The installed package finds its models through the ament index, not the source tree.
    site = next(prefix.glob("lib/python3*/site-packages"))
    env = {**os.environ, "PYTHONPATH": str(site), "AMENT_PREFIX_PATH": f"{prefix}:{os.environ['AMENT_PREFIX_PATH']}"}
    code = "from sysid_ros.core.files.paths import model_path; print(model_path('arm3'))"
    found = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(prefix / "share/sysid_ros/config/models/arm3.xml")
    # colcon test runs the package's pytest suite (a quick subset here; the full suite is this run).
    tested = _colcon(
        "test", "--return-code-on-test-failure", "--pytest-args", "-k", "launch or sim_core", base=tmp_path
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    report = (tmp_path / "build" / "sysid_ros" / "pytest.xml").read_text()
    assert 'failures="0"' in report and 'errors="0"' in report and "test_launch_file_resolves" in report
