"""Interval-torque correction: a drive that advances its setpoint at the commanded velocity between
commands (PID at 1 kHz, commands at 100 Hz) reports the torque of the command instant, while the torque
drifts inside every interval at kp (v_ref - qd) - kd qdd. Uncorrected that reads as +kd dt / 2 of inertia."""

from __future__ import annotations

import pytest

from support.tuner_joints import shoulder
from sysid_ros.core import tapes
from sysid_ros.core.tuner import Controller, DriveGains, SimPlant, fit_model

pytestmark = pytest.mark.slow  # 55 s of tape at a 1 kHz drive update: about 15 s of CPU


def test_the_interval_mean_correction_removes_the_inertia_bias_of_an_advancing_drive() -> None:
    joint = shoulder()
    plant = SimPlant("servo_shoulder", "shoulder", joint.servo.envelope, 100.0, 150.0, advance_rate_hz=1000.0)
    assert plant.torque_sample_phase == 0.0
    gains = DriveGains(3000.0, 400.0)  # a stiff, heavily damped geared joint: kd dt / 2 = 2 kg m^2 against J = 3.6
    plays = [plant.play(t, Controller(gains)) for t in tapes.identification(joint.servo.envelopes(), 100.0)]
    as_if_held = fit_model(plays, 0.5, 0.0, 150.0, "shoulder").model
    corrected = fit_model(plays, plant.torque_sample_phase, 0.0, 150.0, "shoulder").model
    # uncorrected: measured J = 5.73 (+59 %), the seed's "+40 % on a geared joint at 100 Hz" and then some
    assert as_if_held.inertia_kg_m2 > 1.4 * 3.6
    # corrected: +5 % left (measured 3.79). The correction assumes the torque ramps linearly inside the
    # interval; this loop (kd / J = 111 rad/s) relaxes it along a curve, so the true mean sits a little above
    # the ramp's midpoint (fitting the true interval means instead gives 3.63, +0.9 %)
    assert corrected.inertia_kg_m2 == pytest.approx(3.6, rel=0.06)
    assert corrected.gravity_sin_nm == pytest.approx(47.09, rel=0.01)
    assert corrected.coulomb_nm == pytest.approx(3.0, rel=0.05)
