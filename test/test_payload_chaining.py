"""Chaining identifications on a real arm (issue 23): an identified MJCF (affine-bias effort-offset motors) is a
valid model again; a payload written `<inertial pos="0 0 0" .../>` (MuJoCo's `body_sameframe`) has a centre of
mass that moves; `body_mass_com` bounds per component; a payload's default bounds do not trust its guessed mass.
Fast checks of each piece; test_identify_industrial_arm.py runs the whole workflow."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from mujoco import sysid

from sysid_ros.core.errors import ConfigError
from sysid_ros.core.files import model_path
from sysid_ros.core.identify import (
    CachedBuild,
    build_parameters,
    check_problem,
    physical_bounds,
    problem_from_dict,
    problem_spec,
)
from sysid_ros.core.identify.rollout import sequences as sd

JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint", "wrist_3_joint"]
POSE = [0.0, -1.1, 1.4, -1.6, -1.57, 0.0]


def _problem(tmp_path, parameters, model=None):
    bag = tmp_path / "data.npz"
    bag.write_bytes(b"")  # check_problem wants the file to exist; nothing here reads it
    return problem_from_dict(
        {
            "model": str(model or model_path("ur10e_like")),
            "joints": JOINTS,
            "training": [str(bag)],
            "parameters": parameters,
        }
    )


def _gravity(model: mujoco.MjModel) -> np.ndarray:
    data = mujoco.MjData(model)
    data.qpos[:] = POSE
    mujoco.mj_forward(model, data)
    return data.qfrc_bias.copy()


def test_a_payload_centre_starting_at_its_origin_moves_the_dynamics_by_any_step(tmp_path):
    """The compiler keeps `body_sameframe` for a centre within ~1e-6 m of the origin: a finite-difference step
    of 1.5e-8 m (the optimiser's) changed nothing, so the centre was "not identifiable"."""
    problem = _problem(
        tmp_path,
        [
            {
                "name": "p",
                "kind": "body_mass_com",
                "body": "payload",
                "min": [0.1, -0.1, -0.1, -0.1],
                "max": [20.0, 0.1, 0.1, 0.1],
            }
        ],
    )
    spec = problem_spec(problem)
    params = build_parameters(spec, problem.parameters, {"p": (2.0, 0.0, 0.0, 0.0)})
    build = CachedBuild()
    before = _gravity(build(params, spec))
    params["p"].value = np.array([2.0, 0.0, 0.0, 1.5e-8])
    after = _gravity(build(params, spec))
    params["p"].value = np.array([2.0, 0.0, 0.0, 1e-3])  # a step the compiler sees anyway
    slope = (_gravity(build(params, spec)) - before) / 1e-3
    assert abs(slope[1]) > 1.0  # gravity's torque on the shoulder lift is linear in the centre
    assert np.allclose((after - before) / 1.5e-8, slope, rtol=1e-3, atol=1e-3)
    params["p"].value = np.array([2.0, 0.0, 0.0, 1.5e-8])
    plain = sysid.apply_param_modifiers(params, spec)  # what MuJoCo's compiler alone gives
    assert plain.body_sameframe[plain.body("payload").id] == 1 and np.allclose(_gravity(plain), before)


def test_scalar_bounds_on_body_mass_com_bound_the_mass_and_vectors_each_component(tmp_path):
    spec = problem_spec(_problem(tmp_path, [{"name": "p", "kind": "body_mass", "body": "payload"}]))
    model = spec.copy().compile()
    scalar = _problem(tmp_path, [{"name": "p", "kind": "body_mass_com", "body": "payload", "min": 0.1, "max": 10.0}])
    filled, notes = physical_bounds(scalar, spec, model)
    (p,) = filled.parameters
    assert p.min_value[0] == 0.1 and p.max_value[0] == 10.0
    assert all(lo < 0 < hi for lo, hi in zip(p.min_value[1:], p.max_value[1:]))  # the centre 0 is inside
    assert "bound the mass" in notes[0]
    assert check_problem(filled, spec, model, [])["p"] == (2.0, 0.0, 0.0, 0.0)  # was "outside [0.1, 10]"
    vector = _problem(
        tmp_path,
        [
            {
                "name": "p",
                "kind": "body_mass_com",
                "body": "payload",
                "min": [0.5, -0.01, -0.02, -0.03],
                "max": [5.0, 0.01, 0.02, 0.03],
            }
        ],
    )
    assert physical_bounds(vector, spec, model)[0].parameters[0].min_value == (0.5, -0.01, -0.02, -0.03)


def test_a_payload_s_default_bounds_do_not_trust_its_guessed_mass(tmp_path):
    problem = _problem(
        tmp_path,
        [
            {"name": "payload", "kind": "body_mass", "body": "payload"},
            {"name": "forearm", "kind": "body_mass", "body": "forearm_link"},
        ],
    )
    spec = problem_spec(problem)
    model = spec.copy().compile()
    filled, notes = physical_bounds(problem, spec, model)
    payload, forearm = filled.parameters
    arm_kg = sum(
        model.body_mass[model.body(b).id]
        for b in ("shoulder_link", "upper_arm_link", "forearm_link", "wrist_1_link", "wrist_2_link", "wrist_3_link")
    )
    assert payload.max_value[0] == pytest.approx(arm_kg) and payload.min_value[0] == pytest.approx(1e-3 * arm_kg)
    assert "not trusted" in notes[0]
    assert forearm.min_value[0] == pytest.approx(0.5 * 3.87) and forearm.max_value[0] == pytest.approx(2 * 3.87)


def test_an_identified_mjcf_s_offset_motors_map_as_torque_motors_and_other_biases_do_not(tmp_path):
    spec = mujoco.MjSpec.from_file(str(model_path("ur10e_like")))
    motor = spec.actuator("elbow_motor")
    motor.biastype = mujoco.mjtBias.mjBIAS_AFFINE
    motor.biasprm[0] = -0.4  # what joint_effort_offset writes: a constant bias
    maps = sd.joint_maps(spec.copy().compile(), JOINTS)
    assert [m.actuator for m in maps][2] == "elbow_motor"
    motor.biasprm[1] = -50.0  # a position servo's bias is not an offset
    with pytest.raises(ConfigError, match="not a plain torque motor"):
        sd.joint_maps(spec.compile(), JOINTS)
