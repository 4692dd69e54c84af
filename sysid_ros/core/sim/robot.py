"""A simulated ros2_control arm on MuJoCo: drives with sample-and-hold PID, noisy feedback, hidden physics.

`SimRobot` is what the `sim_robot` node wraps; it is ROS-free so the same plant serves in-process tests.
By default the drive's PID sees the true state and `FeedbackNoise` acts on the reported feedback only; with
a `DriveEncoder` the PID itself closes its loop on a late, noisy encoder (the servo tuner's plants).
Time is an integer count of physics steps; commands, control updates and feedback samples happen on
that grid, so runs are exactly reproducible for a given seed.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from ..errors import ConfigError, DataError, ModelError
from ..files import load_spec
from ..gains import GainGuard, PidGains
from ..signals import Trajectory
from .motors import constant_bias

PHYSICAL_FIELDS = ("damping", "frictionloss", "armature")  # per joint; bodies have `mass`
INTERFACES = ("effort", "position", "velocity")


@dataclass(frozen=True)
class FeedbackNoise:
    """What the robot's sensors add to the truth: Gaussian noise, encoder quantization, a lag."""

    position_rad: float = 0.0
    velocity_rad_s: float = 0.0
    effort_nm: float = 0.0
    encoder_resolution_rad: float = 0.0
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"feedback noise {name} must be finite and >= 0, got {value}")


