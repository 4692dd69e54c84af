"""The ROS-free simulated robot: timing grid, drive, feedback, hidden physics, trajectories, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sysid_ros.core.errors import ConfigError, DataError, GainsError, ModelError
from sysid_ros.core.gains import GainGuard, PidGains, split_parameter_name
from sysid_ros.core.signals import Trajectory
from sysid_ros.core.sim import FeedbackNoise, SimRobot

S = 1_000_000_000


def positions(samples) -> np.ndarray:
    return np.array([f.position for f in samples])


def test_feedback_on_an_exact_grid():
    robot = SimRobot("pendulum", publish_rate_hz=250.0, command_rate_hz=500.0, start_time_ns=3 * S)
    samples = robot.advance(4 * S)
    times = np.array([f.time_ns for f in samples])
    assert times[0] == 3 * S and times[-1] == 4 * S and np.all(np.diff(times) == 4_000_000)
    assert robot.advance(4 * S) == []  # nothing is due twice
    assert [f.time_ns for f in robot.advance(4 * S + 4_000_000)] == [4 * S + 4_000_000]


def test_rates_must_fit_the_physics_step():
    with pytest.raises(ConfigError, match="whole number of physics steps"):
        SimRobot("pendulum", publish_rate_hz=300.0)  # 3.33 ms is not a multiple of 2 ms
    with pytest.raises(ConfigError, match="command_rate_hz must be > 0"):
        SimRobot("pendulum", command_rate_hz=0.0)


def test_unknown_joint_and_missing_model():
    with pytest.raises(ConfigError, match="not hinge or slide joints"):
        SimRobot("pendulum", joints=["elbow"])
    with pytest.raises(ModelError, match="model not found"):
        SimRobot("/nonexistent/robot.xml")


def test_commands_are_checked_before_they_reach_physics():
    robot = SimRobot("arm3")
    with pytest.raises(DataError, match="2 values, expected 3"):
        robot.command("effort", [1.0, 2.0])
    with pytest.raises(DataError, match=r"not finite for joints \['elbow'\]"):
        robot.command("effort", [0.0, math.nan, 0.0])
    with pytest.raises(ConfigError, match="unknown command interface"):
        robot.command("current", [0.0, 0.0, 0.0])
    with pytest.raises(DataError, match=r"unknown joints \['hinge'\]"):
        robot.follow(Trajectory(("hinge",), 0, [1.0], [[0.1]]))
    assert np.all(np.isfinite(robot.data.qpos))


def test_effort_is_the_held_drive_output():
    # A PD drive updated at 100 Hz while the robot reports at 500 Hz: effort steps every 5th sample.
    robot = SimRobot("pendulum", command_rate_hz=100.0, publish_rate_hz=500.0, initial_positions=[0.3])
    robot.set_gains("hinge", PidGains(p=10.0, d=0.5))
    robot.command("position", [0.0])
    effort = np.array([f.effort[0] for f in robot.advance(robot.time_ns + S)])
    changes = np.flatnonzero(np.diff(effort) != 0) + 1
    assert len(changes) > 50 and np.all(changes % 5 == 0)


def test_torque_limit_clips_the_drive():
    robot = SimRobot("pendulum", torque_limits_nm=[1.5])
    robot.command("effort", [10.0])
    assert np.all(np.array([f.effort[0] for f in robot.advance(S // 10)]) == 1.5)


def test_feedback_delay_and_noise():
    truth = SimRobot("pendulum", initial_positions=[0.4])
    lagged = SimRobot("pendulum", initial_positions=[0.4], noise=FeedbackNoise(delay_s=0.01))
    for robot in (truth, lagged):
        robot.command("effort", [0.0])
    a, b = positions(truth.advance(2 * S)), positions(lagged.advance(2 * S))
    assert np.array_equal(b[5:], a[:-5])  # 10 ms at 500 Hz: five samples behind, stamps unchanged
    noisy = SimRobot("pendulum", initial_positions=[0.4], noise=FeedbackNoise(position_rad=0.002), seed=7)
    noisy.command("effort", [0.0])
    residual = positions(noisy.advance(2 * S)) - a
    # 1001 samples: the sample std is within 2.2 % (1 sigma) of 2 mrad; allow 10 %.
    assert residual.std() == pytest.approx(0.002, rel=0.10)
    with pytest.raises(ConfigError):
        FeedbackNoise(position_rad=-1.0)


def test_hidden_physics_changes_live_and_keeps_the_state():
    robot = SimRobot("pendulum", physics={"hinge.damping": 0.0, "hinge.frictionloss": 0.0}, initial_positions=[0.05])
    robot.command("effort", [0.0])
    robot.advance(S)
    before = robot.position.copy()
    robot.set_physical("pole.mass", 2.6)  # a payload doubles the bob: period unchanged for a point mass
    assert np.array_equal(robot.position, before)
    assert robot.physical_parameters()["pole.mass"] == 2.6
    with pytest.raises(ConfigError, match="unknown physical parameter"):
        robot.set_physical("hinge.stiffness", 1.0)
    with pytest.raises(ConfigError, match="finite"):
        robot.set_physical("hinge.damping", math.nan)


def test_gains_guard():
    guard = GainGuard(p_max=100.0)
    robot = SimRobot("pendulum", gain_guard=guard)
    with pytest.raises(GainsError, match=r"gain p=150.0 outside the guard \[0, 100.0\]"):
        robot.set_gains("hinge", PidGains(p=150.0))
    with pytest.raises(GainsError, match="finite"):
        robot.set_gains("hinge", PidGains(d=math.inf))
    assert robot.gains["hinge"] == PidGains()
    assert split_parameter_name("gains.left_arm.joint_1.ff_velocity_scale") == ("left_arm.joint_1", "ff_velocity_scale")
    assert split_parameter_name("gains.hinge.kp") is None


def test_trajectory_interpolation():
    linear = Trajectory(("a",), 0, [1.0, 2.0], [[1.0], [3.0]])
    p, v, _ = linear.sample(S // 2, np.array([0.0]), np.array([0.0]))
    assert p[0] == pytest.approx(0.5) and v[0] == pytest.approx(1.0)
    cubic = Trajectory(("a",), 0, [1.0, 2.0], [[1.0], [3.0]], [[2.0], [0.0]])
    for t, q, qd in ((S, 1.0, 2.0), (2 * S, 3.0, 0.0)):
        p, v, _ = cubic.sample(t, np.array([0.0]), np.array([0.0]))
        assert (p[0], v[0]) == pytest.approx((q, qd))
    p, v, _ = cubic.sample(5 * S, np.array([0.0]), np.array([0.0]))
    assert (p[0], v[0]) == (3.0, 0.0)  # holds the last point at rest
    with pytest.raises(DataError, match="strictly increasing"):
        Trajectory(("a",), 0, [1.0, 1.0], [[1.0], [2.0]])


def test_trajectory_tracked_by_the_drive():
    robot = SimRobot("pendulum", physics={"hinge.frictionloss": 0.0})
    robot.set_gains("hinge", PidGains(p=60.0, i=100.0, d=4.0, i_clamp=3.0, ff_velocity_scale=0.1))
    robot.follow(Trajectory(("hinge",), robot.time_ns, [1.0, 2.0], [[0.2], [0.3]], [[0.2], [0.0]]))
    samples = robot.advance(robot.time_ns + 4 * S)
    assert samples[-1].position[0] == pytest.approx(0.3, abs=2e-3)  # integral action removes the sag


def test_a_real_arm_description_from_a_registry_package():
    """The KUKA iiwa URDF that pybullet's wheel ships: motors are added, its effort limits kept."""
    pybullet_data = pytest.importorskip("pybullet_data")
    from pathlib import Path

    robot = SimRobot(str(Path(pybullet_data.getDataPath()) / "kuka_iiwa" / "model.urdf"), physics_dt_s=0.001)
    assert robot.joint_names == tuple(f"lbr_iiwa_joint_{k}" for k in range(1, 8))
    assert np.all(robot.torque_limits_nm == 300.0)
    robot.command("effort", [0.0] * 7)
    samples = robot.advance(robot.time_ns + S // 2)
    assert len(samples) == 251 and np.all(np.isfinite(positions(samples)))
    assert abs(samples[-1].position[1]) > 1e-3  # unpowered, the arm sags under gravity


def test_a_torque_limit_above_the_motor_range_is_applied_as_reported():
    # The pendulum's motor range is +-3 N m; a 6 N m override must reach the physics, not only the report.
    free = SimRobot("pendulum", torque_limits_nm=[6.0], physics={"hinge.damping": 0.0, "hinge.frictionloss": 0.0})
    free.command("effort", [5.0])
    samples = free.advance(S // 10)
    assert samples[-1].effort[0] == 5.0
    assert free.data.qfrc_actuator[0] == pytest.approx(5.0)
