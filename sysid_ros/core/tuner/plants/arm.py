"""A whole arm on SimRobot for tune_arm: every joint under its own controller, the nominal model's feed-forward.

`ArmPlant.play` plays a tape over any subset of the arm's joints (the others hold home) and returns one
Telemetry per joint. With `arm_feedforward`, MuJoCo's mj_inverse on the robot's nominal rigid-body model
(gravity, link inertia, coupling; damping and friction loss zeroed) adds feed-forward to every command, and
each joint's own box adds only Coulomb and viscous. `joint_plant(joint, others)` is the single-joint Plant
a tuner moves one joint through while the rest hold home.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from ...errors import ConfigError
from ...files import load_spec
from ...linear import JointModel
from ...signals import Trajectory
from ...sim import DriveEncoder, SimRobot
from ...tapes import Envelope, Tape, duration_s, sample
from ..base_feedforward import joint_base_feedforward
from ..servo import Controller, to_pid_gains
from .joint import Telemetry, play_checked

BOX_TERMS_WITH_ARM_MODEL = ("viscous_nm_s_rad", "coulomb_nm")
ALL_BOX_TERMS = ("inertia_kg_m2", "viscous_nm_s_rad", "coulomb_nm", "gravity_sin_nm", "gravity_cos_nm", "offset_nm")


def nominal_model(model: str | Path) -> mujoco.MjModel:
    """The robot's nominal rigid-body model: the description with joint damping and friction loss zeroed."""
    spec = load_spec(model)
    for joint in spec.joints:
        joint.damping[0] = 0.0
        joint.frictionloss = 0.0
    return spec.compile()


def inverse_dynamics(
    nominal: mujoco.MjModel, joints: tuple[str, ...], q: np.ndarray, qd: np.ndarray, qdd: np.ndarray
) -> np.ndarray:
    """mj_inverse torques (N, J) for the named joints along (N, J) references (other joints at 0)."""
    data = mujoco.MjData(nominal)
    qadr = [nominal.joint(j).qposadr[0] for j in joints]
    dadr = [nominal.joint(j).dofadr[0] for j in joints]
    out = np.zeros_like(q)
    for k in range(len(q)):
        data.qpos[qadr], data.qvel[dadr], data.qacc[dadr] = q[k], qd[k], qdd[k]
        mujoco.mj_inverse(nominal, data)
        out[k] = data.qfrc_inverse[dadr]
    return out


@dataclass
class Arm:
    """What every arm plant shares: the joints, their envelopes and torque caps, home, and the host feed-forward
    of the nominal model. A subclass plays tapes (`ArmPlant` in MuJoCo, the ROS plant on a robot)."""

    model: str | Path
    joints: tuple[str, ...]
    envelopes: dict[str, Envelope]
    command_rate_hz: float = 200.0
    torque_limits_nm: dict[str, float] | None = None
    arm_feedforward: bool | None = None  # None: on, unless the model is a closed chain or has passive joints
    motion_s: float = 0.0
    torque_sample_phase: float = 0.5  # where in its interval a reported torque is taken (0.5: held torque)

    def __post_init__(self) -> None:
        self.joints = tuple(self.joints)
        missing = [j for j in self.joints if j not in self.envelopes]
        if missing:
            raise ConfigError(f"no envelope for joints {missing}")
        self._nominal = nominal_model(self.model)
        if self.arm_feedforward is None:
            m = self._nominal
            actuated = {
                j for j in range(m.njnt) if m.jnt_type[j] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
            }
            passive = [m.joint(j).name for j in actuated if m.joint(j).name not in self.joints]
            self.arm_feedforward = not (m.neq > 0 or passive)
        probe = SimRobot(
            self.model, list(self.joints), command_rate_hz=self.command_rate_hz, publish_rate_hz=self.command_rate_hz
        )
        caps = self.torque_limits_nm or {}
        self.caps = {j: float(caps.get(j, probe.torque_limits_nm[k])) for k, j in enumerate(self.joints)}
        self.home = {j: self.envelopes[j].origin_rad for j in self.joints}

    def play(self, tape: Tape, controllers: dict[str, Controller]) -> dict[str, Telemetry]:
        raise NotImplementedError

    @property
    def box_terms(self) -> tuple[str, ...]:
        return BOX_TERMS_WITH_ARM_MODEL if self.arm_feedforward else ALL_BOX_TERMS

    def reference(self, tape: Tape, controllers: dict[str, Controller]) -> tuple[np.ndarray, ...]:
        """The play of `tape` on the command grid: times (N,), and (N, J) positions, velocities, accelerations
        and host feed-forward for every arm joint (joints the tape does not move hold home)."""
        unknown = [j for j in tape.joints if j not in self.joints]
        if unknown or set(controllers) != set(self.joints):
            raise ConfigError(f"tape joints {unknown} unknown, or controllers not given for every arm joint")
        n = int(math.ceil(duration_s(tape) * self.command_rate_hz - 1e-9)) + 1
        t = np.arange(n) / self.command_rate_hz
        got = sample(tape, t)
        q = np.tile([self.home[j] for j in self.joints], (n, 1)).astype(float)
        qd, qdd = np.zeros_like(q), np.zeros_like(q)
        for c, joint in enumerate(tape.joints):
            k = self.joints.index(joint)
            q[:, k], qd[:, k], qdd[:, k] = got.position[:, c], got.velocity[:, c], got.acceleration[:, c]
        ff = inverse_dynamics(self._nominal, self.joints, q, qd, qdd) if self.arm_feedforward else np.zeros_like(q)
        for k, joint in enumerate(self.joints):
            box = controllers[joint].feedforward
            if box is not None:
                ff[:, k] += box.torque(q[:, k], qd[:, k], qdd[:, k])
        return t, q, qd, qdd, ff

    def base_feedforward(self, joint: str) -> JointModel | None:
        """The feed-forward the arm adds to `joint` by itself as it moves alone (None without the arm model)."""
        if not self.arm_feedforward:
            return None
        cache = self.__dict__.setdefault("_base_feedforward", {})
        if joint not in cache:
            cache[joint] = joint_base_feedforward(self._nominal, self.joints, joint, self.home)
        return cache[joint]

    def joint_plant(self, joint: str, others: dict[str, Controller]) -> JointInArm:
        return JointInArm(self, joint, dict(others))


