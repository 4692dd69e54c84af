"""Drive gains calibrated with a known mass, then a payload weighed with them (issue 32), on logs like an
industrial arm's controller writes (test/industrial_arm.py): rows 8-14 ms apart (~100 Hz), effort = current x
drive gain (1 mA steps, 20 mA of noise) written as a 12-bit number over the rated torques, smooth Coulomb friction
of 4-28 N m, garbage rows; the logger's drive gains 5 % off (+5 % and -5 % alternately), as a gain taken from a
data sheet can be. The plant runs its physics at 0.2 ms (`FINE_PHYSICS_DT_S`: at 1 ms its wrists' friction
chatters at 500 Hz, which no model of a 100 Hz log can follow).

1. `sysid-ros calibrate-gains` from an unloaded run and a run with a known 2 kg mass whose centre is 12 cm off the
   tool axis (so that it loads wrist 3 too), same motion: all six gains calibrated, each inside its 95 % interval.
   Measured (12 s runs): errors -0.29, -0.02, +0.03, -0.18, -0.38, -0.15 %, half-widths 1.25, 0.19, 0.19, 0.97,
   0.82, 1.19 %; 4 s of CPU.
2. The unknown 4.2 kg payload (its centre 4.9 cm from the flange, the model's tool body 6 cm beyond it on the axis)
   weighed as docs/real_arms.md says (the arm from the unloaded run, the payload from the loaded one,
   `body_mass_com`) with the written `effort_scale` in both problems: 4.176 kg (-0.56 %; with the true gains
   4.181 kg, -0.45 %; as logged 3.997 kg, -4.8 %).
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import yaml
from industrial_arm import (
    FINE_PHYSICS_DT_S,
    FRICTION,
    JOINTS,
    PAYLOAD_KG,
    industrial_log,
    payload_inertial_position,
    simulate,
)

from support.payload_weighing import weigh
from sysid_ros.cli import main
from sysid_ros.core.files import model_path
from sysid_ros.core.linear import calibrate_drive_gains, calibration_run
from sysid_ros.core.linear.drive_gains import COULOMB_BANDS_RAD_S
from sysid_ros.core.linear.regression import BootstrapSettings
from sysid_ros.core.online import ChangeDetected, ParameterChange, replay_bag

pytestmark = pytest.mark.slow  # five simulated runs, three calibrations and four identifications (~70 s)

GAIN_ERROR = np.array([0.05, -0.05, 0.05, -0.05, 0.05, -0.05])
TRUE_SCALE = 1.0 / (1.0 + GAIN_ERROR)  # what calibration must find: true torque / logged effort
CALIBRATION_KG = 2.0
CALIBRATION_CENTRE_M = (0.12, 0.12, 0.0)  # wrist_3_link's frame: 12 cm off the tool axis, 2 cm beyond the flange
PAYLOAD_CENTRE_M = (0.03, 0.13, -0.025)  # 4.9 cm from the flange (0, 0.1, 0); the tool body's origin (0, 0.16, 0)


def known_mass_model(centre_m) -> mujoco.MjSpec:
    """The arm with the known mass where the payload body is, its centre at `centre_m` (None: the body's origin)."""
    spec = mujoco.MjSpec.from_file(str(model_path("ur10e_like")))
    spec.body("payload").mass = CALIBRATION_KG
    if centre_m is not None:
        spec.body("payload").ipos = payload_inertial_position(spec.compile(), centre_m)
    return spec


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("drive_gains")
    logs = {
        name: industrial_log(
            folder / name,
            0,
            12.0,
            kg,
            3,
            logger_seed=seed,
            gain_error=GAIN_ERROR,
            physics_dt_s=FINE_PHYSICS_DT_S,
            payload_centre_m=centre,
            effort_bits=12,
        ).path
        for name, kg, centre, seed in (
            ("unloaded", 0.0, None, 1),
            ("calibration", CALIBRATION_KG, CALIBRATION_CENTRE_M, 2),
            ("loaded", PAYLOAD_KG, PAYLOAD_CENTRE_M, 3),
        )
    }
    (folder / "calibration.xml").write_text(known_mass_model(CALIBRATION_CENTRE_M).to_xml())
    return folder, logs


def calibrate(runs, capsys, out):
    folder, logs = runs
    argv = ["calibrate-gains", "--model", str(folder / "calibration.xml"), "--payload", "payload"]
    argv += ["--unloaded", str(logs["unloaded"]), "--loaded", str(logs["calibration"]), "--out", str(out)]
    code = main(argv)
    return code, capsys.readouterr()


def test_noise_free_runs_find_each_joint_s_friction_band_and_gain():
    """1 kHz, no noise, true gains, the mass on the tool axis: each joint's v_s is the grid's nearest to the
    plant's (20-30 mrad/s), and the gains come out within 0.2 % (wrist 3, which that mass hardly loads: within
    its interval). With one v_s for all joints (the old fit, which always took 5 mrad/s) the wrists were 4-99 %
    off. The 1 ms physics is fine here: at 1 kHz its wrist chatter is in the rows too."""
    model = known_mass_model(None).compile()
    truths = [simulate(0, 8.0, kg)[0] for kg in (0.0, CALIBRATION_KG)]
    runs = [calibration_run(s.time_ns, s.position, s.effort, s.velocity) for s in truths]
    gains = calibrate_drive_gains(model, *runs, "payload", bootstrap=BootstrapSettings(resamples=100))
    grid = np.asarray(COULOMB_BANDS_RAD_S)
    nearest = grid[np.abs(np.log(grid[:, None] / np.asarray(FRICTION.velocity_scale_rad_s))).argmin(axis=0)]
    assert np.allclose(gains.coulomb_band_rad_s, nearest), gains.coulomb_band_rad_s
    assert np.all(np.abs(gains.gain[:5] - 1.0) < 0.002), gains.gain  # measured 0.002-0.17 %
    assert abs(gains.gain[5] - 1.0) <= gains.half_width_95[5], (gains.gain[5], gains.half_width_95[5])
    assert np.all(gains.residual_rms_nm[3:] < 0.01), gains.residual_rms_nm  # measured 0.0006-0.007 N m


def test_all_six_joints_are_calibrated_within_their_intervals(runs, capsys, tmp_path):
    code, printed = calibrate(runs, capsys, tmp_path / "gains.yaml")
    assert code == 0, printed.err
    doc = yaml.safe_load((tmp_path / "gains.yaml").read_text())
    print(printed.out)
    assert sorted(doc["effort_scale"]) == sorted(JOINTS) and doc["verdict"] == "ok", doc["warnings"]
    for j, joint in enumerate(JOINTS):
        value, half = doc["effort_scale"][joint], doc["half_width_95"][joint]
        assert abs(value - TRUE_SCALE[j]) <= half, (joint, value, half, TRUE_SCALE[j])
        assert half < 0.02 * value


def test_the_calibrated_gains_weigh_the_payload_within_3_percent(runs, capsys, tmp_path):
    """docs/real_arms.md's steps 0, 1 and 2 on the logs. The tolerance, 3 %, is the issue's, and about what the
    noise allows at worst: the payload's own 95 % half-width is 0.6 % (0.026 kg); a gain error moves the mass by
    at most as much as it is on the joints that carry the payload (95 % half-widths 0.2-1.3 %); and steps 1 and 2
    have their own error (-0.45 % with the true gains, measured when the window fit was carried): 0.6 + 1.3 +
    0.45 = 2.4 %. Measured 4.202 kg (+0.05 %; the torque-space fit carried). As logged, 5 % off on every joint
    (alternately + and -, so they partly cancel), it is 4.089 kg (-2.6 %; 3.997 kg with the window fit carried):
    the calibrated mass must be at least twice as close, so the test tells calibrated gains from uncalibrated
    ones."""
    folder, logs = runs
    code, printed = calibrate(runs, capsys, tmp_path / "gains.yaml")
    assert code == 0, printed.err
    scale = yaml.safe_load((tmp_path / "gains.yaml").read_text())["effort_scale"]
    calibrated, arm = weigh(folder, logs["unloaded"], logs["loaded"], scale, "calibrated")
    as_logged, _ = weigh(folder, logs["unloaded"], logs["loaded"], None, "as_logged")
    mass, centre = calibrated.value[0], np.asarray(calibrated.value[1:4])
    print(f"payload {mass:.3f} kg calibrated, {as_logged.value[0]:.3f} kg as logged (truth {PAYLOAD_KG}); {centre}")
    assert abs(mass - PAYLOAD_KG) <= 0.03 * PAYLOAD_KG, mass
    assert abs(mass - PAYLOAD_KG) < 0.5 * abs(as_logged.value[0] - PAYLOAD_KG), (mass, as_logged.value[0])
    truth = np.asarray(PAYLOAD_CENTRE_M) - (0.0, 0.16, 0.0)  # in the tool body's frame
    assert np.all(np.abs(centre - truth) < 0.005), (centre, truth)  # measured within 3.3 mm (0.4 mm: window fit)
    # the online estimator on the same loaded log, with the same gains, on step 1's arm: no change event on this
    # constant payload, within the 3 %, and batch and online within each other's intervals (the difference
    # inside the root sum of their 95 % half-widths). Measured: online 4.219 +- 0.010 kg, batch 4.202 +- 0.026
    # (the torque-space fit, the online's regression on the whole record; the window fit, carried before the tie
    # rule of torque_fit.TAKE_BELOW, weighed 4.176 +- 0.032 and missed this by 0.009 kg)
    online = replay_bag(logs["loaded"], arm, effort_scale=scale)
    changes = [e for e in online.events if isinstance(e, (ChangeDetected, ParameterChange))]
    o_mass, o_half = online.estimate.value("mass_kg"), 1.96 * online.estimate.std[0]
    print(f"online {o_mass:.3f} +- {o_half:.3f} kg, batch {mass:.3f} +- {calibrated.half_width_95[0]:.3f} kg")
    assert not changes, changes
    assert abs(o_mass - PAYLOAD_KG) <= 0.03 * PAYLOAD_KG, (o_mass, o_half)
    assert abs(o_mass - mass) <= np.hypot(o_half, calibrated.half_width_95[0]), (o_mass, o_half, mass)


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
