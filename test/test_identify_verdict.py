"""Confident wrong answers: every damaged input of issue 12 section 1 gives `verdict: suspect` with the
warning that names what tripped it; clean data stays `ok`.

Hidden pendulum (mass 1.3 kg, damping 0.08 N m s/rad, friction loss 0.05 N m, 0.5 mrad angle noise, 6 s of
five sines at 500 Hz) and the 3-link arm (masses 2.2/1.1/0.6 kg, dampings 0.6/0.25/0.12, 0.2 mrad,
0.25 s windows from measured states). Damage: commands stamped 20 ms and 300 ms early, sign-flipped,
x1000; joint states stamped twice with different values (a real rosbag2 bag); a wrong model structure
(the model lacks the friction loss the pendulum has; the arm's payload is 0.3 kg, the model says 0.1 kg).
`bench/bench_verdict.py` runs the same cases over 20 seeds (false-alarm and detection rates)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from support.arm3 import PHYSICS as ARM3
from support.pendulum import TRUTH as PENDULUM_TRUTH
from support.synthetic import EFFORT_TOPIC as TOPIC
from support.synthetic import write_effort_bag
from support.verdict_cases import _has, arm3_case, damaged, pendulum_case, pendulum_problem, pendulum_record
from sysid_ros.cli import main
from sysid_ros.core.bags import save_npz
from sysid_ros.core.identify import identify

pytestmark = pytest.mark.slow  # eight pendulum and two arm identifications: about 1 min on a quiet machine


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("verdict")


@pytest.fixture(scope="module")
def clean(folder):
    return pendulum_case(folder, "clean")


def test_clean_pendulum_is_ok_with_white_noise_intervals(clean):
    assert clean.verdict == "ok" and clean.warnings == (), clean.warnings
    assert 0.9 < clean.metrics["training_residual_ratio"]["hinge_qpos"] < 1.1
    assert clean.metrics["command_offset_ms"] == 0.0
    assert "residual_widening" not in clean.metrics  # a clean fit keeps the library's intervals
    for p in clean.parameters:
        assert abs(p.value[0] - PENDULUM_TRUTH[p.name]) < 3 * p.half_width_95[0], p


def test_commands_20_ms_early_are_suspect_with_the_offset_and_wider_intervals(folder):
    result = pendulum_case(folder, "early20")
    assert result.verdict == "suspect"
    # the residual is tens of times the 0.5 mrad noise (issue: 12 mrad), and the scan finds the offset
    assert _has(result, "hinge position", "training residual RMS", "declared noise"), result.warnings
    assert result.metrics["training_residual_ratio"]["hinge_qpos"] > 10
    assert _has(result, "time offset"), result.warnings
    assert 14 <= result.metrics["command_offset_ms"] <= 26, result.metrics["command_offset_ms"]
    # intervals widened from the white-noise width (several times), and now honest about the bias
    widening = result.metrics["residual_widening"]
    assert all(w[0] > 3 for w in widening.values()), widening
    for p in result.parameters:
        assert abs(p.value[0] - PENDULUM_TRUTH[p.name]) <= p.half_width_95[0], p


def test_commands_300_ms_early_are_suspect(folder):
    result = pendulum_case(folder, "early300")
    assert result.verdict == "suspect"
    assert _has(result, "hinge position", "training residual RMS"), result.warnings
    assert _has(result, "rests on its"), result.warnings  # mass or damping pushed onto a bound
    # an offset this large wrecks the fit (RMS ~2 rad); the scan's linear refit around such a fit still
    # finds that shifting helps, but its estimate is not the 300 ms (see docs: Limits)
    assert _has(result, "time offset"), result.warnings


def test_sign_flipped_commands_are_suspect(folder):
    result = pendulum_case(folder, "flip")
    assert result.verdict == "suspect"
    assert result.metrics["training_residual_ratio"]["hinge_qpos"] > 100
    assert _has(result, "hinge position", "training residual RMS"), result.warnings
    assert _has(result, "rests on its min bound"), result.warnings


def test_commands_x1000_are_suspect_and_the_warm_start_disagrees(folder):
    result = pendulum_case(folder, "x1000")
    assert result.verdict == "suspect"
    assert _has(result, "hinge position", "training residual RMS"), result.warnings
    assert _has(result, "pole_mass", "regression warm start", "differ"), result.warnings


def test_a_missing_friction_term_is_suspect(folder):
    """Model structure wrong: the model has no friction loss (frozen at 0), the pendulum has 0.05 N m."""
    samples, commands = pendulum_record(1)
    path = save_npz(folder / "nofriction.npz", samples, {TOPIC: commands})
    problem = pendulum_problem(path)
    parameters = problem.parameters[:2] + (replace(problem.parameters[2], start=(0.0,), frozen=True),)
    problem = replace(problem, parameters=parameters)
    result = identify(problem)
    assert result.verdict == "suspect"
    assert _has(result, "hinge position", "training residual RMS"), result.warnings
    assert "residual_widening" in result.metrics


def test_conflicting_duplicate_stamps_are_suspect(folder):
    samples, commands = pendulum_record(1)
    bag = write_effort_bag(folder / "duplicates_bag", samples, commands, TOPIC, conflicting_every=25)
    result = identify(pendulum_problem(bag))
    assert result.verdict == "suspect"
    count = len(samples) // 25
    assert _has(result, "duplicates_bag", f"{count} joint state values stamped twice"), result.warnings


def test_clean_arm3_is_ok(folder):
    result = arm3_case(folder, "clean", ARM3)
    assert result.verdict == "ok", result.warnings
    # the windows' start-state noise is part of the expected residual: the ratios sit near 1
    assert all(0.7 < r < 1.3 for r in result.metrics["training_residual_ratio"].values())


def test_arm3_with_a_wrong_payload_is_suspect(folder):
    """Model structure wrong: the frozen payload is 0.1 kg in the model, 0.3 kg on the robot."""
    result = arm3_case(folder, "payload", {**ARM3, "payload.mass": 0.3})
    assert result.verdict == "suspect"
    assert _has(result, "training residual RMS"), result.warnings
    assert "residual_widening" in result.metrics


def test_strict_cli_exits_1_on_suspect_and_writes_verdict_first(folder, tmp_path, capsys):
    samples, commands = pendulum_record(1)
    data = save_npz(folder / "cli_flip.npz", samples, {TOPIC: damaged(commands, "flip")})
    problem = tmp_path / "problem.yaml"
    doc = {
        "model": "pendulum",
        "joints": ["hinge"],
        "training": [str(data)],
        "noise": {"position_rad": 5e-4},
        "parameters": [
            {"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0},
            {"name": "hinge_damping", "kind": "joint_damping", "joint": "hinge", "min": 0.0, "max": 1.0},
        ],
        "optimizer": {"max_iters": 5},
    }  # the verdict needs no converged fit of a hopeless problem
    problem.write_text(yaml.safe_dump(doc))
    assert main(["identify", str(problem), "--out", str(tmp_path / "lenient"), "--quiet"]) == 0
    assert main(["identify", str(problem), "--out", str(tmp_path / "strict"), "--quiet", "--strict"]) == 1
    err = capsys.readouterr().err
    assert "verdict: suspect" in err and "warning: hinge position: training residual RMS" in err
    written = yaml.safe_load((tmp_path / "strict" / "identified.yaml").read_text())  # still written
    assert list(written)[:2] == ["verdict", "warnings"] and written["verdict"] == "suspect"
    assert any("training residual RMS" in w for w in written["warnings"])
    page = (tmp_path / "strict" / "report.html").read_text()
    assert page.index("verdict: suspect") < page.index("pole_mass") and "training residual RMS" in page
