"""Plausible identification of a full-inertia arm (issue 19): bounds from physics, the prior toward the nominal
model, and the failure mode they answer.

The synthetic arm: shoulder and elbow pitch, a wrist roll carrying a hand, every body a `fullinertia`. The
hidden truth differs from the nominal model in masses, joint terms and, above all, the hand's centre of mass
(4 cm off, on the other side of the wrist axis), which a mass-only parameter cannot move."""

from __future__ import annotations

import math

import numpy as np
import pytest

from support.plausibility_arm import (
    JOINTS,
    LIMITS_NM,
    TRUE_MASSES,
    TRUE_TERMS,
    joint_terms,
    problem_doc,
    write_logs,
)
from sysid_ros.core.errors import ConfigError
from sysid_ros.core.identify import (
    DRIVE_ACCELERATION_RAD_S2,
    FRICTION_FRACTION,
    MASS_RANGE,
    check_problem,
    identify,
    physical_bounds,
    problem_from_dict,
    problem_spec,
)
from sysid_ros.core.identify.problem import inertia


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plausibility")
    write_logs(folder)
    return folder


def test_wide_bounds_end_implausible(logs):
    """The failure mode: a user's wide bounds (masses 0.01-10 kg, armature 0-1 kg m^2) and a mass-only hand.
    The hand's centre of mass is wrong, so the fit drives the hand (and the upper arm) to a 10 g body on its
    bound, and the held-out shoulder error ends worse than the nominal model's."""
    masses = [
        {"name": f"{b}_mass", "kind": "body_mass", "body": b, "min": 0.01, "max": 10.0}
        for b in ("upper", "fore", "hand")
    ]
    result = identify(problem_from_dict(problem_doc(logs, masses + joint_terms(True))))
    # the window fit's values (when the MJCF carries the torque-space fit, `parameters` are that fit's)
    values = {p.name: p.value[0] for p in result.window_fit_parameters or result.parameters}
    assert values["hand_mass"] < 0.02  # truth 0.6 kg, nominal 0.5 kg
    # the window fit's warning (a note "window fit: ..." when the MJCF carries the torque-space fit, whose values
    # are not on that bound)
    own = [w.removeprefix("window fit: ") for w in result.warnings + result.notes]
    assert any(w.startswith("hand_mass = 0.01 rests on its min bound") for w in own)
    held_out, nominal = (
        result.metrics["validation_position_rms_rad"],
        result.metrics["validation_position_rms_rad_start"],
    )
    assert held_out["shoulder"] > 2 * nominal["shoulder"]


