"""Real loggers' time bases (issue 19): repeated rows, jittered stamps, a device clock recovered or a stated resampling.

The pendulum with hidden truth (mass 1.3 kg, damping 0.08 N m s/rad, friction loss 0.05 N m) publishes its
state every 1 ms on its own clock; a logger polls it (`synthetic.as_real_logger`): stamps 0-0.3 ms late,
3 % of the states missed plus four runs of 8 (steps 0.7-9 ms), 6 % of the rows repeating the previous state.
Identified in 0.25 s windows from the measured effort, through a rosbag2 bag and through .npz alike.
"""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from support.synthetic import EPOCH_NS, as_real_logger, multisine, record_effort, write_effort_bag
from sysid_ros.core.bags import inspect_bag, regularize, repeated_rows
from sysid_ros.core.identify import identify, problem_from_dict
from sysid_ros.core.signals import JointCommands, JointSamples
from sysid_ros.core.sim import FeedbackNoise, SimRobot

PHYSICS = {"pole.mass": 1.3, "hinge.damping": 0.08, "hinge.frictionloss": 0.05}
SECONDS = 8.0


def _device_log() -> JointSamples:
    """The robot's own 1 kHz feedback (0.5 mrad, 5 mrad/s noise), effort commanded at 500 Hz."""
    robot = SimRobot(
        "pendulum",
        physics=PHYSICS,
        noise=FeedbackNoise(position_rad=5e-4, velocity_rad_s=5e-3),
        seed=1,
        start_time_ns=EPOCH_NS,
        physics_dt_s=0.001,
        publish_rate_hz=1000.0,
    )
    t = np.arange(0, SECONDS + 1e-9, 0.002)
    u = multisine(t, [0.2, 0.7, 1.3, 2.1, 3.0], 2.5, seed=1)
    samples, _ = record_effort(robot, lambda ts: [u[int(round(ts / 0.002))]], SECONDS)
    return samples


def _bag(path, samples: JointSamples):
    return write_effort_bag(
        path, samples, JointCommands(samples.joint_names, samples.time_ns, samples.effort, "effort")
    )


