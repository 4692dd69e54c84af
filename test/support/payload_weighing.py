"""docs/real_arms.md's steps 1 and 2 on industrial-arm logs (test/industrial_arm.py), with an `effort_scale` in
both problems: the arm from the unloaded run, then the payload (`body_mass_com` on a tool body the model guesses)
from the loaded run. Used by test_drive_gains."""

from __future__ import annotations

from pathlib import Path

import mujoco
from industrial_arm import JOINTS

from support.industrial_problems import _arm_problem, _with_tool
from sysid_ros.core.files import model_path
from sysid_ros.core.identify import identify, problem_from_dict, write_results


def weigh(folder: Path, unloaded: Path, loaded: Path, scale: dict[str, float] | None, tag: str):
    """The identified payload parameter (mass, centre in the tool body's frame, with half-widths) and the arm's
    identified MJCF (step 1's, without the payload)."""
    spec = mujoco.MjSpec.from_file(str(model_path("ur10e_like")))
    spec.delete(spec.body("payload"))  # the user's arm, no payload yet
    arm_xml = folder / f"arm_{tag}.xml"
    arm_xml.write_text(spec.to_xml())
    doc = _arm_problem(str(arm_xml), str(unloaded))
    if scale:
        doc["training"][0]["effort_scale"] = scale
    arm = identify(problem_from_dict(doc))
    paths = write_results(arm, folder / f"arm_{tag}")
    step2 = folder / f"arm_with_tool_{tag}.xml"
    step2.write_text(_with_tool(paths["mjcf"].read_text()))
    entry = {"path": str(loaded), "control": "effort", **({"effort_scale": scale} if scale else {})}
    payload = identify(
        problem_from_dict(
            {
                "model": str(step2),
                "joints": list(JOINTS),
                "training": [entry],
                "segment_s": 0.25,
                "initial_state": "measured",
                "optimizer": {"max_iters": 20},
                "parameters": [{"name": "tool", "kind": "body_mass_com", "body": "tool"}],
            }
        )
    )
    (p,) = payload.parameters
    return p, paths["mjcf"]
