"""Do the 95 % intervals cover the truth? Many noise realizations and multisine draws of the hidden pendulum.

Hidden truth: mass 1.3 kg, damping 0.08 N m s/rad, friction loss 0.05 N m. Each seed draws new multisine
phases (five sines 0.2-3 Hz, peak 2.5 N m, 10 s at 500 Hz) and new 0.5 mrad angle noise. Two estimators:
the regression (`fit_pendulum`, quartic 0.2 s derivatives, block bootstrap) and the mujoco.sysid pipeline
(`identify`, estimated start state, the library's intervals). `bench/bench_coverage.py` runs 40 seeds.

Measured (40 seeds, bench): the pipeline covers 98 % of each parameter with half-widths 1.07-1.11x the
actual spread; the regression covers damping (98 %) and friction loss (95 %) but never the mass: the 0.2 s
derivative filter biases it by +0.56 % (also on noise-free data) while its bootstrap half-width is 0.31 %,
and no warning is raised. Subtracting a simulate-and-refit bias estimate restores 100 % coverage.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from sysid_ros.core.bags.arrays_io import save_npz
from sysid_ros.core.derivatives import savgol_derivatives
from sysid_ros.core.identify import identify, problem_from_dict
from sysid_ros.core.identify.synthetic import multisine, record_effort
from sysid_ros.core.joint_model import fit_pendulum
from sysid_ros.core.sim import FeedbackNoise, SimRobot

PHYSICS = {"pole.mass": 1.3, "hinge.damping": 0.08, "hinge.frictionloss": 0.05}
NAMES = ("mass", "damping", "friction")
TRUTH = np.array([1.3, 0.08, 0.05])
NOISE_RAD = 5e-4
DT_S = 0.002
FREQS_HZ = (0.2, 0.7, 1.3, 2.1, 3.0)
LENGTH_M, ROTOR_KG_M2 = 0.5, 1e-4  # config/models/pendulum.xml: point mass 0.5 m below the hinge, armature 1e-4
TOPIC = "/effort_controller/commands"

pytestmark = pytest.mark.slow  # 18 pipeline and ~30 regression fits: about 25 s of CPU


@lru_cache(maxsize=64)
def record(seed: int, seconds: float = 10.0):
    """One draw: multisine phases from `seed`, feedback noise from `seed`; returns (samples, commands)."""
    robot = SimRobot("pendulum", physics=PHYSICS, noise=FeedbackNoise(position_rad=NOISE_RAD), seed=seed)
    t = np.arange(0, seconds + 1e-9, DT_S)
    u = multisine(t, FREQS_HZ, 2.5, seed=1000 + seed)
    return record_effort(robot, lambda ts: [u[int(round(ts / DT_S))]], seconds)


def regression_interval(seed: int, window_s: float = 0.2, polyorder: int = 4
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, 95 % half-widths, flagged: a whole-fit or this parameter's warning) of the regression on one draw."""
    samples, commands = record(seed)
    tau = commands.held_at(samples.time_ns)[:, 0]
    fit = fit_pendulum(savgol_derivatives(samples.position[:, 0], DT_S, window_s, polyorder), tau,
                       length_m=LENGTH_M, rotor_inertia_kg_m2=ROTOR_KG_M2).fit
    flagged = np.array([bool(fit.warnings) or name in fit.parameter_warnings for name in fit.names])
    return fit.values.copy(), fit.half_width_95.copy(), flagged


