"""The optimal tape on a simulated 7-joint arm (pybullet's KUKA iiwa as MJCF, hidden damping and payload, feedback
noise): at equal seconds of motion its base-parameter intervals against today's multisine arm tape, held-out
torque, every sample inside the envelope, and the plan's predicted intervals against the regression's.

Both tapes are played by SimRobot's PID drives with the same envelope; the multisine record goes through today's
whole-arm path (0.05 s Savitzky-Golay derivatives, torque smoothed by the same kernel: `torque_rows`), the optimal
record through `linear.periodic` (two periods averaged, derivatives in the frequency domain). Skipped without
pybullet (the iiwa's URDF comes from pybullet_data).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pybullet_data")
pytestmark = pytest.mark.slow  # the design (~8 s of CPU), three 10-11 s simulated recordings and three fits

from sysid_ros.core import tapes  # noqa: E402
from sysid_ros.core.identify.problem.arm_models import IIWA_JOINTS, Payload, iiwa_mjcf  # noqa: E402
from sysid_ros.core.linear import periodic_record  # noqa: E402
from sysid_ros.core.linear.arm_regressor import ArmRegressor, fit_arm  # noqa: E402
from sysid_ros.core.linear.periodic import KEEP_FACTOR  # noqa: E402
from sysid_ros.core.linear.regression import BootstrapSettings  # noqa: E402
from sysid_ros.core.signals.derivatives import savgol_derivatives, smooth_like_acceleration  # noqa: E402
from sysid_ros.core.sim.robot import FeedbackNoise, SimRobot  # noqa: E402
from support.synthetic import IIWA_GAINS, IIWA_POSE_RAD, record_position  # noqa: E402

RATE_HZ = 500.0
TORQUE_NOISE_NM = 0.2
NOISE = FeedbackNoise(position_rad=2e-4, velocity_rad_s=2e-3, effort_nm=TORQUE_NOISE_NM)
HIDDEN = {"payload.mass": 0.8, **{f"{j}.damping": d for j, d in zip(IIWA_JOINTS, (0.9, 0.7, 0.6, 0.5, 0.35, 0.25,
                                                                                 0.15))}}
TRAVEL = (0.8, 0.5, 0.8, 0.6, 1.0, 0.8, 1.2)
SPEED = (1.5, 1.5, 1.8, 1.8, 2.5, 2.5, 3.0)
TORQUE = (320.0, 320.0, 176.0, 176.0, 110.0, 40.0, 40.0)  # the iiwa's data sheet
ENVELOPES = {j: tapes.Envelope(float(o), t, s, q) for j, o, t, s, q in zip(IIWA_JOINTS, IIWA_POSE_RAD, TRAVEL, SPEED,
                                                                          TORQUE)}


def play(model, tape: tapes.Tape, seed: int):
    """The tape tracked by the PID drives of the arm with hidden physics, from holding its start (settled 2 s
    first, as a robot holds its pose before a tape: a drive placed there at rest sags under gravity first)."""
    start = tapes.sample(tape, [0.0]).position[0]
    robot = SimRobot(str(model), physics=HIDDEN, noise=NOISE, seed=seed, initial_positions=list(start),
                     command_rate_hz=RATE_HZ, publish_rate_hz=RATE_HZ)
    record_position(robot, lambda t: start, 2.0, IIWA_GAINS)
    return record_position(robot, lambda t: tapes.sample(tape, [t]).position[0], tapes.duration_s(tape), IIWA_GAINS)


def filtered(samples):
    """Today's whole-arm path: 0.05 s cubic Savitzky-Golay derivatives, the torque smoothed by the same kernel."""
    deriv = savgol_derivatives(samples.position, 1.0 / RATE_HZ, filter_window_s=0.05, polyorder=3)
    return deriv, smooth_like_acceleration(deriv, samples.effort)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("excitation")
    model = iiwa_mjcf(folder / "iiwa.xml", payload=Payload(0.5, com_m=(0.0, 0.0, 0.08)))
    optimal = tapes.optimal(ENVELOPES, RATE_HZ, model=model, seed=0, cache_dir=folder / "cache")
    multisine = tapes.multisine(ENVELOPES, RATE_HZ, seed=0)
    held_out = tapes.multisine(ENVELOPES, RATE_HZ, seed=5)
    arm = ArmRegressor(__import__("mujoco").MjModel.from_xml_path(str(model)))
    plan = tapes.plan(optimal, ENVELOPES, model, torque_noise_nm=TORQUE_NOISE_NM, sample_rate_hz=RATE_HZ)
    boot = BootstrapSettings(resamples=200)
    rec = {name: play(model, tape, seed) for name, tape, seed in
           (("optimal", optimal, 1), ("multisine", multisine, 2), ("held_out", held_out, 3))}
    start, period, periods = tapes.plan.__module__ and __import__(
        "sysid_ros.core.tapes.plan", fromlist=["periods_of"]).periods_of(optimal)
    samples = rec["optimal"]
    top_hz = optimal.curves[0].harmonics_hz[-1]
    record = periodic_record(samples.time_ns - samples.time_ns[0], samples.position, samples.effort,
                             int(round(start * 1e9)), period, periods, KEEP_FACTOR * top_hz, 1.0 / RATE_HZ)
    fits = {"optimal": fit_arm(arm, record.deriv, record.torque, plan_base(arm), bootstrap=boot)}
    deriv, tau = filtered(rec["multisine"])
    fits["multisine"] = fit_arm(arm, deriv, tau, plan_base(arm), bootstrap=boot)
    return dict(model=model, optimal=optimal, multisine=multisine, plan=plan, records=rec, fits=fits, arm=arm,
                periodic=record)


