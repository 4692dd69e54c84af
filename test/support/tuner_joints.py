"""Demonstration joints on SimPlant, from a 6.6e-5 kg m^2 direct drive to a 3.6 kg m^2 arm shoulder.

Each comes with its hidden truth (for tests and benchmarks only; the tuner never sees it), an envelope,
a guard and poor factory gains. Models live in `config/models/servo_*.xml`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sysid_ros.core.linear import JointModel
from sysid_ros.core.tapes import Envelope
from sysid_ros.core.tuner import DriveGains, Servo, SimPlant


@dataclass(frozen=True)
class DemoJoint:
    """A servo to tune, the plant that moves it, and the truth behind the plant."""

    servo: Servo
    plant: SimPlant
    truth: JointModel


def direct_drive(
    *,
    command_rate_hz: float = 500.0,
    gains: DriveGains = DriveGains(0.3, 0.005),
    noise_rad: float = 1e-5,
    delay_s: float | None = None,
    seed: int = 0,
) -> DemoJoint:
    """A 6.6e-5 kg m^2 direct drive about a vertical axis; 0.1 N m cap, 1.5e-3 N m friction; the encoder
    one command interval late unless `delay_s` says otherwise."""
    delay_s = 1.0 / command_rate_hz if delay_s is None else delay_s
    env = Envelope(origin_rad=0.0, travel_rad=1.0, max_speed_rad_s=20.0, max_torque_nm=0.1)
    plant = SimPlant("servo_direct", "rotor", env, command_rate_hz, 0.1, {}, noise_rad, delay_s, seed)
    servo = Servo("rotor", gains, 0.1, env, kp_max_nm_rad=50.0, kd_max_nm_s_rad=1.0)
    return DemoJoint(servo, plant, JointModel(6.6e-5, 2e-5, 1.5e-3))


def shoulder(
    *,
    command_rate_hz: float = 200.0,
    gains: DriveGains = DriveGains(800.0, 80.0),
    noise_rad: float = 2e-5,
    delay_s: float = 0.005,
    seed: int = 0,
    physics: dict[str, float] | None = None,
) -> DemoJoint:
    """A 3.6 kg m^2 arm shoulder against gravity (47 N m); 150 N m cap, 3 N m friction."""
    env = Envelope(origin_rad=0.5, travel_rad=0.6, max_speed_rad_s=1.5, max_torque_nm=150.0)
    plant = SimPlant(
        "servo_shoulder", "shoulder", env, command_rate_hz, 150.0, dict(physics or {}), noise_rad, delay_s, seed
    )
    servo = Servo("shoulder", gains, 150.0, env, kp_max_nm_rad=2e5, kd_max_nm_s_rad=5e3)
    return DemoJoint(servo, plant, JointModel(3.6, 2.0, 3.0, 8 * 9.81 * 0.6))


def with_gains(joint: DemoJoint, gains: DriveGains, **servo_changes: object) -> DemoJoint:
    """The same joint with other as-found gains (and other servo fields)."""
    return replace(joint, servo=replace(joint.servo, gains=gains, **servo_changes))
