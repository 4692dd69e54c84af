"""A real 7-joint arm: pybullet's KUKA LBR iiwa URDF, a hidden flange payload and hidden joint damping.

The robot (SimRobot on the MJCF that `arm_models` makes of the URDF) tracks multisine setpoints with its
PID drives; the measured effort (the torque applied, held 2 ms) is replayed in 0.25 s windows that each
start from the measured (smoothed) state, weighted by that state's noise. Feedback noise 0.2 mrad and
2 mrad/s. Skipped without pybullet."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from support.iiwa import (
    HIDDEN,
    LINK7,
    NOMINAL_PAYLOAD,
    TRUE_DAMPING,
    TRUE_PAYLOAD_KG,
    damping_parameters,
    problem,
    record,
)
from sysid_ros.core.bags import save_npz
from sysid_ros.core.identify import Payload, identify, iiwa_mjcf, mass_sum_groups

pytestmark = pytest.mark.slow  # three recordings and two 7-joint identifications: about 15 s of CPU


@pytest.fixture(scope="module")
def nominal_model(tmp_path_factory):
    return iiwa_mjcf(tmp_path_factory.mktemp("iiwa") / "iiwa.xml", payload=NOMINAL_PAYLOAD)


@pytest.fixture(scope="module")
def payload_and_damping(nominal_model, tmp_path_factory):
    d = tmp_path_factory.mktemp("iiwa_data")
    train = save_npz(d / "train.npz", record(nominal_model, 1, 4.0, HIDDEN))
    val = save_npz(d / "val.npz", record(nominal_model, 2, 2.0, HIDDEN))
    parameters = damping_parameters() + [
        {"name": "payload_mass", "kind": "body_mass", "body": "payload", "min": 0.05, "max": 3.0, "start": 0.5}
    ]
    return identify(problem(nominal_model, train, val, parameters))


def test_model_from_urdf(nominal_model):
    model = mujoco.MjModel.from_xml_path(str(nominal_model))
    assert model.nu == 7 and model.njnt == 7 and model.ngeom == 0
    assert model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT
    # the payload stays a body (not fused into link 7) with its centre where it was put, not doubled
    assert model.body("payload").mass[0] == 0.5 and np.allclose(model.body("payload").ipos, [0, 0, 0.08])
    # link masses as the URDF has them (docs/facts.md: 4, 4, 3, 2.7, 1.7, 1.8, 0.3 kg)
    masses = [model.body(f"lbr_iiwa_link_{i}").mass[0] for i in range(1, 8)]
    assert masses == pytest.approx([4, 4, 3, 2.7, 1.7, 1.8, 0.3])


def test_payload_and_damping_within_half_percent(payload_and_damping):
    by_name = {p.name: p for p in payload_and_damping.parameters}
    truth = {f"joint{k + 1}_damping": d for k, d in enumerate(TRUE_DAMPING)} | {"payload_mass": TRUE_PAYLOAD_KG}
    for name, value in truth.items():
        p = by_name[name]
        # the brief's 0.5 %. Measured on this record (4 s, 16 windows, 0.2 mrad) with each window weighted by
        # its start state's noise (`start_noise: weight`, the default): within 0.04 % (plain least squares:
        # 0.19 %); the bench's 5 seeds x 10 s: within 0.20 % (plain: 0.42 % / 0.55 % on joints 2 and 4)
        assert p.value[0] == pytest.approx(value, rel=5e-3), (name, p.value, value)
        assert p.identifiable, name
    assert payload_and_damping.metrics["training_segments"] == 16


def test_windowed_intervals_cover(payload_and_damping):
    """The intervals include each window's start-state noise (before: errors up to ~7 half-widths)."""
    by_name = {p.name: p for p in payload_and_damping.parameters}
    truth = {f"joint{k + 1}_damping": d for k, d in enumerate(TRUE_DAMPING)} | {"payload_mass": TRUE_PAYLOAD_KG}
    ratio = np.array([abs(by_name[n].value[0] - v) / by_name[n].half_width_95[0] for n, v in truth.items()])
    # measured |error| / half-width 0.03-0.68 (bench, 5 seeds x 10 s: 38 of 40 covered). At 95 % each, 8
    # intervals: P(<= 6 covered) = 6 %, P(any beyond 1.5 half-widths) = 3 %; the plain white-residual
    # intervals were 2-8x narrower and fail both.
    assert np.sum(ratio <= 1) >= 7 and ratio.max() < 1.5, ratio
    assert any("start state's noise" in note for note in payload_and_damping.notes)


