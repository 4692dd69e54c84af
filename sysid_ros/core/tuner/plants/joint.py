"""The Plant seam: the one interface through which the tuner moves a joint, and its MuJoCo implementation.

A plant plays a tape with given gains and host feed-forward and returns telemetry on the command grid:
time, measured position and velocity, the torque the drive requested, and the reference. `SimPlant` runs
`SimRobot` in-process, far faster than real time, with a drive that sees its encoder late and noisy
(`sim.DriveEncoder`: the loop and the feedback both), so delay, noise through kd and sample-and-hold all
act as on hardware. `play_checked` is the play-and-check loop every MuJoCo plant here uses.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from ...errors import ConfigError
from ...linear import JointModel
from ...signals import Trajectory
from ...sim import DriveEncoder, Feedback, SimRobot
from ...tapes import Envelope, Tape, check_sample, duration_s, sample
from ..servo import Controller, to_pid_gains

TRAVEL_MARGIN_FRAC = 0.1  # a play aborts past travel + 10 % of travel, or 1.5x top speed
SPEED_MARGIN_FRAC = 0.5


@dataclass(frozen=True, eq=False)
class Telemetry:
    """One play on the command grid: (N,) arrays in seconds, rad, rad/s and N m; `aborted` says why it stopped."""

    tape: str
    time_s: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    torque: np.ndarray
    reference: np.ndarray
    reference_velocity: np.ndarray
    feedforward: np.ndarray
    command_rate_hz: float
    torque_limit_nm: float
    aborted: str | None = None
    notes: tuple[str, ...] = field(default=())
    kp: float = 0.0
    kd: float = 0.0

    @property
    def error(self) -> np.ndarray:
        return self.reference - self.position

    @property
    def seconds(self) -> float:
        return float(self.time_s[-1] - self.time_s[0]) if len(self.time_s) else 0.0


class Plant(Protocol):
    """What the tuner needs of a joint: play a tape under a controller and report what happened."""

    joint: str
    command_rate_hz: float
    torque_sample_phase: float
    torque_limit_nm: float
    feedforward_terms: tuple[str, ...]
    motion_s: float

    def play(self, tape: Tape, controller: Controller) -> Telemetry: ...


@dataclass(frozen=True)
class Played:
    """What `play_checked` got: the feedback samples, and why and for which joint it stopped early (or None)."""

    feedback: list[Feedback]
    aborted: str | None = None
    culprit: str | None = None


def play_checked(robot: SimRobot, n: int, command_rate_hz: float, envelopes: Mapping[str, Envelope]) -> Played:
    """Advance `robot` (already following its trajectory) over `n` command samples in 0.1 s chunks, checking
    every sample of every joint in `envelopes` against its margins (travel + 10 % of travel, 1.5x top speed);
    stop after the chunk in which a sample first leaves them (its samples are kept: the joint moved through
    them). `aborted` names the first such sample's reason and time, `culprit` its joint."""
    index = [(k, joint, envelopes[joint]) for k, joint in enumerate(robot.joint_names) if joint in envelopes]
    feedback: list[Feedback] = []
    chunk = max(1, int(round(0.1 * command_rate_hz)))
    period_ns = int(round(1e9 / command_rate_hz))
    for start in range(0, n, chunk):
        got = robot.advance((min(start + chunk, n) - 1) * period_ns)
        feedback.extend(got)
        for sample_ in got:
            for k, joint, env in index:
                why = check_sample(
                    env,
                    float(sample_.position[k]),
                    float(sample_.velocity[k]),
                    travel_margin_rad=TRAVEL_MARGIN_FRAC * env.travel_rad,
                    speed_margin_frac=SPEED_MARGIN_FRAC,
                )
                if why:
                    return Played(feedback, f"{why} at t={sample_.time_ns * 1e-9:.3f} s", joint)
    return Played(feedback)


