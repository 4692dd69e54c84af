"""fine_tune on logs of a deployed shoulder whose payload grew (8 -> 10 kg: gravity +25 %, inertia +20 %),
and the canary that keeps the change only if the live cost ratio gets halfway to the prediction."""

from __future__ import annotations

from dataclasses import replace

import pytest

from support.tuner_joints import shoulder
from sysid_ros.core import tapes
from sysid_ros.core.tuner import Controller, DriveGains, Log, feedforward_from, fine_tune

pytestmark = pytest.mark.slow  # whole-tape MuJoCo runs: tens of seconds of CPU


def test_drift_is_reported_the_twin_checked_and_the_canary_keeps_only_a_real_gain() -> None:
    joint = shoulder(physics={"upper_arm.mass": 10.0})
    servo = replace(joint.servo, priors=joint.truth, delay_s=0.005)  # commissioned on the 8 kg arm
    deployed = Controller(DriveGains(5136.0, 216.0), feedforward_from(joint.truth), "commissioned")
    logged = tapes.evaluation(servo.envelopes(), 200.0, 3)[:1]  # one pick-and-place tape
    logs = [Log(t, joint.plant.play(t, deployed)) for t in logged]
    motion_before = joint.plant.motion_s
    result = fine_tune(servo, deployed, logs)
    assert joint.plant.motion_s == motion_before  # fine_tune moves nothing: it replays on the twin
    # drift against commissioning: gravity 47.1 -> 58.9 N m (+25 %), inertia 3.6 -> 4.32 (+20 %); within 3
    # points (the fit's bootstrap half-widths on these logs are under 1 %)
    assert result.drift["gravity_sin_nm"]["change"] == pytest.approx(0.25, abs=0.03)
    assert result.drift["inertia_kg_m2"]["change"] == pytest.approx(0.20, abs=0.03)
    # feedback-error learning moves the gravity feed-forward toward the new payload
    assert result.learned.gravity_sin_nm > 1.15 * joint.truth.gravity_sin_nm
    assert abs(result.twin_tracking_ratio - 1.0) <= 0.30
    assert len(result.candidates) == 3 * 3 * 2 * 3
    assert result.proposal is not None and result.predicted_ratio <= 0.9
    after = [Log(t, joint.plant.play(t, result.proposal)) for t in logged]
    kept = result.canary(after)
    assert kept.keep and kept.threshold == pytest.approx(1 - 0.5 * (1 - result.predicted_ratio))
    # the same logs again (nothing changed live) are a ratio of 1: roll back
    rolled = result.canary(logs)
    assert not rolled.keep and rolled.live_ratio == pytest.approx(1.0)