def plan_base(arm):
    from sysid_ros.core.linear.arm_regressor import structural_base_parameters
    return structural_base_parameters(arm)


def test_numbers(runs):
    fits, plan = runs["fits"], runs["plan"]
    o, m = fits["optimal"].fit.half_width_95, fits["multisine"].fit.half_width_95
    print("median ratio", np.median(m / o), "quantiles", np.percentile(m / o, [10, 25, 50, 75, 90]))
    r = plan.half_width_95 / o
    print("plan/regression", np.percentile(r, [5, 10, 25, 50, 75, 90, 95]))
    print("noise", runs["periodic"].torque_noise_nm, runs["periodic"].position_noise_rad)
    print("\n".join(plan.summary()))
    arm = runs["arm"]
    deriv, tau = filtered(runs["records"]["held_out"])
    ok = deriv.valid.all(axis=1) & np.isfinite(tau).all(axis=1)
    for name, fit in fits.items():
        pred = fit.predicted_torque(arm, deriv.q[ok], deriv.qd[ok], deriv.qdd[ok])
        print(name, "held-out rms", np.sqrt(np.mean((tau[ok] - pred) ** 2, axis=0)))
    print("cond", fits["optimal"].fit.condition_number, fits["multisine"].fit.condition_number)
    f = fits["optimal"].fit
    print("resid", f.residual_rms, fits["multisine"].fit.residual_rms, "rows", f.rows_used, plan.rows)
    print("ols/plan", np.percentile(1.96 * f.std_error_ols / plan.half_width_95, [10, 50, 90]))
    rec = runs["periodic"]
    arm = runs["arm"]
    fit = fits["optimal"]
    res = rec.torque - fit.predicted_torque(arm, rec.deriv.q, rec.deriv.qd, rec.deriv.qdd)
    print("resid per joint", np.sqrt(np.mean(res**2, axis=0)))
    spec = np.abs(np.fft.rfft(res, axis=0))
    print("resid spectrum low bins", np.sqrt(np.mean(spec[:60]**2, axis=0)) , np.sqrt(np.mean(spec[60:]**2, axis=0)))
