"""Good as-found gains are left alone: nothing beats them by 10 %, so tune() reports improved = False."""

from __future__ import annotations

import pytest

from support.tuner_joints import shoulder, with_gains
from sysid_ros.core.tuner import DriveGains, proposal, tune

pytestmark = pytest.mark.slow  # whole-tape MuJoCo runs: tens of seconds of CPU


def test_good_as_found_gains_are_left_alone() -> None:
    joint = shoulder()
    # what a previous session deployed on this joint: wn 37.8 rad/s, zeta 0.8, the joint's own feed-forward
    joint = with_gains(joint, DriveGains(5136.0, 216.0), as_found_feedforward=joint.truth)
    result = tune(joint.servo, joint.plant)
    assert not result.improved
    assert result.deployed == joint.servo.as_found
    assert result.verify.chosen.role == "as found"
    # the search did run: candidates were admissible, but none beat as found (cost 2) by 10 %
    admissible = [c for c in result.refine.candidates if c.admissible]
    assert admissible and min(c.cost for c in admissible) > 0.9 * 2.0
    assert result.refine.pick is None
    assert any("as found stays" in note for note in result.notes)
    data = proposal(result)
    assert data["improved"] is False and data["summary"].startswith("shoulder: keep as found")
    assert data["proposed"]["drive_parameters"] == data["as_found"]["drive_parameters"]