def test_held_out_windows_at_the_noise_floor(payload_and_damping):
    # 0.2 mrad white noise plus each window's start-state error (measured 0.25-0.37 mrad); a payload or
    # damping 10 % off leaves mrad-level errors.
    for split in ("training_position_rms_rad", "validation_position_rms_rad"):
        for joint, rms in payload_and_damping.metrics[split].items():
            assert 1.8e-4 < rms < 5e-4, (split, joint, rms)


def test_flange_masses_enter_only_as_their_sum(nominal_model):
    """Link 7 and the payload (both on the joint-7 axis, in the flange frame) have identical columns in every
    base parameter of the whole-arm regressor: joint data see only their sum. Link 6 and 5 stay apart."""
    model = mujoco.MjModel.from_xml_path(str(nominal_model))
    groups = mass_sum_groups(model, ["lbr_iiwa_link_5", "lbr_iiwa_link_6", LINK7, "payload"])
    assert (LINK7, "payload") in groups and ("lbr_iiwa_link_6",) in groups and ("lbr_iiwa_link_5",) in groups


@pytest.fixture(scope="module")
def displaced_payload(nominal_model, tmp_path_factory):
    """Truth: the payload's centre of mass 1 cm further out than the model says (0.09 m, not 0.08 m)."""
    d = tmp_path_factory.mktemp("iiwa_displaced")
    truth_model = iiwa_mjcf(d / "truth.xml", payload=Payload(TRUE_PAYLOAD_KG, com_m=(0.0, 0.0, 0.09)))
    train = save_npz(d / "train.npz", record(truth_model, 3, 4.0, {}))
    parameters = damping_parameters(frozen_at=(0.5,) * 7) + [  # damping as in the model file: the truth here
        {"name": "payload_mass", "kind": "body_mass", "body": "payload", "min": 0.05, "max": 3.0, "start": 0.5},
        {"name": "link7_mass", "kind": "body_mass", "body": LINK7, "min": 0.01, "max": 2.0, "start": 0.3},
    ]
    return identify(problem(nominal_model, train, None, parameters))


def test_sum_on_the_axis_survives_a_wrong_centre_of_mass(displaced_payload):
    by_name = {p.name: p for p in displaced_payload.parameters}
    total = by_name["payload_mass"].value[0] + by_name["link7_mass"].value[0]
    # the identifiable combination: within 0.5 % of 0.8 + 0.3 kg although the payload's centre is wrong
    # (measured +0.002 %; with the centre 2 cm off, link 7 runs into its 0.01 kg bound and the sum is +0.9 %)
    assert total == pytest.approx(TRUE_PAYLOAD_KG + 0.3, rel=5e-3), total


def test_split_on_the_axis_is_the_models_assumption(displaced_payload):
    """The mass-only fit splits link 7 and the payload only through the centres of mass the model assumes:
    with the payload's 1 cm off, the split moves by tens of percent (measured payload +19 %, link 7 -52 %,
    both with half-widths under 0.1 % and called identifiable). What does show it is the residual: the
    wrist joints leave 0.9-1.3 mrad RMS, 4-6x the 0.2 mrad noise (the correct model: 0.24-0.26 mrad)."""
    by_name = {p.name: p for p in displaced_payload.parameters}
    payload = by_name["payload_mass"]
    assert abs(payload.value[0] / TRUE_PAYLOAD_KG - 1) > 0.1, payload.value
    rms = displaced_payload.metrics["training_position_rms_rad"]
    assert rms["lbr_iiwa_joint_5"] > 5e-4, rms  # the bound test_held_out_windows_at_the_noise_floor keeps


def test_split_on_the_axis_is_reported_unidentifiable(displaced_payload):
    # Link 7 and the flange payload enter the dynamics only as their sum: apart they are flagged, and the
    # sum is reported (it is right even with the payload's true centre of mass 1 cm off the model's).
    by_name = {p.name: p for p in displaced_payload.parameters}
    assert not by_name["payload_mass"].identifiable and not by_name["link7_mass"].identifiable
    assert by_name["payload_mass"].half_width_95[0] == float("inf")
    assert any("only as their sum" in note for note in displaced_payload.notes)