@dataclass
class ArmPlant(Arm):
    """An arm in MuJoCo, each joint under its own controller, with hidden physics, noise and delay."""

    physics: dict[str, float] = field(default_factory=dict)
    noise_rad: float = 0.0
    delay_s: float = 0.0
    seed: int = 0
    plays: int = 0

    def play(self, tape: Tape, controllers: dict[str, Controller]) -> dict[str, Telemetry]:
        """Play `tape` (its joints move, the rest hold home) under `controllers`; telemetry for every joint."""
        t, q, qd, _, ff = self.reference(tape, controllers)
        rate, n = self.command_rate_hz, len(t)
        encoder = DriveEncoder(self.noise_rad, self.delay_s, self.seed * 7919 + self.plays)
        robot = SimRobot(
            self.model,
            list(self.joints),
            command_rate_hz=rate,
            publish_rate_hz=rate,
            torque_limits_nm=[self.caps[j] for j in self.joints],
            physics=self.physics,
            initial_positions=list(q[0]),
            seed=self.seed + self.plays,
            drive_encoder=encoder,
        )
        self.plays += 1
        for joint in self.joints:
            robot.set_gains(joint, to_pid_gains(controllers[joint].gains))
        robot.follow(Trajectory(self.joints, robot.time_ns, t, q, qd, ff))
        played = play_checked(robot, n, rate, self.envelopes)
        feedback, culprit = played.feedback, played.culprit
        aborted = f"joint {culprit}: {played.aborted}" if played.aborted else None
        m = len(feedback)
        self.motion_s += m / rate
        out = {}
        for k, joint in enumerate(self.joints):
            out[joint] = Telemetry(
                tape.name,
                t[:m],
                np.array([f.position[k] for f in feedback]),
                np.array([f.velocity[k] for f in feedback]),
                np.array([f.effort[k] for f in feedback]),
                q[:m, k],
                qd[:m, k],
                ff[:m, k],
                rate,
                self.caps[joint],
                aborted if joint == culprit else None,
                (f"stopped early: {aborted}",) if aborted else (),
                controllers[joint].gains.kp,
                controllers[joint].gains.kd,
            )
        return out


@dataclass
class JointInArm:
    """The Plant seam for one arm joint while the others hold home under `others`."""

    arm: Arm
    joint: str
    others: dict[str, Controller]

    @property
    def torque_sample_phase(self) -> float:
        return self.arm.torque_sample_phase

    @property
    def base_feedforward(self) -> JointModel | None:
        """What the arm adds to this joint's commands by itself (a twin of the joint must add it too)."""
        return self.arm.base_feedforward(self.joint)

    @property
    def command_rate_hz(self) -> float:
        return self.arm.command_rate_hz

    @property
    def torque_limit_nm(self) -> float:
        return self.arm.caps[self.joint]

    @property
    def feedforward_terms(self) -> tuple[str, ...]:
        return self.arm.box_terms

    @property
    def motion_s(self) -> float:
        return self.arm.motion_s

    def play(self, tape: Tape, controller: Controller) -> Telemetry:
        return self.arm.play(tape, {**self.others, self.joint: controller})[self.joint]
