"""Helpers of `test_online` that other tests and benches use too:
the online estimator on the embedded pendulum in SimRobot, whose pole mass changes mid-run.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from sysid_ros.core.gains import PidGains
from sysid_ros.core.online import (
    OnlineConfig,
    OnlineEstimator,
    pendulum_config,
)
from sysid_ros.core.signals import JointSamples, Trajectory
from sysid_ros.core.sim import FeedbackNoise, SimRobot

LENGTH_M, ROTOR_KG_M2 = 0.5, 1e-4


NOISE = FeedbackNoise(position_rad=5e-4, effort_nm=0.01)


CHANGES = ((15.0, 1.8), (30.0, 1.1))  # (time s, pole mass kg)


S = 1_000_000_000


def config(**settings: object) -> OnlineConfig:
    return pendulum_config("hinge", LENGTH_M, ROTOR_KG_M2, **settings)


def multisine_reference(
    duration_s: float, seed: int, amplitude_rad: float = 0.12, step_s: float = 0.02
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(times, positions, velocities) of a five-sine reference starting at 0 (peak about 2.5 x amplitude)."""
    rng = np.random.default_rng(seed + 100)
    freqs, phases = rng.uniform(0.2, 1.5, 5), rng.uniform(0, 2 * np.pi, 5)
    t = np.arange(0.0, duration_s + 2 * step_s, step_s)
    pos = 2 * amplitude_rad / 5 * sum(np.sin(2 * np.pi * f * t + p) for f, p in zip(freqs, phases))
    vel = 2 * amplitude_rad / 5 * sum(2 * np.pi * f * np.cos(2 * np.pi * f * t + p) for f, p in zip(freqs, phases))
    return t, pos - pos[0], vel


def tracking_record(
    duration_s: float,
    changes: tuple[tuple[float, str, float], ...] = (),
    seed: int = 0,
    hold_from_s: float | None = None,
    resume_at_s: float | None = None,
) -> JointSamples:
    """SimRobot's pendulum under PD tracking.

    `changes` are (time s, SimRobot physical parameter, value), e.g. (15.0, "pole.mass", 1.8); between
    `hold_from_s` and `resume_at_s` the drive holds its position (the trajectory restarts after).
    """
    robot = SimRobot("pendulum", noise=NOISE, seed=seed)
    robot.set_gains("hinge", PidGains(p=80.0, d=6.0))
    times, pos, vel = multisine_reference(duration_s, seed)
    robot.follow(Trajectory(("hinge",), 0, times + 0.02, pos[:, None], vel[:, None]))
    pending = sorted(changes)
    feedback = []
    step_ns = 10_000_000
    for t_ns in range(0, int(duration_s * S), step_ns):
        while pending and pending[0][0] * S <= t_ns:
            _, name, value = pending.pop(0)
            robot.set_physical(name, value)
        if hold_from_s is not None and t_ns == int(hold_from_s * S):
            robot.hold_position()
        if resume_at_s is not None and t_ns == int(resume_at_s * S):
            robot.follow(Trajectory(("hinge",), t_ns, times + 0.02, pos[:, None] + robot.position, vel[:, None]))
        feedback += robot.advance(t_ns + step_ns - 1)
    return JointSamples(
        ("hinge",),
        np.array([f.time_ns for f in feedback]),
        np.array([f.position for f in feedback]),
        None,
        np.array([f.effort for f in feedback]),
        source="SimRobot pendulum",
    )


@lru_cache(maxsize=1)
def two_changes() -> JointSamples:
    return tracking_record(45.0, tuple((t, "pole.mass", m) for t, m in CHANGES))


def run(estimator: OnlineEstimator, samples: JointSamples, chunk: int = 50) -> tuple[list, np.ndarray, np.ndarray]:
    """Feed `samples` in chunks; (events, times s, estimates after each chunk (rows x parameters))."""
    events, times, values = [], [], []
    for k in range(0, len(samples), chunk):
        events += estimator.update(samples.slice(k, k + chunk))
        est = estimator.estimate
        times.append(est.time_ns / S)
        values.append(est.values)
    return events, np.array(times), np.array(values)


def settle_time_s(
    times: np.ndarray, mass: np.ndarray, truth: float, start_s: float, end_s: float, tolerance: float = 0.02
) -> float:
    """Time after `start_s` from which the estimate stays within `tolerance` of `truth` until `end_s`."""
    sel = (times > start_s) & (times <= end_s)
    bad = np.flatnonzero(np.abs(mass[sel] / truth - 1) >= tolerance)
    if len(bad) == 0:
        return 0.0
    if bad[-1] + 1 >= sel.sum():
        return float("inf")
    return float(times[sel][bad[-1] + 1] - start_s)
