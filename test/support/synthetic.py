"""Recordings from the ROS-free SimRobot with hidden physics, for tests, benchmarks and demos."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import mujoco
import numpy as np
from rosbags.typesys import Stores, get_typestore

from sysid_ros.core.bags import BagWriter
from sysid_ros.core.gains import PidGains
from sysid_ros.core.identify import DataSource, load_source, measured_velocity, rms_per_joint, torque_rows
from sysid_ros.core.identify.rollout import sequences as sd
from sysid_ros.core.linear import ArmRegressor
from sysid_ros.core.signals import JointCommands, JointSamples, smooth_like_acceleration
from sysid_ros.core.sim import FeedbackNoise, SimRobot, SmoothFriction

EPOCH_NS = 1_700_000_000_123_456_789
EFFORT_TOPIC = "/effort_controller/commands"


def multisine(t_s: np.ndarray, freqs_hz: Sequence[float], peak: float, seed: int = 0) -> np.ndarray:
    """Sum of sines with random phases, scaled so that its peak over `t_s` is `peak`."""
    rng = np.random.default_rng(seed)
    phases = rng.uniform(0, 2 * np.pi, len(freqs_hz))
    u = np.sin(2 * np.pi * np.outer(t_s, freqs_hz) + phases).sum(axis=1)
    return u * (peak / np.max(np.abs(u)))


def _samples(robot: SimRobot, feedback: list) -> JointSamples:
    return JointSamples(
        robot.joint_names,
        np.array([f.time_ns for f in feedback], dtype=np.int64),
        np.array([f.position for f in feedback]),
        np.array([f.velocity for f in feedback]),
        np.array([f.effort for f in feedback]),
        source="sim",
    )


def record_effort(
    robot: SimRobot, torque_nm: Callable[[float], np.ndarray], duration_s: float
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
    return _samples(robot, feedback), JointCommands(
        robot.joint_names, np.array(times, dtype=np.int64), np.array(values), "effort", source="sim/effort_commands"
    )


def record_position(
    robot: SimRobot, setpoint_rad: Callable[[float], np.ndarray], duration_s: float, gains: dict[str, PidGains]
) -> JointSamples:
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


ARM3_GAINS = {
    "shoulder": PidGains(p=300.0, i=0.0, d=20.0),
    "elbow": PidGains(p=150.0, i=0.0, d=8.0),
    "wrist": PidGains(p=40.0, i=0.0, d=0.8),
}


def record_pendulum(
    physics: dict[str, float],
    seed: int,
    seconds: float,
    noise: FeedbackNoise = FeedbackNoise(position_rad=5e-4, velocity_rad_s=5e-3),
) -> tuple[JointSamples, JointCommands]:
    """The pendulum with hidden `physics` (e.g. {"pole.mass": 1.3}) driven by five sines 0.2-3 Hz at 2.5 N m
    peak, commanded at 500 Hz (held 2 ms), feedback at 500 Hz; starts at EPOCH_NS + seed."""
    robot = SimRobot("pendulum", physics=physics, noise=noise, seed=seed, start_time_ns=EPOCH_NS + seed)
    t = np.arange(0, seconds + 1e-9, 0.002)
    u = multisine(t, [0.2, 0.7, 1.3, 2.1, 3.0], 2.5, seed=seed)
    return record_effort(robot, lambda ts: [u[int(round(ts / 0.002))]], seconds)


def write_effort_bag(
    path: str | Path,
    samples: JointSamples,
    commands: JointCommands,
    topic: str = EFFORT_TOPIC,
    conflicting_every: int = 0,
) -> Path:
    """A rosbag2 bag (mcap) as a recorder writes it: JointState feedback and Float64MultiArray effort commands
    stamped alike, and the recording's metadata. With `conflicting_every` = n, every n-th joint state is
    published twice at the same stamp, the first copy 0.02 rad off (a damaged recording)."""
    ts = get_typestore(Stores.ROS2_JAZZY)
    js, f64 = ts.types["sensor_msgs/msg/JointState"], ts.types["std_msgs/msg/Float64MultiArray"]
    stamp_t, header_t = ts.types["builtin_interfaces/msg/Time"], ts.types["std_msgs/msg/Header"]
    layout = ts.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    names = list(samples.joint_names)
    with BagWriter(path) as w:
        w.write_metadata({"joint_names": names, "command_interface": "effort"}, int(samples.time_ns[0]))
        for k, t in enumerate(samples.time_ns):
            t = int(t)
            header = header_t(stamp=stamp_t(sec=t // 10**9, nanosec=t % 10**9), frame_id="")
            bad = conflicting_every and k % conflicting_every == conflicting_every - 1
            for position in ([samples.position[k] + 0.02] if bad else []) + [samples.position[k]]:
                w.write_message(
                    "/joint_states",
                    "sensor_msgs/msg/JointState",
                    t,
                    js(
                        header=header,
                        name=names,
                        position=position,
                        velocity=samples.velocity[k],
                        effort=samples.effort[k],
                    ),
                )
            w.write_message(topic, "std_msgs/msg/Float64MultiArray", t, f64(layout=layout, data=commands.values[k]))
    return Path(path)


# The KUKA iiwa (arm_models.iiwa_mjcf) tracking multisine setpoints around a bent-elbow pose with PID drives:
# peak speeds 2-4.5 rad/s, away from singularities, joint limits and its data-sheet torque limits.
IIWA_POSE_RAD = np.array([0.0, 0.6, 0.0, -1.2, 0.0, 0.9, 0.0])
IIWA_AMPLITUDE_RAD = np.array([0.5, 0.35, 0.5, 0.4, 0.6, 0.5, 0.8])
IIWA_FREQS_HZ = (0.2, 0.5, 0.8, 1.1, 1.5)
IIWA_GAINS = {
    f"lbr_iiwa_joint_{k + 1}": PidGains(p=p, i=0.0, d=d)
    for k, (p, d) in enumerate(((600, 30), (600, 30), (200, 8), (300, 15), (100, 4), (60, 2.5), (40, 1.5)))
}


def iiwa_setpoints(seed: int, seconds: float, dt_s: float = 0.002) -> np.ndarray:
    """(N, 7) position setpoints every `dt_s`: five sines per joint around IIWA_POSE_RAD, each scaled to its
    amplitude over these `seconds` (place the robot on row 0 of the same call)."""
    t = np.arange(0, seconds + 1e-9, dt_s)
    return IIWA_POSE_RAD + np.column_stack(
        [a * multisine(t, IIWA_FREQS_HZ, 1.0, seed=10 * seed + j) for j, a in enumerate(IIWA_AMPLITUDE_RAD)]
    )


def record_iiwa(robot: SimRobot, seed: int, seconds: float) -> JointSamples:
    """PID tracking of `iiwa_setpoints(seed)` on a SimRobot of the iiwa placed on the first setpoint."""
    dt_s = robot.dt_ns * 1e-9
    setpoints = iiwa_setpoints(seed, seconds, dt_s)
    return record_position(robot, lambda ts: setpoints[int(round(ts / dt_s))], seconds, IIWA_GAINS)


def arm3_tracking_record(
    seed: int,
    seconds: float,
    physics: dict[str, float],
    position_noise_rad: float = 2e-4,
    velocity_noise_rad_s: float = 2e-3,
) -> JointSamples:
    """The 3-link arm tracking multisine setpoints (0.3-2.3 Hz, peaks 0.8/1.0/1.2 rad) with `ARM3_GAINS`."""
    robot = SimRobot(
        "arm3",
        physics=physics,
        noise=FeedbackNoise(position_rad=position_noise_rad, velocity_rad_s=velocity_noise_rad_s),
        seed=seed,
        start_time_ns=5_000_000_017,
    )
    t = np.arange(0, seconds + 1e-9, 0.002)
    setpoints = np.column_stack(
        [
            amp * multisine(t, [0.3, 0.7, 1.1, 1.7, 2.3], 1.0, seed=10 * seed + j)
            for j, amp in enumerate([0.8, 1.0, 1.2])
        ]
    )
    return record_position(robot, lambda ts: setpoints[int(round(ts / 0.002))], seconds, ARM3_GAINS)


def as_real_logger(
    samples: JointSamples,
    seed: int = 0,
    *,
    repeat_fraction: float = 0.06,
    miss_fraction: float = 0.03,
    gaps: int = 4,
    gap_ticks: int = 8,
    latency_ns: int = 300_000,
    on_device_clock: bool = True,
) -> JointSamples:
    """`samples` (on the robot's own clock) as a polling logger writes them: each state stamped when the logger
    saw it (0 to `latency_ns` late), some states missed (`miss_fraction`, and `gaps` runs of `gap_ticks`),
    and `repeat_fraction` of the rows polled again before the next state (the previous state, stamped
    0.4-0.6 ms later). `on_device_clock=False` stamps the states up to 0.95 ms late instead: too much jitter
    to tell which tick a state belongs to (no clock to recover)."""
    rng = np.random.default_rng(seed)
    keep = rng.random(len(samples)) >= miss_fraction
    keep[0] = keep[-1] = True
    for g in rng.choice(np.arange(10, len(samples) - gap_ticks - 10), gaps, replace=False):
        keep[g : g + gap_ticks] = False
    rows = np.flatnonzero(keep)
    late = latency_ns if on_device_clock else 950_000
    stamps = samples.time_ns[rows] + rng.integers(0, late, len(rows))
    again = rng.random(len(rows) - 1) < repeat_fraction
    again &= np.diff(stamps) > 700_000  # the repeat lands before the next state
    extra = np.flatnonzero(again)
    rows = np.r_[rows, rows[extra]]
    stamps = np.r_[stamps, stamps[extra] + rng.integers(400_000, 600_000, len(extra))]
    order = np.argsort(stamps, kind="stable")
    rows, stamps = rows[order], stamps[order]

    def pick(v):
        return None if v is None else v[rows]

    return JointSamples(
        samples.joint_names, stamps, pick(samples.position), pick(samples.velocity), pick(samples.effort), "logger"
    )


# The iiwa as a real arm's log (issue 19): hidden payload and damping, a smooth Coulomb friction per joint that
# MuJoCo's friction loss cannot represent, a joint-torque sensor that reads an offset; logged by a polling logger.
IIWA_HIDDEN = {
    "payload.mass": 0.8,
    **{f"lbr_iiwa_joint_{k + 1}.damping": d for k, d in enumerate((0.9, 0.7, 0.6, 0.5, 0.35, 0.25, 0.15))},
}
IIWA_FRICTION = SmoothFriction(
    coulomb_nm=(2.0, 2.0, 1.2, 1.2, 0.6, 0.4, 0.3),
    velocity_scale_rad_s=(0.08, 0.08, 0.06, 0.06, 0.05, 0.05, 0.04),
    effort_offset_nm=(0.8, -1.5, 0.4, 0.9, -0.3, 0.2, -0.15),
)
IIWA_LOG_NOISE = FeedbackNoise(position_rad=2e-4, velocity_rad_s=2e-3, effort_nm=0.05)


def iiwa_logged_bag(
    model_path: str | Path,
    path: str | Path,
    seed: int,
    seconds: float,
    logger_seed: int,
    friction: SmoothFriction = IIWA_FRICTION,
) -> tuple[Path, JointSamples, SimRobot]:
    """The iiwa of `model_path` with `IIWA_HIDDEN` physics and `friction` tracking `iiwa_setpoints(seed)`,
    state and torque every 2 ms on its own clock, written to a bag as a polling logger logs it
    (`as_real_logger`). Returns the bag, the logged samples and the robot (its model holds the hidden physics)."""
    start = list(iiwa_setpoints(seed, seconds)[0])
    robot = SimRobot(
        str(model_path),
        physics=IIWA_HIDDEN,
        noise=IIWA_LOG_NOISE,
        seed=seed,
        initial_positions=start,
        friction=friction,
    )
    logged = as_real_logger(record_iiwa(robot, seed, seconds), seed=logger_seed)
    commands = JointCommands(logged.joint_names, logged.time_ns, logged.effort, "effort")
    return write_effort_bag(path, logged, commands), logged, robot


def iiwa_friction_problem(model_path: str | Path, train: str | Path, val: str | Path, offsets: bool = True) -> dict:
    """The problem document for `iiwa_logged_bag` logs: per joint damping, friction loss and (with `offsets`)
    `joint_effort_offset`, and the payload mass; 0.25 s windows from measured states, at most 30 iterations."""
    parameters = []
    for k in range(7):
        joint = f"lbr_iiwa_joint_{k + 1}"
        parameters += [
            {
                "name": f"j{k + 1}_damping",
                "kind": "joint_damping",
                "joint": joint,
                "min": 0.0,
                "max": 5.0,
                "start": 0.5,
            },
            {
                "name": f"j{k + 1}_frictionloss",
                "kind": "joint_frictionloss",
                "joint": joint,
                "min": 0.0,
                "max": 5.0,
                "start": 0.1,
            },
        ]
        if offsets:
            parameters.append(
                {
                    "name": f"j{k + 1}_offset",
                    "kind": "joint_effort_offset",
                    "joint": joint,
                    "min": -5.0,
                    "max": 5.0,
                    "start": 0.0,
                }
            )
    parameters.append(
        {"name": "payload_mass", "kind": "body_mass", "body": "payload", "min": 0.05, "max": 3.0, "start": 0.5}
    )
    return {
        "model": str(model_path),
        "joints": [f"lbr_iiwa_joint_{k + 1}" for k in range(7)],
        "training": [{"path": str(train), "control": "effort"}],
        "validation": [{"path": str(val), "control": "effort"}],
        "segment_s": 0.25,
        "smoothing_samples": 7,
        "initial_state": "measured",
        "noise": {"position_rad": IIWA_LOG_NOISE.position_rad},
        "parameters": parameters,
        "optimizer": {"max_iters": 30},
    }


def true_torque_rms(model_path: str | Path, robot: SimRobot, bag: str | Path) -> dict[str, float]:
    """Held-out joint torque RMS of the true model (the robot's inertials and damping, its true smooth friction
    and offset) on `bag`, filtered as `torque_check` filters every model's record (friction on the measured
    velocity, smoothed like the torque)."""
    model = mujoco.MjModel.from_xml_path(str(model_path))
    joints = list(robot.joint_names)
    maps = sd.joint_maps(model, joints, {})
    ((samples, commands),) = load_source(DataSource(Path(bag), control="effort"), joints)
    deriv, tau, ok = torque_rows(model, maps, samples, commands)
    velocity = measured_velocity(model, maps, samples)
    arm = ArmRegressor(robot.model, ("viscous", "armature"))
    if arm.joint_names != tuple(joints):
        raise ValueError("the robot's joints are not in the model's DOF order")
    predicted = arm.compute(deriv.q[ok], deriv.qd[ok], deriv.qdd[ok]) @ arm.true_parameters()
    if robot.friction is not None:  # on the measured velocity, filtered like the torque (as `torque_check` does)
        friction = smooth_like_acceleration(deriv, robot.friction.torque(deriv.qd if velocity is None else velocity))
        predicted += friction[ok] + robot.friction.offset(arm.nv)
    return rms_per_joint(tau[ok] - predicted, arm.joint_names)
