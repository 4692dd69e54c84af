"""The simulated KUKA iiwa that plays periodic tapes: hidden payload and damping, PID position drives, feedback noise
(shared by test_identify_periodic and bench/bench_periodic_coverage.py; needs pybullet_data for the URDF)."""

from __future__ import annotations

from support.synthetic import IIWA_GAINS, IIWA_POSE_RAD, record_position
from sysid_ros.core import tapes
from sysid_ros.core.identify import IIWA_JOINTS
from sysid_ros.core.sim import FeedbackNoise, SimRobot

RATE_HZ = 500.0
TORQUE_NOISE_NM = 0.2
NOISE = FeedbackNoise(position_rad=2e-4, velocity_rad_s=2e-3, effort_nm=TORQUE_NOISE_NM)
HIDDEN = {
    "payload.mass": 0.8,
    **{f"{j}.damping": d for j, d in zip(IIWA_JOINTS, (0.9, 0.7, 0.6, 0.5, 0.35, 0.25, 0.15))},
}
TRAVEL = (0.8, 0.5, 0.8, 0.6, 1.0, 0.8, 1.2)
SPEED = (1.5, 1.5, 1.8, 1.8, 2.5, 2.5, 3.0)
TORQUE = (320.0, 320.0, 176.0, 176.0, 110.0, 40.0, 40.0)  # the iiwa's data sheet
ENVELOPES = {
    j: tapes.Envelope(float(o), t, s, q) for j, o, t, s, q in zip(IIWA_JOINTS, IIWA_POSE_RAD, TRAVEL, SPEED, TORQUE)
}
EPOCH_NS = 1_764_590_400_000_000_000


def play(model, tape: tapes.Tape, seed: int):
    """(samples, the robot time of the tape's t = 0): tracked after holding its start for 2 s, as a robot does."""
    start = tapes.sample(tape, [0.0]).position[0]
    robot = SimRobot(
        str(model),
        physics=HIDDEN,
        noise=NOISE,
        seed=seed,
        initial_positions=list(start),
        command_rate_hz=RATE_HZ,
        publish_rate_hz=RATE_HZ,
        start_time_ns=EPOCH_NS + seed * 10**11,
    )
    record_position(robot, lambda t: start, 2.0, IIWA_GAINS)
    t0 = robot.time_ns
    samples = record_position(robot, lambda t: tapes.sample(tape, [t]).position[0], tapes.duration_s(tape), IIWA_GAINS)
    return samples, t0
