"""The MuJoCo twin built from an identified model, and twin screening in tune(): fewer seconds of plant
motion (goal <= 300 s per joint) for a held-out cost as good as the full grid's."""

from __future__ import annotations

import pytest

from support.tuner_joints import shoulder
from sysid_ros.core import tapes
from sysid_ros.core.linear import JointModel
from sysid_ros.core.tuner import Controller, DriveGains, Goal, fit_model, tune, twin_plant

pytestmark = pytest.mark.slow  # whole-tape MuJoCo runs: tens of seconds of CPU


def test_a_twin_obeys_the_model_it_was_built_from() -> None:
    model = JointModel(2.5, 1.5, 2.0, 30.0, -8.0)
    joint = shoulder()
    twin = twin_plant("shoulder", model, joint.servo.envelope, command_rate_hz=200.0, torque_limit_nm=150.0)
    envelopes = joint.servo.envelopes()
    tels = [twin.play(t, Controller(DriveGains(2000.0, 100.0))) for t in tapes.identification(envelopes, 200.0)]
    got = fit_model(tels, 0.5, 0.0, 150.0, "shoulder").model
    # noise-free twin: J, gravity within 1 %; Coulomb and viscous within 5 % (MuJoCo's friction loss is soft)
    assert got.inertia_kg_m2 == pytest.approx(2.5, rel=0.01)
    assert got.gravity_sin_nm == pytest.approx(30.0, rel=0.01)
    assert got.gravity_cos_nm == pytest.approx(-8.0, rel=0.01)
    assert got.coulomb_nm == pytest.approx(2.0, rel=0.05)
    assert got.viscous_nm_s_rad == pytest.approx(1.5, rel=0.05)


def test_twin_screening_tunes_a_joint_within_300_s_of_plant_motion() -> None:
    joint = shoulder()
    result = tune(joint.servo, joint.plant, Goal(twin_screening=True), twin=True)
    assert result.seconds["total"] <= 300.0
    assert joint.plant.motion_s == pytest.approx(result.seconds["total"])
    screened = [c for c in result.refine.candidates if not c.played_on_plant]
    played = [c for c in result.refine.candidates if c.played_on_plant]
    assert screened and all(c.failures and c.failures[0].startswith("twin:") for c in screened)
    assert 1 <= len(played) <= 9 and all(c.twin_cost is not None for c in played)
    # as good as the full grid: the full grid's held-out cost on this joint is 0.041-0.042 (bench_tuner.py)
    assert result.improved and result.verify.chosen.cost <= 0.06
