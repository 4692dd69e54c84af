"""SimRobot's drive encoder: the PID sees its encoder late and noisy, and the feedback reports what it saw."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sysid_ros.core.errors import ConfigError
from sysid_ros.core.gains import PidGains
from sysid_ros.core.sim import DriveEncoder, FeedbackNoise, SimRobot

S = 1_000_000_000


def _swing(encoder: DriveEncoder | None) -> list:
    robot = SimRobot(
        "pendulum", command_rate_hz=500.0, publish_rate_hz=500.0, initial_positions=[0.4], drive_encoder=encoder
    )
    robot.command("effort", [0.5])
    return robot.advance(S)


def test_the_feedback_reports_the_drives_late_encoder_and_its_backward_difference():
    truth = _swing(None)
    late = _swing(DriveEncoder(delay_s=0.01))  # 5 control updates at 500 Hz
    q_true = np.array([f.position[0] for f in truth])
    q_late = np.array([f.position[0] for f in late])
    assert np.ptp(q_true) > 0.3  # it swings, so a delay shows
    np.testing.assert_array_equal(q_late[5:], q_true[:-5])  # effort mode: same physics, seen 10 ms late
    v_late = np.array([f.velocity[0] for f in late])
    np.testing.assert_allclose(v_late[6:], np.diff(q_late)[5:] * 500.0, rtol=1e-12)
    # the reported torque is what the drive applies now, not delayed
    assert all(f.effort[0] == 0.5 for f in late[1:])


def test_encoder_noise_reaches_the_torque_through_kd_as_on_a_drive():
    sigma, kd, rate = 1e-4, 0.4, 500.0
    robot = SimRobot(
        "pendulum", command_rate_hz=rate, publish_rate_hz=rate, drive_encoder=DriveEncoder(noise_rad=sigma, seed=3)
    )
    robot.set_gains("hinge", PidGains(p=0.0, d=kd))
    tau = np.array([f.effort[0] for f in robot.advance(4 * S)])[10:]
    # a backward difference of white noise has std sqrt(2) sigma rate; kd carries it to the torque
    expected = kd * math.sqrt(2.0) * sigma * rate
    assert np.std(tau) == pytest.approx(expected, rel=0.06)  # 2000 samples: the std is known to ~3 %
    assert abs(np.mean(tau)) < 0.1 * expected


def test_a_drive_encoder_excludes_feedback_noise_and_checks_its_values():
    with pytest.raises(ConfigError, match="either feedback noise or a drive encoder"):
        SimRobot("pendulum", noise=FeedbackNoise(position_rad=1e-4), drive_encoder=DriveEncoder(noise_rad=1e-4))
    with pytest.raises(ConfigError, match="drive encoder delay_s"):
        DriveEncoder(delay_s=-0.001)
