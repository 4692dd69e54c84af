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

import mujoco

from support.periodic_iiwa import ENVELOPES, HIDDEN, NOISE, RATE_HZ, TORQUE_NOISE_NM, play
from sysid_ros.core import tapes
from sysid_ros.core.identify import Payload, iiwa_mjcf
from sysid_ros.core.linear import (
    KEEP_FACTOR,
    ArmRegressor,
    BootstrapSettings,
    fit_arm,
    periodic_record,
    structural_base_parameters,
)
from sysid_ros.core.signals import savgol_derivatives, smooth_like_acceleration
from sysid_ros.core.sim import SimRobot
from sysid_ros.core.tapes import periods_of


def filtered(samples):
    """Today's whole-arm path: 0.05 s cubic Savitzky-Golay derivatives, the torque smoothed by the same kernel."""
    deriv = savgol_derivatives(samples.position, 1.0 / RATE_HZ, filter_window_s=0.05, polyorder=3)
    return deriv, smooth_like_acceleration(deriv, samples.effort)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("excitation")
    model = iiwa_mjcf(folder / "iiwa.xml", payload=Payload(0.5, com_m=(0.0, 0.0, 0.08)))
    optimal = tapes.optimal(ENVELOPES, RATE_HZ, model=model, seed=0, cache_dir=folder / "cache")
    multisine = tapes.multisine(ENVELOPES, RATE_HZ, seed=0)  # today's arm tape: 10 s of sines 0.2-3 Hz, 1 s of pads
    held_out = tapes.multisine(ENVELOPES, RATE_HZ, seed=5)
    arm = ArmRegressor(mujoco.MjModel.from_xml_path(str(model)))
    base = structural_base_parameters(arm)
    truth = base.values(ArmRegressor(SimRobot(str(model), physics=HIDDEN).model).true_parameters())
    plan = tapes.plan(optimal, ENVELOPES, model, torque_noise_nm=TORQUE_NOISE_NM, sample_rate_hz=RATE_HZ)
    records = {
        name: play(model, tape, seed)[0]
        for name, tape, seed in (("optimal", optimal, 1), ("multisine", multisine, 2), ("held_out", held_out, 3))
    }
    start, period, periods = periods_of(optimal)
    samples = records["optimal"]
    periodic = periodic_record(
        samples.time_ns - samples.time_ns[0],
        samples.position,
        samples.effort,
        round(start * 1e9),
        period,
        periods,
        KEEP_FACTOR * optimal.curves[0].harmonics_hz[-1],
        settle_s=1.0,
    )
    # 100 bootstrap blocks for both (50-110 ms each: longer than either record's residual correlation, the 0.05 s
    # filter's or the frequency-domain derivative's); with 20 the optimal's intervals came out 1.8x its OLS ones
    boot = BootstrapSettings(blocks=100, resamples=200)
    deriv, tau = filtered(records["multisine"])
    fits = {
        "optimal": fit_arm(arm, periodic.deriv, periodic.torque, base, bootstrap=boot),
        "multisine": fit_arm(arm, deriv, tau, base, bootstrap=boot),
    }
    return {
        "optimal": optimal,
        "plan": plan,
        "records": records,
        "fits": fits,
        "arm": arm,
        "truth": truth,
        "periodic": periodic,
    }


def test_designed_tape_narrows_the_intervals_at_equal_motion(runs):
    """Median over the 69 base parameters: measured 9.7x narrower (10-90 %: 2.3-35x; OLS standard errors 7.8x);
    the plans alone predict 2.0x (the multisine record also carries its filter's misfit: residual 0.73 N m against
    the periodic record's 0.15, the noise of two averaged periods)."""
    o, m = (runs["fits"][k].fit.half_width_95 for k in ("optimal", "multisine"))
    assert tapes.plan_seconds({"o": [runs["optimal"]]})["o"] <= 11.0  # the multisine's 11 s, pads included
    assert np.median(m / o) >= 2.0, np.percentile(m / o, [10, 50, 90])


def test_intervals_cover_the_hidden_truth(runs):
    """The designed record's estimates against the hidden base parameters: measured 95 % inside their intervals."""
    fit = runs["fits"]["optimal"].fit
    inside = np.abs(fit.values - runs["truth"]) <= fit.half_width_95
    # 69 intervals at 95 %: P(fewer than 58 cover) < 1 % for independent ones. Measured 65 of 69; with the torque
    # delayed or advanced half a sample (a zero-order hold's lag, either way) only 52 or 45: no shift is right here
    assert inside.sum() >= 58, (inside.sum(), np.flatnonzero(~inside))


def test_held_out_torque_no_worse(runs):
    """A third record (multisine seed 5) through today's path: measured per joint 1.08/1.37/0.58/0.54/0.079/0.074/
    0.053 N m (designed) against 1.08/1.38/0.59/0.54/0.080/0.071/0.053 (multisine): the held-out record's own
    filtering sets it. Against the hidden model's torque on that motion: 0.015-0.027 N m against 0.010-0.119."""
    arm = runs["arm"]
    deriv, tau = filtered(runs["records"]["held_out"])
    ok = deriv.valid.all(axis=1) & np.isfinite(tau).all(axis=1)
    rms, err = {}, {}
    for name, fit in runs["fits"].items():
        w = fit.predicted_torque(arm, deriv.q[ok], deriv.qd[ok], deriv.qdd[ok])
        rms[name] = np.sqrt(np.mean((tau[ok] - w) ** 2, axis=0))
        w_base = arm.compute(deriv.q[ok], deriv.qd[ok], deriv.qdd[ok])[..., fit.base.independent]
        err[name] = np.sqrt(np.mean((w_base @ (fit.fit.values - runs["truth"])) ** 2, axis=0))
    assert np.linalg.norm(rms["optimal"]) <= 1.01 * np.linalg.norm(rms["multisine"])
    assert np.all(rms["optimal"] <= 1.05 * rms["multisine"])
    assert np.linalg.norm(err["optimal"]) < np.linalg.norm(err["multisine"])


def test_every_sample_inside_the_envelope(runs):
    samples = runs["records"]["optimal"]
    for j, joint in enumerate(samples.joint_names):
        env = ENVELOPES[joint]
        assert np.all(np.abs(samples.position[:, j] - env.origin_rad) <= env.travel_rad), joint
        assert np.all(np.abs(samples.velocity[:, j]) <= env.max_speed_rad_s), joint
        assert np.all(np.abs(samples.effort[:, j]) <= env.max_torque_nm), joint
    assert all(min(m.values()) > 0 for m in runs["plan"].margins.values())


def test_plan_predicts_the_reported_intervals(runs):
    """Predicted over reported half-widths: measured median 0.90 (5-95 %: 0.70-1.07; 67 of 69 within 1.5x); the
    first second of the average holds one period only (the drives' settling), which the plan does not know."""
    ratio = runs["plan"].half_width_95 / runs["fits"]["optimal"].fit.half_width_95
    assert 1 / 1.5 <= np.median(ratio) <= 1.5, np.percentile(ratio, [5, 50, 95])
    assert np.mean((ratio >= 1 / 1.5) & (ratio <= 1.5)) >= 0.8, np.percentile(ratio, [5, 50, 95])
    # the noise the periods' spread measures is the simulated one
    assert runs["periodic"].torque_noise_nm == pytest.approx(TORQUE_NOISE_NM, rel=0.1)
    assert runs["periodic"].position_noise_rad == pytest.approx(NOISE.position_rad, rel=0.1)