@dataclass
class SimPlant:
    """A joint of an MJCF model on SimRobot: hidden physics, encoder noise and delay, torque cap.

    By default the drive updates at the command rate and holds its torque over each interval (the reported
    torque is the interval's mean: `torque_sample_phase` 0.5). With `advance_rate_hz` its PID runs at that
    inner rate while the setpoint advances at the commanded velocity between commands, and it reports the
    torque of the command instant: the torque drifts inside every interval (`torque_sample_phase` near 0).
    Every play starts a fresh robot at the tape's start, so plays are independent and reproducible; the
    noise seed advances with each play. `motion_s` counts the seconds of motion played so far.
    """

    model: str | Path
    joint: str
    envelope: Envelope
    command_rate_hz: float = 500.0
    torque_limit_nm: float | None = None
    physics: dict[str, float] = field(default_factory=dict)
    noise_rad: float = 0.0
    delay_s: float = 0.0
    seed: int = 0
    advance_rate_hz: float | None = None
    feedforward_terms: tuple[str, ...] = (
        "inertia_kg_m2",
        "viscous_nm_s_rad",
        "coulomb_nm",
        "gravity_sin_nm",
        "gravity_cos_nm",
        "offset_nm",
    )
    motion_s: float = 0.0
    plays: int = 0

    @property
    def torque_sample_phase(self) -> float:
        """Where in its interval the reported torque is taken: 0.5 for a held torque (the sample is the
        interval's mean); 0 for the advancing drive, which reports the torque of the command instant."""
        return 0.0 if self.advance_rate_hz else 0.5

    @property
    def _inner(self) -> int:
        """Drive updates per command interval."""
        return int(round(self.advance_rate_hz / self.command_rate_hz)) if self.advance_rate_hz else 1

    def __post_init__(self) -> None:
        if self.advance_rate_hz and abs(self.advance_rate_hz / self.command_rate_hz - self._inner) > 1e-9:
            raise ConfigError("advance_rate_hz must be a whole multiple of command_rate_hz", joint=self.joint)
        probe = SimRobot(
            self.model,
            [self.joint],
            command_rate_hz=self.command_rate_hz,
            publish_rate_hz=self.command_rate_hz,
            physics=self.physics,
        )
        if self.torque_limit_nm is None:
            self.torque_limit_nm = float(probe.torque_limits_nm[0])
        steps = self.delay_s * self.command_rate_hz
        if abs(steps - round(steps)) > 1e-6:
            raise ConfigError("delay_s must be a whole number of command intervals", joint=self.joint)

    def play(self, tape: Tape, controller: Controller) -> Telemetry:
        """Play `tape` from rest at its start under `controller`; abort (hold) when the joint leaves its margins."""
        if tape.joints != (self.joint,) or tape.interface != "position":
            raise ConfigError(
                "SimPlant plays one-joint position tapes of its own joint", joint=self.joint, tape=tape.name
            )
        rate = self.command_rate_hz
        n = int(math.ceil(duration_s(tape) * rate - 1e-9)) + 1
        t = np.arange(n) / rate
        ref = sample(tape, t)
        q_ref, v_ref, a_ref = ref.position[:, 0], ref.velocity[:, 0], ref.acceleration[:, 0]
        ff = np.zeros(n) if controller.feedforward is None else controller.feedforward.torque(q_ref, v_ref, a_ref)
        inner = self._inner
        encoder = DriveEncoder(self.noise_rad, self.delay_s, self.seed * 7919 + self.plays)
        robot = SimRobot(
            self.model,
            [self.joint],
            command_rate_hz=rate * inner,
            publish_rate_hz=rate,
            torque_limits_nm=[self.torque_limit_nm],
            physics=self.physics,
            initial_positions=[float(q_ref[0])],
            seed=self.seed + self.plays,
            drive_encoder=encoder,
        )
        self.plays += 1
        robot.set_gains(self.joint, to_pid_gains(controller.gains))
        # between commands the setpoint advances at the commanded velocity (exact at the inner updates)
        k = np.repeat(np.arange(n), inner)[: (n - 1) * inner + 1]
        frac = (np.arange(len(k)) - k * inner) / (rate * inner)
        t_in = np.arange(len(k)) / (rate * inner)
        robot.follow(
            Trajectory(
                (self.joint,),
                robot.time_ns,
                t_in,
                (q_ref[k] + v_ref[k] * frac)[:, None],
                v_ref[k][:, None],
                ff[k][:, None],
            )
        )
        played = play_checked(robot, n, rate, {self.joint: self.envelope})
        feedback, aborted = played.feedback, played.aborted
        m = len(feedback)
        self.motion_s += m / rate
        return Telemetry(
            tape.name,
            t[:m],
            np.array([f.position[0] for f in feedback]),
            np.array([f.velocity[0] for f in feedback]),
            np.array([f.effort[0] for f in feedback]),
            q_ref[:m],
            v_ref[:m],
            ff[:m],
            rate,
            float(self.torque_limit_nm),
            aborted,
            (),
            controller.gains.kp,
            controller.gains.kd,
        )