def regression_bias_corrected(seed: int, window_s: float = 0.2, polyorder: int = 4
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(corrected values, half-widths, estimated bias): the regression with a simulate-and-refit bias estimate.

    The fitted pendulum is simulated noise-free under the recorded torque and fitted again the same way; the
    shift of that refit from the fitted values is the estimator's own bias (filter, friction model), which
    is subtracted. The block-bootstrap half-widths are kept.
    """
    samples, commands = record(seed)
    tau = commands.held_at(samples.time_ns)[:, 0]

    def fit(q: np.ndarray) -> np.ndarray:
        return fit_pendulum(savgol_derivatives(q, DT_S, window_s, polyorder), tau, length_m=LENGTH_M,
                            rotor_inertia_kg_m2=ROTOR_KG_M2).fit

    first = fit(samples.position[:, 0])
    values = first.values
    robot = SimRobot("pendulum", physics=dict(zip(PHYSICS, map(float, values))))
    simulated, _ = record_effort(robot, lambda ts: [tau[int(round(ts / DT_S))]], (len(tau) - 1) * DT_S)
    bias = fit(simulated.position[:, 0]).values - values
    return values - bias, first.half_width_95.copy(), bias


def pipeline_interval(seed: int, folder: Path, initial_state: str = "estimate"
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, 95 % half-widths, identifiable) of `identify` on one draw."""
    samples, commands = record(seed)
    path = save_npz(Path(folder) / f"seed{seed}.npz", samples, {TOPIC: commands})
    doc = {"model": "pendulum", "joints": ["hinge"], "training": [str(path)], "noise": {"position_rad": NOISE_RAD},
           "initial_state": initial_state, "parameters": [
               {"name": "mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0, "start": 1.0},
               {"name": "damping", "kind": "joint_damping", "joint": "hinge", "min": 0.0, "max": 1.0, "start": 0.02},
               {"name": "friction", "kind": "joint_frictionloss", "joint": "hinge", "min": 0.0, "max": 1.0,
                "start": 0.02}]}
    result = identify(problem_from_dict(doc))
    by_name = {p.name: p for p in result.parameters}
    return (np.array([by_name[n].value[0] for n in NAMES]), np.array([by_name[n].half_width_95[0] for n in NAMES]),
            np.array([by_name[n].identifiable for n in NAMES]))


def covered(values: np.ndarray, half: np.ndarray) -> np.ndarray:
    return np.abs(np.asarray(values) - TRUTH) <= np.asarray(half)


REGRESSION_SEEDS = range(20)
# ~1-2 s each on 2 shared cores; seed 3 is left out for run time only (249 parameter points, 13 s; its
# intervals cover the truth, see the bench)
PIPELINE_SEEDS = (0, 1, 2, 4, 5, 6, 7, 8)


@pytest.fixture(scope="module")
def regression():
    out = [regression_interval(s) for s in REGRESSION_SEEDS]
    return np.array([v for v, _, _ in out]), np.array([h for _, h, _ in out]), np.array([f for _, _, f in out])


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    folder = tmp_path_factory.mktemp("coverage")
    out = [pipeline_interval(s, folder) for s in PIPELINE_SEEDS]
    return np.array([v for v, _, _ in out]), np.array([h for _, h, _ in out]), np.array([i for _, _, i in out])


def test_pipeline_intervals_cover_the_truth(pipeline):
    values, half, identifiable = pipeline
    hits = covered(values, half)
    # 24 intervals at a true 95 % coverage: P(<= 19 hits) = 0.6 %, so 80 % fails only if coverage is really
    # lower. Measured: 23 of 24 (the bench's 40 seeds: 98 % for each parameter).
    assert hits.mean() >= 0.8, hits
    assert hits.mean(axis=0).min() >= 0.75, hits  # no parameter far below (<= 5 of 8: P = 0.6 % at 95 %)
    # not covered by being wide: half-widths are < 0.5 % of the truth, as the spread of the errors
    # (measured 0.015 / 0.05 / 0.2 % mean half-width for mass / damping / friction loss)
    assert np.all(half < 5e-3 * TRUTH) and identifiable.all()
    spread = (values - TRUTH).std(axis=0, ddof=1)
    ratio = half.mean(axis=0) / (1.96 * spread)
    assert np.all((ratio > 0.5) & (ratio < 2.5)), ratio  # measured 0.99-1.03 over 12 seeds


def test_regression_damping_and_friction_intervals_cover(regression):
    values, half, _ = regression
    hits = covered(values, half)[:, 1:]
    # 40 intervals at 95 %: P(<= 31 hits) < 0.1 %. Measured: all covered, half-widths 1.4-1.8x the spread
    # (the block bootstrap is conservative for these two).
    assert hits.mean() >= 0.8, hits


@pytest.mark.xfail(strict=True, reason="the regression's mass interval misses a +0.6 % derivative-filter bias "
                   "and raises no warning (see docs/identification_arm.md)")
def test_regression_mass_interval_covers_or_is_flagged(regression):
    values, half, flagged = regression
    hits = covered(values, half)[:, 0]
    # Either honest intervals (>= 80 % of 20: P(<= 15 hits) = 0.3 % at 95 %) or a warning on the misses.
    assert hits.mean() >= 0.8 or flagged[~hits, 0].all(), (hits, (values[:, 0] / TRUTH[0] - 1) * 100, half[:, 0])


def test_regression_with_simulate_and_refit_bias_correction_covers():
    """The fix the xfail above asks for, measured: subtracting the estimator's own bias (refit on a noise-free
    simulation of the fitted model) brings the mass into its bootstrap interval."""
    out = [regression_bias_corrected(s) for s in PIPELINE_SEEDS[:6]]
    values, half = np.array([v for v, _, _ in out]), np.array([h for _, h, _ in out])
    hits = covered(values, half)
    # 18 intervals at 95 %: P(<= 14 hits) = 1 %. Measured 8 of 8 seeds x 3 covered; estimated mass bias
    # +0.5 to +0.6 % (the uncorrected misses), corrected mass within 0.17 %.
    assert hits.mean() >= 0.8 and hits[:, 0].mean() >= 4 / 6, hits  # mass: <= 3 of 6, P = 0.2 % at 95 %
    bias = np.array([b for _, _, b in out])[:, 0] / TRUTH[0]
    assert np.all((bias > 2e-3) & (bias < 1e-2)), bias


def test_regression_mass_bias_is_the_filter_not_the_noise():
    """The mass miss on noise-free data too: a bias of the 0.2 s quartic filter, which a 0.1 s one shrinks."""
    clean = SimRobot("pendulum", physics=PHYSICS, seed=0)
    u = multisine(np.arange(0, 10.0 + 1e-9, DT_S), FREQS_HZ, 2.5, seed=1000)  # record(0)'s torque, no noise
    s, commands = record_effort(clean, lambda ts: [u[int(round(ts / DT_S))]], 10.0)
    tau = commands.held_at(s.time_ns)[:, 0]
    rel = {}
    for window_s in (0.2, 0.1):
        fit = fit_pendulum(savgol_derivatives(s.position[:, 0], DT_S, window_s, 4), tau, length_m=LENGTH_M,
                           rotor_inertia_kg_m2=ROTOR_KG_M2).fit
        rel[window_s] = fit.value("mass_kg") / TRUTH[0] - 1
    # measured +0.50 % (0.2 s) and +0.05 % (0.1 s): no noise, so only the filter can move it
    assert rel[0.2] > 2e-3 and abs(rel[0.1]) < 0.4 * rel[0.2], rel
