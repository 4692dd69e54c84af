"""The full path over DDS: sim_robot with hidden physics -> tape_recorder -> bag -> identifier (and the CLI).

The pendulum of the lesson (1.3 kg at 0.5 m, damping 0.08, friction loss 0.05) is hidden in sim_robot;
the estimators start from a nominal guess (1.0 kg, no damping, no friction). The robot is driven by
multisine torque tapes (five sines in 0.2-3 Hz, 1.6 N m peak, 10 s) and reports its angle with
0.5 mrad of noise at 500 Hz.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from std_msgs.msg import String
from std_srvs.srv import Trigger

from sysid_ros.core.identify import identify, problem_from_dict
from sysid_ros.demo import HIDDEN_PENDULUM, TRUTH, record
from sysid_ros.ros.client import RosClient, wait_for
from sysid_ros.ros.processes import NodeProcess

pytestmark = pytest.mark.ros

SIM = HIDDEN_PENDULUM  # the demo's robot (its truth: TRUTH), recorded with the demo's tapes


def problem_document(training: list[str], validation: list[str]) -> dict:
    return {
        "name": "pendulum",
        "model": "pendulum",
        "joints": ["hinge"],
        "training": [{"bag": b, "control": "effort"} for b in training],
        "validation": [{"bag": b, "control": "effort"} for b in validation],
        "noise": {"position_rad": 5e-4, "velocity_rad_s": 5e-3},
        "parameters": [
            {"name": "pole_mass", "kind": "body_mass", "body": "pole", "start": 1.0, "min": 0.2, "max": 5.0},
            {"name": "hinge_damping", "kind": "joint_damping", "joint": "hinge", "start": 0.0, "min": 0.0, "max": 1.0},
            {
                "name": "hinge_frictionloss",
                "kind": "joint_frictionloss",
                "joint": "hinge",
                "start": 0.0,
                "min": 0.0,
                "max": 1.0,
            },
        ],
        "optimizer": {"backend": "mujoco", "max_iters": 100, "quiet": True},
    }


def assert_within_noise(name: str, value: dict, truth: float) -> None:
    """10 s at 500 Hz with 0.5 mrad noise: the damping's 95 % interval is about 0.6 % of it (sd 0.3 %), the mass's
    0.02 %. Each recording over DDS starts the noise at another sample, so the error varies from run to run (the
    damping's measured 0.29-0.55 % over 8 runs; asserting 0.5 % failed a CI run at 0.55 %). Asserted: an interval
    narrower than 1 % of the truth, holding the truth within 2 half-widths (4 sd) and within 1 % (3 sd)."""
    error = abs(value["value"] - truth)
    assert 0 < value["half_width_95"] < 0.01 * truth, (name, value)
    assert error < 2 * value["half_width_95"] and error < 0.01 * truth, (name, value)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Two multisine torque tapes (training seed 1, held-out seed 7) recorded over DDS from the hidden pendulum,
    as the demo records them (it raises when a play does not finish)."""
    folder = tmp_path_factory.mktemp("e2e")
    return folder, record(folder, SIM["real_time_factor"])


def test_identifier_node_recovers_the_hidden_pendulum(recorded):
    folder, (train, held_out) = recorded
    problem_file = folder / "problem.yaml"
    problem_file.write_text(yaml.safe_dump(problem_document([held_out], [train])))  # the node swaps them back
    node = NodeProcess(
        "identifier",
        "identifier",
        {
            "problem_file": str(problem_file),
            "training_bags": [train],
            "validation_bags": [held_out],
            "control": "effort",
            "output_dir": str(folder / "identified"),
        },
        folder / "logs",
    )
    client = RosClient("e2e_identify")
    try:
        results = client.collect(String, "/identifier/result", 10)
        assert client.change_state("identifier", "configure") == (True, "inactive")
        assert client.call(Trigger, "/identifier/identify", Trigger.Request()).success is False  # not active yet
        assert client.change_state("identifier", "activate") == (True, "active")
        response = client.call(Trigger, "/identifier/identify", Trigger.Request())
        assert response.success, response.message
        document = yaml.safe_load(wait_for(lambda: results, timeout_s=300, what="the identification")[0].data)
    finally:
        client.close()
        node.stop()
    assert list(document)[:2] == ["verdict", "warnings"]
    assert document["verdict"] == "ok", document["warnings"]  # clean data recorded over DDS: no false alarm
    values = document["parameters"]
    for name, truth in TRUTH.items():
        assert_within_noise(name, values[name], truth)
        assert values[name]["identifiable"] is True
    # Held-out angle RMS at the noise floor (0.5 mrad): the model predicts motion it was not fitted to.
    assert document["metrics"]["validation_position_rms_rad"]["hinge"] < 1.0e-3, document["metrics"]


def test_cli_identify_and_regression_warm_start(recorded, tmp_path):
    folder, (train, held_out) = recorded
    problem_file = tmp_path / "problem.yaml"
    problem_file.write_text(yaml.safe_dump({**problem_document([train], [held_out]), "warm_start": True}))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sysid_ros.cli",
            "identify",
            str(problem_file),
            "--out",
            str(tmp_path / "out"),
            "--quiet",
            "--strict",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr  # --strict: 1 on a suspect verdict
    assert "verdict: ok" in done.stderr and "warning:" not in done.stderr, done.stderr
    identified = yaml.safe_load((tmp_path / "out" / "identified.yaml").read_text())
    values = identified["parameters"]
    for name, truth in TRUTH.items():
        assert_within_noise(name, values[name], truth)
    assert (tmp_path / "out" / "report.html").read_text().count('class="sysid-plot"') >= 4  # plotly plots
    # The identified MJCF carries the values at full precision (the library's own XML rounds to 6 digits).
    import mujoco

    model = mujoco.MjModel.from_xml_path(str(tmp_path / "out" / "pendulum.xml"))
    assert model.body("pole").mass[0] == values["pole_mass"]["value"]
    assert model.dof_frictionloss[0] == values["hinge_frictionloss"]["value"]


def test_bad_problem_refused_before_any_motion_or_optimization(recorded, tmp_path):
    folder, (train, _) = recorded
    bad = problem_document([train], [])
    bad["parameters"][0]["body"] = "no_such_link"
    with pytest.raises(Exception, match="no_such_link"):
        identify(problem_from_dict(bad, tmp_path))
    bad = problem_document([train], [])
    bad["joints"] = ["elbow"]
    with pytest.raises(Exception, match="elbow"):
        identify(problem_from_dict(bad, tmp_path))