@dataclass(frozen=True)
class DriveEncoder:
    """What the drive's own PID sees, when it is not the truth: its encoder `delay_s` late (rounded to whole
    control updates) with Gaussian noise, and velocity by backward difference over one control update.

    With a drive encoder the PID closes its loop on these measurements, and every feedback sample reports
    the drive's latest measurement (position and velocity) with the torque it applies now (not delayed):
    delay, noise through kd and sample-and-hold then act as on hardware. `seed` seeds the encoder's noise.
    """

    noise_rad: float = 0.0
    delay_s: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("noise_rad", "delay_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"drive encoder {name} must be finite and >= 0, got {value}")


@dataclass(frozen=True)
class SmoothFriction:
    """Friction a real joint shows beyond MuJoCo's damping and friction loss, and its torque sensor's offset.

    Per joint (in the robot's joint order), applied as a generalised force before every physics step:
    -(coulomb_nm tanh(v / velocity_scale_rad_s) + stribeck_nm tanh(v / velocity_scale_rad_s)
    exp(-(v / stribeck_velocity_rad_s)^2)). The sensor reports the drive's torque plus `effort_offset_nm`.
    """

    coulomb_nm: tuple[float, ...]
    velocity_scale_rad_s: tuple[float, ...]
    effort_offset_nm: tuple[float, ...] = ()
    stribeck_nm: tuple[float, ...] = ()
    stribeck_velocity_rad_s: float = 0.1

    def __post_init__(self) -> None:
        n = len(self.coulomb_nm)
        for name in ("velocity_scale_rad_s", "effort_offset_nm", "stribeck_nm"):
            values = getattr(self, name)
            if len(values) not in ((n,) if name == "velocity_scale_rad_s" else (0, n)):
                raise ConfigError(f"smooth friction {name} has {len(values)} values for {n} joints")
        if (
            not all(
                math.isfinite(v)
                for name in ("coulomb_nm", "effort_offset_nm", "stribeck_nm")
                for v in getattr(self, name)
            )
            or min(self.coulomb_nm, default=0.0) < 0
        ):
            raise ConfigError("smooth friction torques must be finite and the Coulomb levels >= 0")
        if not all(v > 0 and math.isfinite(v) for v in (*self.velocity_scale_rad_s, self.stribeck_velocity_rad_s)):
            raise ConfigError("smooth friction velocity scales must be finite and > 0")

    def torque(self, velocity: np.ndarray) -> np.ndarray:
        """The friction torque (opposing nothing yet: the sign of the velocity) at joint velocities."""
        s = np.tanh(velocity / np.asarray(self.velocity_scale_rad_s))
        out = np.asarray(self.coulomb_nm) * s
        if self.stribeck_nm:
            out = out + np.asarray(self.stribeck_nm) * s * np.exp(-((velocity / self.stribeck_velocity_rad_s) ** 2))
        return out

    def offset(self, n: int) -> np.ndarray:
        return np.asarray(self.effort_offset_nm, dtype=float) if self.effort_offset_nm else np.zeros(n)


@dataclass(frozen=True)
class Feedback:
    """One joint-state sample as the robot reports it."""

    time_ns: int
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


def _rate_steps(rate_hz: float, dt_ns: int, what: str) -> int:
    if not math.isfinite(rate_hz) or rate_hz <= 0:
        raise ConfigError(f"{what} must be > 0 Hz, got {rate_hz}")
    period_ns = 1e9 / rate_hz
    steps = round(period_ns / dt_ns)
    if steps < 1 or abs(steps * dt_ns - period_ns) > 1e-6 * period_ns:
        raise ConfigError(f"{what} {rate_hz} Hz is not a whole number of physics steps of {dt_ns * 1e-9} s")
    return steps


class SimRobot:
    """MuJoCo physics of an arm with one torque motor per controlled joint and a per-joint PID drive."""

    trajectory_effort = True  # the drive adds trajectory points' effort (False: ignores it, as some controllers)

    def __init__(
        self,
        model: str | Path = "pendulum",
        joints: list[str] | None = None,
        *,
        physics_dt_s: float = 0.0,
        command_rate_hz: float = 500.0,
        publish_rate_hz: float = 500.0,
        noise: FeedbackNoise = FeedbackNoise(),
        seed: int = 0,
        torque_limits_nm: list[float] | None = None,
        gain_guard: GainGuard = GainGuard(),
        initial_positions: list[float] | None = None,
        physics: dict[str, float] | None = None,
        start_time_ns: int = 0,
        drive_encoder: DriveEncoder | None = None,
        friction: SmoothFriction | None = None,
    ) -> None:
        """`noise` is what the feedback adds to the truth; `drive_encoder` (exclusive with `noise`) makes the
        PID itself see a late, noisy encoder and the feedback report what the drive saw; `friction` adds a
        real joint's smooth friction and a torque sensor offset (hidden physics beyond the model file)."""
        if drive_encoder is not None and noise != FeedbackNoise():
            raise ConfigError(
                "give either feedback noise or a drive encoder: with a drive encoder the feedback "
                "reports what the drive measured"
            )
        spec = load_spec(model)
        if physics_dt_s:
            if not math.isfinite(physics_dt_s) or physics_dt_s <= 0:
                raise ConfigError(f"physics_dt_s must be > 0, got {physics_dt_s}")
            spec.option.timestep = physics_dt_s
        available = [
            j.name for j in spec.joints if j.type in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
        ]
        self.joint_names: tuple[str, ...] = tuple(joints or available)
        unknown = [j for j in self.joint_names if j not in available]
        if unknown or not self.joint_names:
            raise ConfigError(
                f"joints {unknown or '[]'} are not hinge or slide joints of the model; it has {available}"
            )
        self._add_missing_motors(spec)
        try:
            self.model = spec.compile()
        except Exception as exc:
            raise ModelError(f"model does not compile: {exc}", model=str(model)) from exc
        self.data = mujoco.MjData(self.model)
        m = self.model
        self._jid = np.array([m.joint(j).id for j in self.joint_names])
        self._qadr = m.jnt_qposadr[self._jid]
        self._dadr = m.jnt_dofadr[self._jid]
        self._act = np.array([self._motor_for(j) for j in self._jid])
        self._gear = m.actuator_gear[self._act, 0]
        n = len(self.joint_names)
        if torque_limits_nm:
            if len(torque_limits_nm) != n:
                raise ConfigError(f"torque_limits_nm has {len(torque_limits_nm)} values for {n} joints")
            self.torque_limits_nm = np.asarray(torque_limits_nm, dtype=float)
        else:
            ranges = m.actuator_ctrlrange[self._act] * self._gear[:, None]
            limited = m.actuator_ctrllimited[self._act].astype(bool)
            from_motor = np.where(limited, np.abs(ranges).min(axis=1), np.inf)
            joint_limited = m.jnt_actfrclimited[self._jid].astype(bool)  # a URDF's <limit effort=...>
            from_joint = np.where(joint_limited, np.abs(m.jnt_actfrcrange[self._jid]).min(axis=1), np.inf)
            self.torque_limits_nm = np.minimum(from_motor, from_joint)
        if np.any(~(self.torque_limits_nm > 0)):
            raise ConfigError("torque limits must be > 0")
        if friction is not None and len(friction.coulomb_nm) != n:
            raise ConfigError(f"smooth friction has {len(friction.coulomb_nm)} joints, the robot {n}")
        self.friction = friction
        finite = np.isfinite(self.torque_limits_nm)  # the motors apply exactly the limit the drive reports
        m.actuator_ctrllimited[self._act[finite]] = 1
        m.actuator_ctrlrange[self._act[finite]] = (
            np.c_[-self.torque_limits_nm, self.torque_limits_nm][finite] / self._gear[finite, None]
        )
        self.dt_ns = int(round(m.opt.timestep * 1e9))
        self.control_steps = _rate_steps(command_rate_hz, self.dt_ns, "command_rate_hz")
        self.publish_steps = _rate_steps(publish_rate_hz, self.dt_ns, "publish_rate_hz")
        self.noise = noise
        self.gain_guard = gain_guard
        self._rng = np.random.default_rng(seed)
        self._delay_samples = int(round(noise.delay_s * publish_rate_hz))
        self._history: deque[tuple[np.ndarray, np.ndarray, np.ndarray]] = deque(maxlen=self._delay_samples + 1)
        self.start_time_ns = int(start_time_ns)
        self._step = 0
        self._events_pending = True
        self.gains = {j: PidGains() for j in self.joint_names}
        self._integral = np.zeros(n)
        self._torque = np.zeros(n)
        self._mode = "effort"
        self._command = np.zeros(n)
        self._setpoint = np.zeros(n)
        self._trajectory: Trajectory | None = None
        self._traj_start_state: tuple[np.ndarray, np.ndarray] | None = None
        self._nominal_inertia = m.body_inertia.copy()
        self._nominal_mass = m.body_mass.copy()
        for name, value in (physics or {}).items():
            self.set_physical(name, value)
        if initial_positions is not None:
            if len(initial_positions) != n:
                raise ConfigError(f"initial_positions has {len(initial_positions)} values for {n} joints")
            self.data.qpos[self._qadr] = initial_positions
        mujoco.mj_forward(m, self.data)
        self.drive_encoder = drive_encoder
        if drive_encoder is not None:
            self._enc_rng = np.random.default_rng(drive_encoder.seed)
            delay_steps = int(round(drive_encoder.delay_s * 1e9 / (self.control_steps * self.dt_ns)))
            self._enc_hist: deque[np.ndarray] = deque(maxlen=delay_steps + 1)
            self._enc_last: np.ndarray | None = None
            self._enc_q, self._enc_v = self.data.qpos[self._qadr].copy(), np.zeros(n)
        self.hold_position()

    # --- model set-up -------------------------------------------------------------------------------
    def _add_missing_motors(self, spec: mujoco.MjSpec) -> None:
        driven = {a.target for a in spec.actuators if a.trntype == mujoco.mjtTrn.mjTRN_JOINT}
        for joint in self.joint_names:
            if joint not in driven:
                spec.add_actuator(name=f"{joint}_motor", target=joint, trntype=mujoco.mjtTrn.mjTRN_JOINT)

    def _motor_for(self, joint_id: int) -> int:
        m = self.model
        for a in range(m.nu):
            if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT and m.actuator_trnid[a, 0] == joint_id:
                offset = constant_bias(m.actuator_biastype[a], m.actuator_biasprm[a])  # an identified effort offset
                if (
                    m.actuator_biastype[a] != mujoco.mjtBias.mjBIAS_NONE
                    and not offset
                    or m.actuator_gainprm[a, 0] != 1.0
                ):
                    raise ModelError(f"actuator {m.actuator(a).name} is not a plain torque motor")
                return a
        raise ModelError(f"joint {m.joint(joint_id).name} has no motor")

    # --- hidden physics -----------------------------------------------------------------------------
    def physical_parameters(self) -> dict[str, float]:
        """The true physics that `set_physical` can change: `<joint>.damping|frictionloss|armature`, `<body>.mass`."""
        m = self.model
        out: dict[str, float] = {}
        for joint, dof in zip(self.joint_names, self._dadr):
            out[f"{joint}.damping"] = float(m.dof_damping[dof])
            out[f"{joint}.frictionloss"] = float(m.dof_frictionloss[dof])
            out[f"{joint}.armature"] = float(m.dof_armature[dof])
        for b in range(1, m.nbody):
            out[f"{m.body(b).name}.mass"] = float(m.body_mass[b])
        return out

    def set_physical(self, name: str, value: float) -> None:
        """Change one true physical parameter live (a payload picked up, friction drifting)."""
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ConfigError(f"physical parameter {name} must be finite and >= 0, got {value!r}")
        owner, _, field = name.rpartition(".")
        m = self.model
        if field in PHYSICAL_FIELDS and owner in self.joint_names:
            dof = self._dadr[self.joint_names.index(owner)]
            getattr(m, f"dof_{field}")[dof] = value
        elif field == "mass" and owner and mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, owner) > 0:
            b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, owner)
            nominal = self._nominal_mass[b]
            m.body_mass[b] = value
            if nominal > 0:  # keep the body's shape: inertia scales with its mass
                m.body_inertia[b] = self._nominal_inertia[b] * (value / nominal)
        else:
            raise ConfigError(f"unknown physical parameter {name!r}; known: {sorted(self.physical_parameters())}")
        mujoco.mj_setConst(m, mujoco.MjData(m))  # on scratch data: mj_setConst resets qpos to qpos0

    # --- commands -----------------------------------------------------------------------------------
    @property
    def time_ns(self) -> int:
        return self.start_time_ns + self._step * self.dt_ns

    @property
    def mode(self) -> str:
        return self._mode

    def set_gains(self, joint: str, gains: PidGains) -> None:
        self.gain_guard.check(gains, joint)
        if joint not in self.gains:
            raise ConfigError(f"unknown joint {joint!r}", joint=joint)
        if gains.i != self.gains[joint].i:
            self._integral[self.joint_names.index(joint)] = 0.0
        self.gains[joint] = gains

    def _finite(self, values: np.ndarray, what: str) -> np.ndarray:
        array = np.asarray(values, dtype=np.float64)
        if array.shape != (len(self.joint_names),):
            raise DataError(
                f"{what} has {array.size} values, expected {len(self.joint_names)} (joints {list(self.joint_names)})"
            )
        bad = ~np.isfinite(array)
        if bad.any():
            raise DataError(f"{what} is not finite for joints {[self.joint_names[i] for i in np.flatnonzero(bad)]}")
        return array

    def command(self, interface: str, values: np.ndarray) -> None:
        """A forward command controller's command: efforts, positions or velocities for all joints."""
        if interface not in INTERFACES:
            raise ConfigError(f"unknown command interface {interface!r}; expected one of {INTERFACES}")
        values = self._finite(values, f"{interface} command")
        if self._mode != interface or interface == "effort":
            self._integral[:] = 0.0
        if interface == "velocity" and self._mode != "velocity":
            self._setpoint = self.data.qpos[self._qadr].copy()
        if interface == "position":
            self._setpoint = values.copy()
        self._trajectory = None
        self._mode, self._command = interface, values

    def hold_position(self) -> None:
        """Stop: hold the current position with the PID (what a controller does when motion is aborted)."""
        self.command("position", self.data.qpos[self._qadr].copy())

    def follow(self, trajectory: Trajectory) -> None:
        """Start a joint trajectory (joints not named keep their current setpoint)."""
        unknown = [j for j in trajectory.joint_names if j not in self.joint_names]
        if unknown:
            raise DataError(f"trajectory names unknown joints {unknown}; this robot has {list(self.joint_names)}")
        if self._mode == "position":
            self._setpoint = self._command.copy()
        elif self._mode != "trajectory":
            self._setpoint = self.data.qpos[self._qadr].copy()
        idx = [self.joint_names.index(j) for j in trajectory.joint_names]
        start = max(trajectory.start_ns, self.time_ns)
        if start != trajectory.start_ns:
            trajectory = Trajectory(
                trajectory.joint_names,
                start,
                trajectory.times_s,
                trajectory.positions,
                trajectory.velocities,
                trajectory.efforts,
            )
        self._traj_idx = np.array(idx)
        self._traj_start_state = (self._setpoint[idx].copy(), np.zeros(len(idx)))
        self._trajectory = trajectory
        self._mode = "trajectory"
        self._integral[:] = 0.0

    # --- stepping -----------------------------------------------------------------------------------
    def _measured(self) -> tuple[np.ndarray, np.ndarray]:
        if self.drive_encoder is not None:
            return self._drive_measured(self.drive_encoder)
        q = self.data.qpos[self._qadr].copy()
        res = self.noise.encoder_resolution_rad
        if res > 0:
            q = np.round(q / res) * res
        return q, self.data.qvel[self._dadr].copy()

    def _drive_measured(self, encoder: DriveEncoder) -> tuple[np.ndarray, np.ndarray]:
        self._enc_hist.append(self.data.qpos[self._qadr].copy())
        q = self._enc_hist[0]
        if encoder.noise_rad:
            q = q + self._enc_rng.normal(0.0, encoder.noise_rad, len(q))
        period_s = self.control_steps * self.dt_ns * 1e-9
        v = (q - self._enc_last) / period_s if self._enc_last is not None else np.zeros_like(q)
        self._enc_last = q
        self._enc_q, self._enc_v = q, v
        return q, v

    def _reference(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(self.joint_names)
        zeros = np.zeros(n)
        if self._mode == "position":
            return self._command, zeros, zeros
        if self._mode == "velocity":
            self._setpoint = self._setpoint + self._command * self.control_steps * self.dt_ns * 1e-9
            return self._setpoint, self._command, zeros
        ref_p, ref_v, ref_e = self._setpoint.copy(), zeros.copy(), zeros.copy()
        traj = self._trajectory
        if traj is not None and self.time_ns >= traj.start_ns:
            p, v, e = traj.sample(self.time_ns, *self._traj_start_state)
            ref_p[self._traj_idx], ref_v[self._traj_idx] = p, v
            ref_e[self._traj_idx] = e if self.trajectory_effort else 0.0
        return ref_p, ref_v, ref_e

    def _update_control(self) -> None:
        if self._mode == "effort":
            torque = self._command
            if self.drive_encoder is not None:  # the drive's encoder reads at every update, whatever the mode
                self._measured()
        else:
            q, v = self._measured()
            ref_p, ref_v, ref_e = self._reference()
            g = self.gains
            p = np.array([g[j].p for j in self.joint_names])
            i = np.array([g[j].i for j in self.joint_names])
            d = np.array([g[j].d for j in self.joint_names])
            clamp = np.array([g[j].i_clamp for j in self.joint_names])
            ff = np.array([g[j].ff_velocity_scale for j in self.joint_names])
            error = ref_p - q
            period_s = self.control_steps * self.dt_ns * 1e-9
            self._integral += error * period_s
            i_term = np.clip(i * self._integral, -clamp, clamp)
            torque = ff * ref_v + p * error + i_term + d * (ref_v - v) + ref_e
        self._torque = np.clip(torque, -self.torque_limits_nm, self.torque_limits_nm)
        self.data.ctrl[self._act] = self._torque / self._gear

    def _sample(self) -> Feedback:
        torque = self._torque if self.friction is None else self._torque + self.friction.offset(len(self._torque))
        if self.drive_encoder is not None:
            return Feedback(self.time_ns, self._enc_q.copy(), self._enc_v.copy(), torque.copy())
        truth = (self.data.qpos[self._qadr].copy(), self.data.qvel[self._dadr].copy(), torque.copy())
        self._history.append(truth)
        q, v, tau = self._history[0]
        noise, n = self.noise, len(self.joint_names)
        if noise.encoder_resolution_rad > 0:
            q = np.round(q / noise.encoder_resolution_rad) * noise.encoder_resolution_rad
        q = q + self._rng.normal(0.0, noise.position_rad, n) if noise.position_rad else q
        v = v + self._rng.normal(0.0, noise.velocity_rad_s, n) if noise.velocity_rad_s else v
        tau = tau + self._rng.normal(0.0, noise.effort_nm, n) if noise.effort_nm else tau
        return Feedback(self.time_ns, q, v, tau)

    def advance(self, until_ns: int) -> list[Feedback]:
        """Step the physics up to `until_ns` (sim time); return the feedback samples that fell due.

        At each grid point the drive first updates its output from the state there, then the sample is
        taken: its effort is the torque the drive applies from that instant until its next update.
        """
        out: list[Feedback] = []
        last = (until_ns - self.start_time_ns) // self.dt_ns
        pub, ctrl = self.publish_steps, self.control_steps
        while True:
            k = self._step
            if self._events_pending:
                if k > last:
                    break
                if k % ctrl == 0:
                    self._update_control()
                if k % pub == 0:
                    out.append(self._sample())
                self._events_pending = False
            following = min((k // pub + 1) * pub, (k // ctrl + 1) * ctrl)
            if following > last:
                break
            if self.friction is None:
                mujoco.mj_step(self.model, self.data, nstep=following - k)
            else:  # the smooth friction follows the velocity step by step
                for _ in range(following - k):
                    self.data.qfrc_applied[self._dadr] = -self.friction.torque(self.data.qvel[self._dadr])
                    mujoco.mj_step(self.model, self.data)
            self._step = following
            self._events_pending = True
        return out

    @property
    def applied_torque(self) -> np.ndarray:
        return self._torque.copy()

    @property
    def position(self) -> np.ndarray:
        return self.data.qpos[self._qadr].copy()

    @property
    def velocity(self) -> np.ndarray:
        return self.data.qvel[self._dadr].copy()
