"""Recordings from the ROS-free SimRobot with hidden physics, for tests, benchmarks and demos."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..gains import PidGains
from ..signals import JointCommands, JointSamples
from ..sim import SimRobot


def multisine(t_s: np.ndarray, freqs_hz: Sequence[float], peak: float, seed: int = 0) -> np.ndarray:
    """Sum of sines with random phases, scaled so that its peak over `t_s` is `peak`."""
    rng = np.random.default_rng(seed)
    phases = rng.uniform(0, 2 * np.pi, len(freqs_hz))
    u = np.sin(2 * np.pi * np.outer(t_s, freqs_hz) + phases).sum(axis=1)
    return u * (peak / np.max(np.abs(u)))


def _samples(robot: SimRobot, feedback: list) -> JointSamples:
    return JointSamples(robot.joint_names, np.array([f.time_ns for f in feedback], dtype=np.int64),
                        np.array([f.position for f in feedback]), np.array([f.velocity for f in feedback]),
                        np.array([f.effort for f in feedback]), source="sim")


def record_effort(robot: SimRobot, torque_nm: Callable[[float], np.ndarray], duration_s: float
                  ) -> tuple[JointSamples, JointCommands]:
    """Send `torque_nm(t)` as effort commands at the robot's command rate; return feedback and commands."""
    period_ns = robot.control_steps * robot.dt_ns
    t0 = robot.time_ns
    feedback, times, values = [], [], []
    for k in range(int(round(duration_s * 1e9 / period_ns)) + 1):
        now = t0 + k * period_ns
        u = np.atleast_1d(np.asarray(torque_nm((now - t0) * 1e-9), dtype=float))
        robot.command("effort", u)
        times.append(now)
        values.append(u)
        feedback += robot.advance(now)
    return _samples(robot, feedback), JointCommands(robot.joint_names, np.array(times, dtype=np.int64),
                                                    np.array(values), "effort", source="sim/effort_commands")


def record_position(robot: SimRobot, setpoint_rad: Callable[[float], np.ndarray], duration_s: float,
                    gains: dict[str, PidGains]) -> JointSamples:
    """Track `setpoint_rad(t)` with the robot's PID drive; the feedback's effort is the applied torque."""
    for joint, g in gains.items():
        robot.set_gains(joint, g)
    period_ns = robot.control_steps * robot.dt_ns
    t0 = robot.time_ns
    feedback = []
    for k in range(int(round(duration_s * 1e9 / period_ns)) + 1):
        now = t0 + k * period_ns
        robot.command("position", np.asarray(setpoint_rad((now - t0) * 1e-9), dtype=float))
        feedback += robot.advance(now)
    return _samples(robot, feedback)


ARM3_GAINS = {"shoulder": PidGains(p=300.0, i=0.0, d=20.0), "elbow": PidGains(p=150.0, i=0.0, d=8.0),
              "wrist": PidGains(p=40.0, i=0.0, d=0.8)}
