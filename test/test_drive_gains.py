"""Drive gains calibrated with a known mass (issue 32), on logs like an industrial arm's controller writes
(test/industrial_arm.py: 100 Hz rows 8-14 ms apart, effort = current x drive gain quantized to 1 mA with 20 mA of
noise, smooth Coulomb friction of 4-28 N m, garbage rows), where the logger's drive gains are 5 % off (+5 % and
-5 % alternately), as a gain taken from a data sheet can be.

1. `sysid-ros calibrate-gains`: an unloaded run and a run with a known 2 kg calibration mass (same motion) give each
   joint's gain. The three big joints (the payload's torque 10-21 % of theirs) are calibrated: measured within
   0.1-0.7 % of the truth, each inside its 95 % interval (half-widths 0.5-1.7 %). The wrists, which an on-axis
   payload hardly loads (0.4-28 % of their torque but intervals of 5-100 %), are named as not calibrated and
   left out of the written `effort_scale`.
2. The unknown 4.2 kg payload is weighed as docs/real_arms.md says (the arm from the unloaded run, the payload
   from the loaded one, `body_mass_com`) with a problem file's `effort_scale` in both problems.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import yaml
from industrial_arm import JOINTS, PAYLOAD_KG, industrial_log

from support.industrial_problems import _arm_problem, _with_tool
from sysid_ros.cli import main
from sysid_ros.core.files import model_path
from sysid_ros.core.identify import identify, problem_from_dict, write_results

pytestmark = pytest.mark.slow  # three simulated runs and four identifications (~2 min)

GAIN_ERROR = np.array([0.05, -0.05, 0.05, -0.05, 0.05, -0.05])
TRUE_SCALE = 1.0 / (1.0 + GAIN_ERROR)  # what calibration must find: true torque / logged effort
CALIBRATION_KG = 2.0
BIG_JOINTS = JOINTS[:3]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("drive_gains")
    logs = {
        name: industrial_log(folder / name, 0, 12.0, kg, 3, logger_seed=seed, gain_error=GAIN_ERROR).path
        for name, kg, seed in (("unloaded", 0.0, 1), ("calibration", CALIBRATION_KG, 2), ("loaded", PAYLOAD_KG, 3))
    }
    spec = mujoco.MjSpec.from_file(str(model_path("ur10e_like")))
    spec.body("payload").mass = CALIBRATION_KG  # the known mass, where the payload body is
    (folder / "calibration.xml").write_text(spec.to_xml())
    return folder, logs


def calibrate(runs, capsys, out):
    folder, logs = runs
    argv = ["calibrate-gains", "--model", str(folder / "calibration.xml"), "--payload", "payload"]
    argv += ["--unloaded", str(logs["unloaded"]), "--loaded", str(logs["calibration"]), "--out", str(out)]
    code = main(argv)
    return code, capsys.readouterr()


def test_the_big_joints_are_calibrated_within_their_intervals(runs, capsys, tmp_path):
    code, printed = calibrate(runs, capsys, tmp_path / "gains.yaml")
    assert code == 0, printed.err
    doc = yaml.safe_load((tmp_path / "gains.yaml").read_text())
    print(printed.out)
    assert sorted(doc["effort_scale"]) == sorted(BIG_JOINTS)  # the wrists are not calibrated by this payload
    for j, joint in enumerate(BIG_JOINTS):
        value, half = doc["effort_scale"][joint], doc["half_width_95"][joint]
        assert abs(value - TRUE_SCALE[j]) <= half, (joint, value, half, TRUE_SCALE[j])
        assert half < 0.02 * value
    assert doc["verdict"] == "suspect" and len(doc["warnings"]) == 3
    assert all("not calibrated" in w for w in doc["warnings"])


def weigh(folder, logs, scale: dict | None, tag: str) -> float:
    """The payload's mass by docs/real_arms.md's two steps, with `scale` as both problems' effort_scale."""
    spec = mujoco.MjSpec.from_file(str(model_path("ur10e_like")))
    spec.delete(spec.body("payload"))
    arm_xml = folder / f"arm_{tag}.xml"
    arm_xml.write_text(spec.to_xml())
    doc = _arm_problem(str(arm_xml), str(logs["unloaded"]))
    if scale:
        doc["training"][0]["effort_scale"] = scale
    arm = identify(problem_from_dict(doc))
    paths = write_results(arm, folder / f"arm_{tag}")
    step2 = folder / f"arm_with_tool_{tag}.xml"
    step2.write_text(_with_tool(paths["mjcf"].read_text()))
    entry = {"path": str(logs["loaded"]), "control": "effort", **({"effort_scale": scale} if scale else {})}
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
    return float(payload.parameters[0].value[0])


def test_the_true_gains_as_effort_scale_weigh_the_payload_within_3_percent(runs):
    """`effort_scale` end to end: with every joint's true gain in both problems the payload comes out within 3 %
    (measured 4.209 kg, +0.2 %); as logged, 5 % off on every joint, 4.066 kg (-3.2 %). With only
    the three calibrated joints scaled (the wrists as logged) it came out 3.992 kg (-4.9 %): the wrists carry the
    payload's torque too (wrist 1: 28 % of its torque), so this stand-in's calibration does not weigh it better
    until the wrists are calibrated (docs/real_arms.md)."""
    folder, logs = runs
    true_scale = {joint: float(k) for joint, k in zip(JOINTS, TRUE_SCALE)}
    scaled = weigh(folder, logs, true_scale, "true_scale")
    as_logged = weigh(folder, logs, None, "as_logged")
    print(f"payload {scaled:.3f} kg with the true gains, {as_logged:.3f} kg as logged (truth {PAYLOAD_KG})")
    assert abs(scaled - PAYLOAD_KG) <= 0.03 * PAYLOAD_KG, scaled
    assert abs(scaled - PAYLOAD_KG) < abs(as_logged - PAYLOAD_KG), (scaled, as_logged)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"--payload": "no_such_body"}, "the model has no body 'no_such_body'"),
        ({"--out": "EXISTS"}, "the output file exists already"),
        ({"--loaded": "/dev/null"}, ""),
    ],
    ids=["no-body", "out-exists", "not-a-bag"],
)
def test_bad_input_is_one_line_and_writes_nothing(runs, capsys, tmp_path, change, match):
    folder, logs = runs
    out = tmp_path / "gains.yaml"
    if change.get("--out") == "EXISTS":
        out.write_text("kept: true\n")
        change = {"--out": str(out)}
    args = {
        "--model": str(folder / "calibration.xml"),
        "--payload": "payload",
        "--unloaded": str(logs["unloaded"]),
        "--loaded": str(logs["calibration"]),
        "--out": str(out),
        **change,
    }
    code = main(["calibrate-gains", *[x for kv in args.items() for x in kv]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("sysid-ros calibrate-gains: "), err
    assert match in err[0] and "unexpected" not in err[0] and "Traceback" not in err[0]
    assert not out.exists() or out.read_text() == "kept: true\n"
