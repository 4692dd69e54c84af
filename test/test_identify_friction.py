"""Friction real joints show and torque-space validation (issue 19), on a 7-joint arm logged like a real logger.

The truth: pybullet's KUKA iiwa written with `fullinertia` tensors, a 0.8 kg flange payload (the model says
0.5), hidden viscous damping, a smooth Coulomb friction c tanh(v / v_s) per joint (v_s 40-80 mrad/s, which
MuJoCo's friction loss cannot represent) and a joint-torque sensor that reads an offset (-1.5 to +0.9 N m).
It tracks multisine setpoints with its PID drives, state and torque published every 2 ms on its own clock;
a polling logger writes the rosbag2 bags (`synthetic.as_real_logger`: jittered stamps, repeated rows, missed
states and gaps). `sysid-ros identify` (the simulation path: damping, friction loss, `joint_effort_offset`
and the payload mass, 0.25 s windows) must run without a traceback, recover the clock, and predict the
held-out joint torque within 1.5x of the true model on every joint, as must the regression with friction.
"""

from __future__ import annotations

import subprocess
import sys

import mujoco
import numpy as np
import pytest
import yaml

pytest.importorskip("pybullet_data")

from support.synthetic import IIWA_FRICTION, iiwa_friction_problem, iiwa_logged_bag, true_torque_rms
from sysid_ros.core.bags import repeated_rows
from sysid_ros.core.errors import ConfigError
from sysid_ros.core.identify import IIWA_JOINTS, Payload, iiwa_mjcf
from sysid_ros.core.linear import (
    JOINT_TERMS,
    ArmRegressor,
    BootstrapSettings,
    fit_arm_friction,
)
from sysid_ros.core.signals import Derivatives
from sysid_ros.core.sim import (
    SimRobot,
    SmoothFriction,
    effort_offsets,
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One `sysid-ros identify` on the logged bags (4 s training, 3 s validation), as a user runs it."""
    d = tmp_path_factory.mktemp("friction")
    model_path = iiwa_mjcf(d / "iiwa_full.xml", payload=Payload(0.5), full_inertia=True)
    train, train_log, robot = iiwa_logged_bag(model_path, d / "train", 1, 4.0, 3)
    val, _, _ = iiwa_logged_bag(model_path, d / "val", 2, 3.0, 4)
    assert np.all(np.abs(train_log.effort) < 0.98 * robot.torque_limits_nm)  # never saturated
    problem = d / "problem.yaml"
    problem.write_text(yaml.safe_dump(iiwa_friction_problem(model_path, train, val)))
    proc = subprocess.run(
        [sys.executable, "-m", "sysid_ros.cli", "identify", str(problem), "--out", str(d / "out"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return {
        "proc": proc,
        "dir": d,
        "model": model_path,
        "val": val,
        "train_log": train_log,
        "robot": robot,
        "doc": yaml.safe_load((d / "out" / "identified.yaml").read_text()) if proc.returncode == 0 else None,
    }


def test_the_log_looks_like_a_real_logger(run):
    steps = np.diff(run["train_log"].time_ns) * 1e-6
    assert steps.min() < 0.8 and steps.max() > 8.5
    assert 0.03 < repeated_rows(run["train_log"]).mean() < 0.08


def test_identify_runs_without_a_traceback_and_recovers_the_clock(run):
    proc = run["proc"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    notes = run["doc"]["notes"]
    assert sum("device clock recovered" in n for n in notes) == 2, notes  # training and validation bags
    assert "held-out joint torque RMS, N m (validation data):" in proc.stdout
    report = (run["dir"] / "out" / "report.html").read_text()
    assert "Held-out joint torque" in report and "regression_friction" in report


def test_held_out_torque_within_1_5x_of_the_true_model_on_every_joint(run):
    """Measured: identified (simulation path) 1.00-1.23x the true model's RMS, the regression with friction
    0.98-1.04x, the model file 2.8-25x. The true model is not at the noise floor (1.6 N m on joint 1): its
    error is the filtered record's (Savitzky-Golay 50 ms derivatives of sample-and-hold PID torques), which
    every model shares; 1.5x leaves room for the friction MuJoCo cannot represent, and the nominal model
    (wrong payload, no friction, no offset) fails it on every joint."""
    check = run["doc"]["metrics"]["held_out_torque_rms_nm"]
    assert check["held_out"] == "validation data"
    truth = true_torque_rms(run["model"], run["robot"], run["val"])
    for joint, rms in truth.items():
        for label in ("identified", "regression_friction"):
            assert check[label][joint] <= 1.5 * rms, (label, joint, check[label][joint], rms)
        assert check["nominal"][joint] > 1.5 * rms, (joint, check["nominal"][joint], rms)


def test_friction_reported_per_joint_with_intervals_and_its_mujoco_form(run):
    friction = run["doc"]["friction"]
    assert list(friction) == list(IIWA_JOINTS)
    covered = 0
    for k, joint in enumerate(IIWA_JOINTS):
        entry = friction[joint]
        assert 0.002 <= entry["velocity_scale_rad_s"] <= 1.0
        assert "not_representable" in entry["mujoco"]
        coulomb, offset = entry["coulomb"], entry["offset"]
        assert abs(coulomb["value"] - IIWA_FRICTION.coulomb_nm[k]) < 0.2 * IIWA_FRICTION.coulomb_nm[k], (joint, coulomb)
        covered += abs(offset["value"] - IIWA_FRICTION.effort_offset_nm[k]) <= offset["half_width_95"]
    assert covered >= 6  # measured 7 of 7; at 95 % each, P(<= 5 of 7) = 4 %
    assert any("not representable in MuJoCo" in n for n in run["doc"]["notes"])


def test_identified_mjcf_loads_back_with_the_offsets_as_motor_bias(run):
    doc = run["doc"]
    text = (run["dir"] / "out" / "identified.xml").read_text()
    model = mujoco.MjModel.from_xml_string(text)
    values = {p: v["value"] for p, v in doc["parameters"].items()}  # the MJCF's, whichever fit it carries
    assert model.body("payload").mass[0] == pytest.approx(values["payload_mass"], rel=1e-12)
    np.testing.assert_allclose(effort_offsets(model), [values[f"j{k + 1}_offset"] for k in range(7)], rtol=1e-12)
    assert values["j2_offset"] < -0.5 < 0.5 < values["j4_offset"]


def test_velocity_scale_search_recovers_a_noise_free_friction(tmp_path):
    """Torques made by the regressor itself with per-joint v_s (no noise, exact derivatives): the 1-D
    searches find each v_s to 2 % and the offsets and Coulomb levels to 1e-6."""
    model = mujoco.MjModel.from_xml_path(str(iiwa_mjcf(tmp_path / "iiwa.xml", payload=Payload(0.5))))
    scales = np.array([0.03, 0.05, 0.08, 0.12, 0.2, 0.06, 0.1])
    arm = ArmRegressor(model, JOINT_TERMS, coulomb_band_rad_s=scales)
    theta = arm.true_parameters()
    for k, joint in enumerate(arm.joint_names):
        theta[arm.names.index(f"{joint}.coulomb")] = 0.5 + 0.1 * k
        theta[arm.names.index(f"{joint}.offset")] = 0.3 - 0.1 * k
    rng = np.random.default_rng(0)
    t = np.arange(1500) * 0.004
    phases = rng.uniform(0, 2 * np.pi, (3, 7))
    freqs = np.array([0.3, 0.7, 1.3])
    q = 0.5 * sum(np.sin(2 * np.pi * f * t[:, None] + p) for f, p in zip(freqs, phases))
    qd = 0.5 * sum(2 * np.pi * f * np.cos(2 * np.pi * f * t[:, None] + p) for f, p in zip(freqs, phases))
    qdd = -0.5 * sum((2 * np.pi * f) ** 2 * np.sin(2 * np.pi * f * t[:, None] + p) for f, p in zip(freqs, phases))
    tau = arm.compute(q, qd, qdd) @ theta
    exact = Derivatives(q, qd, qdd, np.ones(q.shape, dtype=bool), 0.004, "exact", 1, 0, 0.0, 0.0, 0.0)
    fit = fit_arm_friction(model, exact, tau, bootstrap=BootstrapSettings(resamples=20))
    found = np.array([j.velocity_scale_rad_s for j in fit.joints])
    np.testing.assert_allclose(found, scales, rtol=0.02)
    for k, j in enumerate(fit.joints):
        assert j.value("coulomb") == pytest.approx(0.5 + 0.1 * k, abs=1e-3)
        assert j.value("offset") == pytest.approx(0.3 - 0.1 * k, abs=1e-3)


def test_smooth_friction_and_sensor_offset_in_the_sim(tmp_path):
    """The truth's extra physics: the sensor reports the drive's torque plus its offset, and the smooth
    friction opposes motion (a joint spun up and left alone slows down faster than without it)."""
    model = iiwa_mjcf(tmp_path / "iiwa.xml", payload=Payload(0.5))
    friction = SmoothFriction((0.0,) * 6 + (0.3,), (0.05,) * 7, effort_offset_nm=(0.0,) * 6 + (0.25,))
    speeds = {}
    for label, f in (("plain", None), ("friction", friction)):
        robot = SimRobot(str(model), friction=f)
        robot.command("effort", np.zeros(7))
        robot.data.qvel[6] = 2.0
        samples = robot.advance(robot.time_ns + 200_000_000)
        speeds[label] = samples[-1].velocity[6]
        assert samples[-1].effort[6] == (0.25 if f else 0.0)
    assert 0 < speeds["friction"] < speeds["plain"] - 0.1, speeds
    with pytest.raises(ConfigError):
        SmoothFriction((0.3,), (0.05, 0.05))
    with pytest.raises(ConfigError):
        SimRobot(str(model), friction=SmoothFriction((0.3,), (0.05,)))


def test_torque_rows_take_efforts_as_joint_torques_whatever_the_gear():
    """Efforts and effort commands are joint torques (the drive divides them by gear x gain): a geared motor
    must not scale the measured torque again."""
    from sysid_ros.core.identify import torque_rows
    from sysid_ros.core.identify.rollout import sequences as sd
    from sysid_ros.core.signals import JointSamples

    xml = (
        '<mujoco><worldbody><body><joint name="j" axis="0 1 0"/><geom size="0.1" mass="1"/></body></worldbody>'
        '<actuator><motor name="m" joint="j" gear="50"/></actuator></mujoco>'
    )
    model = mujoco.MjModel.from_xml_string(xml)
    t = np.arange(400) * 2_000_000
    effort = 3.0 + 0.0 * t[:, None]
    samples = JointSamples(("j",), t, position=np.sin(t[:, None] * 1e-9), effort=effort)
    deriv, tau, ok = torque_rows(model, [sd.JointMap("j", "j", "m")], samples, None)
    np.testing.assert_allclose(tau[ok], 3.0, rtol=1e-12)