@pytest.mark.parametrize("weight", [0.0, 1.0])
def test_default_plausibility_keeps_the_arm_physical(logs, weight):
    """Defaults (no min/max: bounds from physics) and the hand as a 10-parameter `body_inertia`: every value is
    physical and inside its physical range, nothing rests on a bound, the held-out error of every joint is
    below the nominal model's (and at the noise floor), and the estimates are near the hidden truth. With the
    prior (weight 1) the estimates stay put, every half-width is finite (the posterior's) and none is wider
    than the data's alone."""
    masses = [{"name": f"{b}_mass", "kind": "body_mass", "body": b} for b in ("upper", "fore")]
    hand = {"name": "hand_inertia", "kind": "body_inertia", "body": "hand"}
    extra = {"regularization": {"weight": weight}} if weight else {}
    result = identify(problem_from_dict(problem_doc(logs, masses + [hand] + joint_terms(False), **extra)))
    # the window fit's values (when the MJCF carries the torque-space fit, which frees every inertial of a body
    # whose mass is free, the upper arm's mass is not identifiable there: a value in a sum with the others)
    window_fit = result.window_fit_parameters or result.parameters
    assert not [w for w in result.warnings if "bound" in w], result.warnings
    by_name = {p.name: p for p in window_fit}
    for name, truth in zip(("upper_mass", "fore_mass"), TRUE_MASSES):
        p = by_name[name]
        assert p.min_value[0] == pytest.approx(MASS_RANGE[0] * p.start[0])
        assert p.value[0] == pytest.approx(truth, rel=0.03)
    h = by_name["hand_inertia"]
    assert inertia.physical_problem(h.value[0], inertia.tensor_from_entries(h.value[4:])) is None
    assert h.value[0] == pytest.approx(TRUE_MASSES[2], rel=0.05)
    np.testing.assert_allclose(h.value[2:4], (-0.01, 0.01), atol=0.002)  # across the wrist axis: 0.2 mm off
    assert h.value[1] == pytest.approx(0.05, abs=0.01)  # along it (seen only through the arm's pitch): 4.7 mm
    for k, j in enumerate(JOINTS):
        assert by_name[f"{j}_armature"].max_value[0] == pytest.approx(
            max(LIMITS_NM[k] / DRIVE_ACCELERATION_RAD_S2, 1.5 * by_name[f"{j}_armature"].start[0])
        )
        assert by_name[f"{j}_frictionloss"].max_value[0] == pytest.approx(FRICTION_FRACTION * LIMITS_NM[k])
        for kind, truth in TRUE_TERMS.items():
            p = by_name[f"{j}_{kind}"]
            assert p.min_value[0] <= p.value[0] <= p.max_value[0]
            assert p.value[0] == pytest.approx(truth[k], rel=0.1, abs=0.002)
    held_out, nominal = (
        result.metrics["validation_position_rms_rad"],
        result.metrics["validation_position_rms_rad_start"],
    )
    for j in JOINTS:
        assert held_out[j] < min(nominal[j], 1e-3)  # the nominal's is 17-320 mrad; the noise 0.2 mrad
    torque = result.metrics["held_out_torque_rms_nm"]  # the same in joint torque (measured effort held out)
    for j in JOINTS:
        assert torque["identified"][j] < torque["nominal"][j]
    if weight:
        reg = result.metrics["regularization"]
        assert reg["weight"] == 1.0 and reg["prior_cost"] < reg["data_cost"]
        assert all(r is None or r <= 1.0 + 1e-9 for r in reg["half_width_ratio"].values())
        assert all(math.isfinite(v) for p in window_fit for v in p.half_width_95)
        assert any("regularization toward the nominal model" in n for n in result.notes)


def test_physical_bounds_name_their_source_and_refuse_what_they_cannot_bound(logs):
    doc = problem_doc(
        logs,
        [
            {"name": "m", "kind": "body_mass_com", "body": "hand"},
            {"name": "a", "kind": "joint_armature", "joint": "wrist"},
            {"name": "d", "kind": "joint_damping", "joint": "elbow"},
        ],
    )
    problem = problem_from_dict(doc)
    spec = problem_spec(problem)
    model = spec.compile()
    filled, notes = physical_bounds(problem, spec, model)
    m, a, d = filled.parameters
    assert (m.min_value[0], m.max_value[0]) == pytest.approx((0.25, 1.0))
    assert m.max_value[1] - m.min_value[1] == pytest.approx(2 * max(math.sqrt(0.5 * 0.0033 / 0.5), 0.02), rel=1e-6)
    assert (a.min_value[0], a.max_value[0]) == pytest.approx((0.0, 0.08))
    assert (d.min_value[0], d.max_value[0]) == pytest.approx((0.0, 30.0))
    assert "torque limit 8 N m / 100 rad/s^2" in notes[1]
    check_problem(filled, spec, model, [])
    doc["parameters"] = [{"name": "s", "kind": "signal_bias", "signal": "wrist_qpos"}]
    with pytest.raises(ConfigError, match="no physical default bounds"):
        physical_bounds(problem_from_dict(doc), spec, model)
    model.actuator_ctrllimited[:] = 0
    doc["parameters"] = [{"name": "a", "kind": "joint_armature", "joint": "wrist"}]
    with pytest.raises(ConfigError, match="no torque limit for joint 'wrist'"):
        physical_bounds(problem_from_dict(doc), spec, model)
