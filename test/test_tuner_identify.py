"""Servo tuner Stage 1 on SimPlant joints from 6.6e-5 to 3.6 kg m^2: the fit, the delay, re-identification,
refusal. Real MuJoCo physics with encoder noise, encoder delay and MuJoCo friction loss hidden in the plant."""

from __future__ import annotations

import pytest

from support.tuner_joints import direct_drive, shoulder, with_gains
from sysid_ros.core.errors import DataError
from sysid_ros.core.linear import JointModel
from sysid_ros.core.tuner import Controller, DriveGains, identify_servo, sag_floor_kp

pytestmark = pytest.mark.slow  # whole-tape MuJoCo runs: tens of seconds of CPU

# Tolerances. Stage 1 plays a tape designed for the joint's regressor (3 harmonics, two periods, then one
# period each at kd x0.6 and x1.6). The shoulder's bootstrap half-widths are 0.05 % (J), 0.35 % (b), 0.2 % (Coulomb);
# 2 % / 5 % share / 3 % leave room for the soft MuJoCo friction loss, which is not exactly tc tanh(qd / 0.01)
# (measured: J +0.0 %, b +0.4 %, Coulomb -0.1 %). The direct drive now reads J -0.1 %, Coulomb -0.2 % and b +17 %
# (3 % of the friction at 80 % top speed): 3 % / 3 % / 10 %. (Its earlier plateaus, fast moves and 2 Hz chirps
# read J +5 %, Coulomb -8 %, b +108 %: the drive's 10 Hz loop near the 110 ms window's pass band.)
# Delay: 1 ms on the shoulder (measured 4.83 of 5 ms). On the direct drive the designed tape's residual is least
# 1.5 ms past the hidden delay whatever it is (1.61 ms at a hidden 0, 3.55 at 2, 6.36 at 6; noise-free the same, so
# something deterministic in that plant, not its encoder noise); its fit hardly depends on it (at the true 2 ms:
# J -0.4 %, b +8 %, Coulomb 0 %), so the direct drive's delay is held to 2 ms.
CASES = {
    "direct drive 6.6e-5 kg m^2": (
        direct_drive,
        {"inertia": 0.03, "coulomb": 0.03, "viscous_share": 0.10, "delay_s": 2e-3},
    ),
    "shoulder 3.6 kg m^2": (shoulder, {"inertia": 0.02, "coulomb": 0.03, "viscous_share": 0.05, "delay_s": 1e-3}),
}


@pytest.mark.parametrize("name", CASES)
def test_identified_inertia_viscous_and_coulomb_within_tolerance(name: str) -> None:
    make, tol = CASES[name]
    joint = make()
    got = identify_servo(joint.servo, joint.plant)
    truth: JointModel = joint.truth
    assert got.source == "fit"
    assert got.rows >= 1000
    assert got.model.inertia_kg_m2 == pytest.approx(truth.inertia_kg_m2, rel=tol["inertia"])
    assert got.model.coulomb_nm == pytest.approx(truth.coulomb_nm, rel=tol["coulomb"])
    speed = 0.8 * joint.servo.envelope.max_speed_rad_s
    friction_at_speed = truth.coulomb_nm + truth.viscous_nm_s_rad * speed
    viscous_error_nm = abs(got.model.viscous_nm_s_rad - truth.viscous_nm_s_rad) * speed
    assert viscous_error_nm <= tol["viscous_share"] * friction_at_speed
    assert got.model.gravity_sin_nm == pytest.approx(truth.gravity_sin_nm, abs=0.01 * truth.gravity_sin_nm + 5e-4)
    # 95 % intervals from the 20-block bootstrap exist for every estimated term and are finite and positive
    assert {"inertia_kg_m2", "viscous_nm_s_rad", "coulomb_nm"} <= set(got.half_width_95)
    assert all(0.0 < h < float("inf") for h in got.half_width_95.values())
    # the encoder delay hidden in both plants (2 ms, 5 ms) comes out of the bisection (tolerances above)
    assert got.delay_s == pytest.approx(joint.plant.delay_s, abs=tol["delay_s"])


def test_a_longer_hidden_encoder_delay_is_recovered_by_the_bisection() -> None:
    hidden_s = 0.010
    joint = shoulder(delay_s=hidden_s)  # 200 Hz: the delay is whole 5 ms command intervals
    got = identify_servo(joint.servo, joint.plant)
    # within 1 ms: a fifth of the command interval
    assert got.delay_s == pytest.approx(hidden_s, abs=1e-3)
    assert any("delay-tape inertia" in note for note in got.notes)


def test_a_loop_too_fast_for_the_command_rate_is_identified_again_softer() -> None:
    # 100 Hz and wn = 60 rad/s: wn dt = 0.6 > 0.5, so Stage 1 runs again at (0.5 / 0.6)^2 ~ 0.7 of the gains
    joint = shoulder(command_rate_hz=100.0, delay_s=0.0, gains=DriveGains(13000.0, 345.0))
    got = identify_servo(joint.servo, joint.plant)
    assert any("identified again at" in note for note in got.notes)
    assert got.gains_used.kp == pytest.approx(13000.0 * (0.5 / 0.6) ** 2, rel=0.05)
    assert got.gains_used.kp >= sag_floor_kp(joint.servo, got.model)
    assert got.model.inertia_kg_m2 == pytest.approx(3.6, rel=0.03)


def test_a_joint_that_never_leaves_the_friction_band_takes_the_refusal_path() -> None:
    # kp e stays under the 1.5e-3 N m friction over the whole travel: the joint never moves
    joint = with_gains(direct_drive(command_rate_hz=250.0), DriveGains(0.001, 1e-5))
    with pytest.raises(DataError, match="no priors"):
        identify_servo(joint.servo, joint.plant)
    priors = JointModel(6e-5, 0.0, 1e-3)
    got = identify_servo(with_gains(joint, joint.servo.gains, priors=priors).servo, joint.plant)
    assert got.source == "priors" and got.model == priors
    assert any("only 0 usable rows" in note for note in got.notes)
    # with a seed, its gains are tried first, and they move the joint
    retry = identify_servo(joint.servo, joint.plant, seed=Controller(DriveGains(0.3, 0.005)))
    assert retry.source == "fit at the seed's gains"
    assert retry.gains_used == DriveGains(0.3, 0.005)
    assert retry.model.inertia_kg_m2 == pytest.approx(6.6e-5, rel=0.10)