def _problem(path):
    return problem_from_dict(
        {
            "model": "pendulum",
            "joints": ["hinge"],
            "training": [{"path": str(path), "control": "effort"}],
            "noise": {"position_rad": 5e-4},
            "segment_s": 0.25,
            "parameters": [
                {"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0, "start": 1.0},
                {
                    "name": "hinge_damping",
                    "kind": "joint_damping",
                    "joint": "hinge",
                    "min": 0.0,
                    "max": 1.0,
                    "start": 0.02,
                },
                {
                    "name": "hinge_frictionloss",
                    "kind": "joint_frictionloss",
                    "joint": "hinge",
                    "min": 0.0,
                    "max": 1.0,
                    "start": 0.02,
                },
            ],
        }
    )


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("logger")
    device = _device_log()
    logged = as_real_logger(device, seed=5)
    bag = _bag(d / "bag", logged)
    run = subprocess.run(
        [sys.executable, "-m", "sysid_ros.cli", "convert", str(bag), "--out", str(d / "log.npz")],
        capture_output=True,
        text=True,
        timeout=120,
    )  # the second route: bag -> .npz
    assert run.returncode == 0, run.stderr
    return {
        "device": device,
        "logged": logged,
        "clean_bag": _bag(d / "clean", device),
        "bag": bag,
        "npz": d / "log.npz",
        "dir": d,
    }


def test_the_log_looks_like_a_real_logger(logs):
    steps = np.diff(logs["logged"].time_ns) * 1e-6
    assert steps.min() < 0.8 and 8.5 < steps.max() < 12.0
    assert 0.04 < repeated_rows(logs["logged"]).mean() < 0.08


def test_device_clock_recovered_exactly(logs):
    device, logged = logs["device"], logs["logged"]
    out, fix = regularize(logged)
    assert fix.kind == "device_clock" and fix.period_ns == 1_000_000
    assert fix.repeated_rows == int(repeated_rows(logged).sum())
    assert np.all(np.diff(out.time_ns) == 1_000_000)
    # every logged state sits on its own tick: the device's samples, shifted by the first stamp's latency
    kept = ~repeated_rows(logged)
    first = int(np.searchsorted(device.time_ns, logged.time_ns[0], side="right")) - 1
    shift = int(logged.time_ns[0] - device.time_ns[first])
    placed = np.searchsorted(out.time_ns, device.time_ns + shift)
    seen = np.isin(device.position[:, 0], logged.position[kept, 0])
    ok = seen & (placed < len(out))
    np.testing.assert_array_equal(out.position[placed[ok], 0], device.position[ok, 0])
    assert fix.filled == len(out) - int(kept.sum())


def test_steady_clock_left_alone_even_when_rows_repeat(logs):
    device = logs["device"].slice(0, 500)
    still = JointSamples(
        device.joint_names,
        device.time_ns,
        np.zeros_like(device.position),
        np.zeros_like(device.velocity),
        np.zeros_like(device.effort),
    )
    for samples in (device, still):
        out, fix = regularize(samples)
        assert out is samples and fix.kind == "uniform" and fix.repeated_rows == 0


def test_times_that_do_not_increase_are_left_for_the_data_check(logs):
    device = logs["device"].slice(0, 50)
    times = device.time_ns.copy()
    times[10] = times[9]
    samples = JointSamples(device.joint_names, times, device.position, device.velocity, device.effort)
    out, fix = regularize(samples)
    assert out is samples and fix.kind == "uniform"


def test_no_clock_resampled_and_stated(logs):
    logged = as_real_logger(logs["device"], seed=6, on_device_clock=False)
    out, fix = regularize(logged)
    assert fix.kind == "resampled"
    assert len(np.unique(np.diff(out.time_ns))) == 1
    assert "cubic spline" in fix.describe("x") and fix.interpolation_error > 0


def test_inspect_states_what_it_will_do(logs):
    summary = inspect_bag(logs["bag"])
    assert summary.usable
    assert any("device clock recovered" in n and "repeated the previous state" in n for n in summary.notes)
    assert not any("device clock" in n for n in inspect_bag(logs["clean_bag"]).notes)


def test_identify_on_the_recovered_clock_matches_the_clean_log(logs):
    """Through the bag and .npz alike: no traceback, the clock note, estimates within the clean log's 95 %
    interval of the clean log's (same noise realisation; only missed and repeated rows differ)."""
    clean = identify(_problem(logs["clean_bag"]))
    for path in (logs["bag"], logs["npz"]):
        result = identify(_problem(path))
        assert any("device clock recovered" in n for n in result.notes)
        assert result.verdict == "ok", result.warnings
        for p, c in zip(result.parameters, clean.parameters):
            assert abs(p.value[0] - c.value[0]) <= c.half_width_95[0], (p.name, p.value, c.value, c.half_width_95)


def test_identify_resampled_log_warns_and_cli_has_no_traceback(logs, tmp_path):
    logged = as_real_logger(logs["device"], seed=6, on_device_clock=False)
    bag = _bag(tmp_path / "noclock", logged)
    problem = tmp_path / "problem.yaml"
    problem.write_text(f"""model: pendulum
joints: [hinge]
training: [{{path: {bag}, control: effort}}]
noise: {{position_rad: 5.0e-4}}
segment_s: 0.25
parameters:
- {{name: pole_mass, kind: body_mass, body: pole, min: 0.2, max: 5.0, start: 1.0}}
- {{name: hinge_damping, kind: joint_damping, joint: hinge, min: 0.0, max: 1.0, start: 0.02}}
""")
    run = subprocess.run(
        [sys.executable, "-m", "sysid_ros.cli", "identify", str(problem), "--out", str(tmp_path / "out"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    assert re.search(
        r"no device clock in the data: resampled onto a uniform [0-9.]+ ms grid \(positions by a "
        r"cubic spline",
        run.stdout + run.stderr,
    )
    assert "verdict: suspect" in run.stdout + run.stderr