TWIN_XML = """<mujoco model="twin">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="{dt}" integrator="implicitfast" gravity="0 0 -9.81"/>
  <worldbody>
    <body name="link" pos="0 0 0">
      <joint name="{joint}" type="hinge" axis="0 1 0" damping="{b}" frictionloss="{fc}" armature="{arm}"/>
      <inertial pos="{x} 0 {z}" mass="{mass}" diaginertia="{tiny} {tiny} {tiny}"/>
    </body>
  </worldbody>
  <actuator><motor name="{joint}_motor" joint="{joint}" gear="1"/></actuator>
</mujoco>
"""


def twin_xml(joint: str, model: JointModel, physics_dt_s: float = 0.001) -> str:
    """An MJCF joint that obeys `model`: armature J, damping b, friction loss tc, and a mass whose gravity
    torque is gs sin q + gc cos q (a constant offset is not representable and is left out)."""
    amplitude = math.hypot(model.gravity_sin_nm, model.gravity_cos_nm)
    lever = 0.01
    mass = amplitude / (9.81 * lever) if amplitude > 0 else 1e-6
    phi = math.atan2(model.gravity_cos_nm, model.gravity_sin_nm) if amplitude > 0 else 0.0
    # a point at (x, z) = lever (-sin phi, -cos phi) needs torque m g lever sin(q + phi) to hold
    x, z = -lever * math.sin(phi), -lever * math.cos(phi)
    tiny = 1e-9
    arm = max(model.inertia_kg_m2 - mass * lever**2 - tiny, 1e-9)
    return TWIN_XML.format(
        dt=physics_dt_s,
        joint=joint,
        b=max(model.viscous_nm_s_rad, 0.0),
        fc=max(model.coulomb_nm, 0.0),
        arm=arm,
        x=x,
        z=z,
        mass=mass,
        tiny=tiny,
    )


def twin_plant(
    joint: str,
    model: JointModel,
    envelope: Envelope,
    *,
    command_rate_hz: float,
    torque_limit_nm: float,
    delay_s: float = 0.0,
    noise_rad: float = 0.0,
    seed: int = 1000,
    directory: Path | None = None,
) -> SimPlant:
    """A MuJoCo twin of one joint built from an identified model (plus its delay and encoder noise)."""
    physics_dt = 1.0 / command_rate_hz / max(1, round(1.0 / command_rate_hz / 0.0005))
    folder = directory or Path(tempfile.mkdtemp(prefix="sysid_twin_"))
    path = folder / f"twin_{joint}.xml"
    path.write_text(twin_xml(joint, model, physics_dt))
    delay = round(delay_s * command_rate_hz) / command_rate_hz
    return SimPlant(path, joint, envelope, command_rate_hz, torque_limit_nm, {}, noise_rad, delay, seed)
