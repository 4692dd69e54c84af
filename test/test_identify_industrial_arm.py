"""A real 6-joint industrial arm's workflow on logs like its controller writes (issue 23; test/industrial_arm.py):
100 Hz rows 8-14 ms apart, effort = motor current x drive gain, Coulomb friction of 4-28 N m, garbage rows.

1. the arm from an unloaded run: the user's model (Menagerie-like masses, no payload) with link masses,
   damping, friction loss and effort offsets free;
2. the payload from a loaded run of the same trajectory: the identified MJCF (affine-bias effort-offset
   motors, friction) as the model, a payload body added as users write it (`<inertial pos="0 0 0" .../>`,
   which MuJoCo marks `body_sameframe`), its mass and centre free with bounds from physics (the model's
   1 kg is a guess, the truth is 4.2 kg).

Measured (seed 0, 12 s runs, bench/bench_industrial_arm.py): payload 4.194 kg (-0.15 %), its centre within
1 mm of the truth, 95 % half-width 0.042 kg (1 %); about 30 s of CPU. Before the fixes step 2 was refused (the
motors "not a plain torque motor"), the centre stayed at its start with an infinite interval, and the scalar
bounds of the issue's problem bounded the centre too. The tolerance, 3 %, is the issue's; the payload's own
statistical interval is 1 %, and what remains is the arm of step 1 (its link masses 2-26 % off where the data
cannot tell them apart; their sum and moments are what the payload's torques meet)."""

from __future__ import annotations

import mujoco
import numpy as np
from industrial_arm import JOINTS, PAYLOAD_KG, loaded_and_unloaded

from support.industrial_problems import _arm_problem, _with_tool
from sysid_ros.core.files import model_path
from sysid_ros.core.identify import identify, problem_from_dict, write_results


def test_arm_then_payload_weighs_the_payload_within_3_percent(tmp_path):
    unloaded, loaded = loaded_and_unloaded(tmp_path / "runs", seed=0, seconds=12.0)
    assert unloaded.garbage_rows and loaded.garbage_rows  # garbage rows in both logs: dropped, not fatal

    spec = mujoco.MjSpec.from_file(str(model_path("ur10e_like")))
    spec.delete(spec.body("payload"))  # the user's arm, no payload yet
    arm_xml = tmp_path / "arm.xml"
    arm_xml.write_text(spec.to_xml())
    arm = identify(problem_from_dict(_arm_problem(str(arm_xml), str(unloaded.path))))
    assert any("dropped as garbage" in w for w in arm.warnings)
    paths = write_results(arm, tmp_path / "arm")

    step2 = tmp_path / "arm_with_tool.xml"
    step2.write_text(_with_tool(paths["mjcf"].read_text()))
    model = mujoco.MjModel.from_xml_path(str(step2))
    assert model.body_sameframe[model.body("tool").id] == 1  # the trap is there
    assert model.actuator_biastype[0] == mujoco.mjtBias.mjBIAS_AFFINE  # the identified effort offsets
    doc = {
        "model": str(step2),
        "joints": list(JOINTS),
        "training": [{"path": str(loaded.path), "control": "effort"}],
        "segment_s": 0.25,
        "initial_state": "measured",
        "optimizer": {"max_iters": 20},
        "parameters": [{"name": "tool", "kind": "body_mass_com", "body": "tool"}],
    }  # bounds from physics
    payload = identify(problem_from_dict(doc))
    (p,) = payload.parameters
    assert p.min_value[0] < 0.1 and p.max_value[0] > 20  # the 1 kg guess does not bound it to 0.5-2 kg
    mass, com = p.value[0], np.asarray(p.value[1:4])
    assert abs(mass - PAYLOAD_KG) / PAYLOAD_KG < 0.03, mass
    assert np.all(np.abs(com) < 0.01), com  # the truth: the tool body's origin
    assert p.half_width_95[0] < 0.03 * PAYLOAD_KG and max(p.half_width_95[1:]) < 0.005  # finite: the centre moves
