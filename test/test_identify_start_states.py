"""Start states chosen from the data: the measured velocity when it is exact, smoothed positions when the
velocity is a noisy difference of positions, is late, or is missing (`start_states.choose_start_states`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from support.synthetic import multisine, record_effort
from sysid_ros.core.identify import choose_start_states
from sysid_ros.core.sim import FeedbackNoise, SimRobot


@pytest.fixture(scope="module")
def swinging():
    """4 s of the pendulum under a multisine torque: 0.2 mrad position noise, an exact velocity."""
    robot = SimRobot("pendulum", noise=FeedbackNoise(position_rad=2e-4), seed=3)
    t = np.arange(0, 4.0 + 1e-9, 0.002)
    u = multisine(t, [0.3, 0.9, 1.7, 2.6], 2.0, seed=3)
    samples, _ = record_effort(robot, lambda ts: [u[int(round(ts / 0.002))]], 4.0)
    return samples


def test_exact_velocity_is_used_as_measured(swinging):
    choice = choose_start_states([swinging], ["hinge"])
    assert choice.velocity == "measured" and choice.smoothing_samples == 7
    # 0.2 mrad through a 7-sample derivative at 500 Hz: 0.2e-3 * 0.189 / 0.002 = 0.019 rad/s
    assert choice.derivative_noise["hinge"] == pytest.approx(0.019, rel=0.2)
    assert choice.velocity_noise["hinge"] < 1e-3 and "agrees" in choice.reason


def test_a_difference_of_noisy_positions_is_replaced_by_smoothed_positions(swinging):
    q = swinging.position
    diff = np.vstack([np.zeros((1, 1)), np.diff(q, axis=0) / 0.002])  # what a driver without a velocity sends
    choice = choose_start_states([replace(swinging, velocity=diff)], ["hinge"])
    assert choice.velocity == "positions" and "noisier" in choice.reason
    assert choice.velocity_noise["hinge"] > 5 * choice.derivative_noise["hinge"]


def test_a_late_velocity_disagrees_with_the_positions(swinging):
    late = np.roll(swinging.velocity, 10, axis=0)  # 20 ms late (a filtered velocity), noise-free
    choice = choose_start_states([replace(swinging, velocity=late)], ["hinge"])
    assert choice.velocity == "positions" and "differs from the positions' derivative" in choice.reason


def test_no_velocity_means_positions(swinging):
    choice = choose_start_states([replace(swinging, velocity=None)], ["hinge"])
    assert choice.velocity == "positions" and "no measured velocity" in choice.reason
