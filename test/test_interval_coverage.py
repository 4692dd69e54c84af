"""Do the 95 % intervals cover the truth? Many noise realizations and multisine draws of the hidden pendulum.

Hidden truth: mass 1.3 kg, damping 0.08 N m s/rad, friction loss 0.05 N m. Each seed draws new multisine
phases (five sines 0.2-3 Hz, peak 2.5 N m, 10 s at 500 Hz) and new 0.5 mrad angle noise. Two estimators:
the regression (`fit_pendulum`, quartic 0.2 s derivatives, block bootstrap) and the mujoco.sysid pipeline
(`identify`, estimated start state, the library's intervals). `bench/bench_coverage.py` runs 40 seeds.

Measured (40 seeds, bench): the pipeline covers 98 % of each parameter with half-widths 1.07-1.11x the
actual spread; the regression covers damping (98 %) and friction loss (95 %) but never the mass: the 0.2 s
derivative filter biased it by +0.56 % (also on noise-free data) while its bootstrap half-width is 0.31 %,
and no warning was raised. Subtracting a simulate-and-refit bias estimate restored 100 % coverage (1.4 s per
fit); `fit_pendulum` now filters torque and motion alike (`filter_torque`, no extra cost), which removes the
bias at its source: 100 % coverage over 20 seeds, noise-free error under 0.01 %."""

from __future__ import annotations

import numpy as np
import pytest

from support.coverage import (
    DT_S,
    FREQS_HZ,
    LENGTH_M,
    PHYSICS,
    PIPELINE_SEEDS,
    REGRESSION_SEEDS,
    ROTOR_KG_M2,
    TRUTH,
    covered,
    pipeline_interval,
    regression_interval,
)
from support.synthetic import multisine, record_effort
from sysid_ros.core.linear import fit_pendulum
from sysid_ros.core.signals import savgol_derivatives
from sysid_ros.core.sim import SimRobot

pytestmark = pytest.mark.slow  # 18 pipeline and ~30 regression fits: about 25 s of CPU


@pytest.fixture(scope="module")
def regression():
    out = [regression_interval(s) for s in REGRESSION_SEEDS]
    return np.array([v for v, _, _ in out]), np.array([h for _, h, _ in out]), np.array([f for _, _, f in out])


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    folder = tmp_path_factory.mktemp("coverage")
    out = [pipeline_interval(s, folder) for s in PIPELINE_SEEDS]
    return np.array([o[0] for o in out]), np.array([o[1] for o in out]), np.array([o[2] for o in out])


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


@pytest.fixture(scope="module")
def pipeline_measured(tmp_path_factory):
    folder = tmp_path_factory.mktemp("coverage_measured")
    out = {
        mode: [pipeline_interval(s, folder, "measured", mode) for s in PIPELINE_SEEDS]
        for mode in ("propagate", "weight")
    }
    return {mode: tuple(np.array([o[k] for o in rows]) for k in range(4)) for mode, rows in out.items()}


def test_pipeline_intervals_from_measured_start_states_carry_that_noise(pipeline_measured):
    """One 10 s segment replayed from the measured (0.5 mrad) start state: the library's white-residual
    intervals miss the start error's effect; `start_noise: propagate` adds it (start_error.py)."""
    values, half, identifiable, widening = pipeline_measured["propagate"]
    hits = covered(values, half)
    # 24 intervals at a true 95 %: P(<= 17 hits) < 0.1 %. Measured (bench, 20 seeds): 92 % (95/90/90 %),
    # half-widths 0.70-0.85x 1.96 spread; the library's own half-widths alone: 43 %, 0.12-0.17x
    assert hits.mean() >= 0.75, hits
    library = covered(values, half / widening)
    # the correction is what does it: the library-only intervals cover <= 17 of 24 (at their measured 43 %,
    # P(>= 18) < 0.1 %); every half-width was widened (measured x1.3-16 per seed and parameter)
    assert library.mean() < 0.75 and np.all(widening > 1.0), (library, widening)
    spread = (values - TRUTH).std(axis=0, ddof=1)
    ratio = half.mean(axis=0) / (1.96 * spread)
    # 8 seeds give the spread to about +-27 % (1 sd): a true 0.8 lands above 0.35 and under 2.5, the
    # library's 0.12-0.17 (x1.5 at most) stays under it. Measured on these 8 seeds: 24 of 24 covered (library
    # alone 12 of 24), ratio 1.14-1.35 (library alone 0.21-0.25).
    assert np.all((ratio > 0.35) & (ratio < 2.5)), ratio
    assert identifiable.all() and np.all(half < 5e-2 * TRUTH), half


def test_weighting_by_the_start_state_noise_is_honest_and_as_tight_as_estimating_it(pipeline_measured, pipeline):
    """`start_noise: weight` (the default): one generalized least-squares step that weights the segment by its
    start state's noise. Measured (20 seeds): 100/95/90 % coverage, half-widths 0.014/0.043/0.19 %, about
    1.0x the spread: as the estimated start state's (0.014/0.048/0.21 %), 4-6x tighter than `propagate`."""
    values, half, identifiable, _ = pipeline_measured["weight"]
    hits = covered(values, half)
    # the same bars as test_pipeline_intervals_cover_the_truth (24 intervals: P(<= 19 hits) = 0.6 % at 95 %)
    assert hits.mean() >= 0.8 and hits.mean(axis=0).min() >= 0.75, hits
    spread = (values - TRUTH).std(axis=0, ddof=1)
    ratio = half.mean(axis=0) / (1.96 * spread)
    assert np.all((ratio > 0.5) & (ratio < 2.5)) and identifiable.all(), ratio
    # efficiency: tighter than propagating the noise into the plain fit's intervals (measured 4-6x), and
    # within 1.5x of estimating the start state (measured 0.9-1.0x); both are means over the same 8 seeds
    propagated = pipeline_measured["propagate"][1]
    estimated = pipeline[1]
    assert np.all(half.mean(axis=0) < 0.5 * propagated.mean(axis=0)), (half.mean(0), propagated.mean(0))
    assert np.all(half.mean(axis=0) < 1.5 * estimated.mean(axis=0)), (half.mean(0), estimated.mean(0))


def test_regression_damping_and_friction_intervals_cover(regression):
    values, half, _ = regression
    hits = covered(values, half)[:, 1:]
    # 40 intervals at 95 %: P(<= 31 hits) < 0.1 %. Measured: all covered, half-widths 1.4-1.8x the spread
    # (the block bootstrap is conservative for these two).
    assert hits.mean() >= 0.8, hits


def test_regression_mass_interval_covers_or_is_flagged(regression):
    values, half, flagged = regression
    hits = covered(values, half)[:, 0]
    # Either honest intervals (>= 80 % of 20: P(<= 15 hits) = 0.3 % at 95 %) or a warning on the misses.
    # Measured with both sides filtered alike (fit_pendulum's default): 20 of 20, mass bias +0.05 %, spread
    # 0.07 %, half-width 0.27 % (the block bootstrap is ~2x conservative); torque unfiltered: 0 of 20.
    assert hits.mean() >= 0.8 or flagged[~hits, 0].all(), (hits, (values[:, 0] / TRUTH[0] - 1) * 100, half[:, 0])
    # and not covered by being wide: under 0.5 %, while the unfiltered fit's bias alone was +0.5-0.6 %
    assert np.all(half[:, 0] < 5e-3 * TRUTH[0]), half[:, 0]
    assert np.all(np.abs(values[:, 0] / TRUTH[0] - 1) < 3e-3), values[:, 0]


def test_filtering_both_sides_removes_the_derivative_filter_bias():
    """Noise-free data: the 0.2 s quartic filter biases the mass +0.5 % when only the motion is filtered; with
    the torque and every column through the same smoother (hold differences) the fit is exact."""
    clean = SimRobot("pendulum", physics=PHYSICS, seed=0)
    u = multisine(np.arange(0, 10.0 + 1e-9, DT_S), FREQS_HZ, 2.5, seed=1000)  # record(0)'s torque, no noise
    s, commands = record_effort(clean, lambda ts: [u[int(round(ts / DT_S))]], 10.0)
    tau = commands.held_at(s.time_ns)[:, 0]
    rel = {}
    for filter_window_s, filter_torque in ((0.2, False), (0.1, False), (0.2, True), (0.1, True)):
        fit = fit_pendulum(
            savgol_derivatives(s.position[:, 0], DT_S, filter_window_s, 4),
            tau,
            length_m=LENGTH_M,
            rotor_inertia_kg_m2=ROTOR_KG_M2,
            filter_torque=filter_torque,
        ).fit
        rel[filter_window_s, filter_torque] = fit.values / TRUTH - 1
    # measured, torque unfiltered: mass +0.50 % (0.2 s) and +0.05 % (0.1 s): no noise, so only the filter
    assert rel[0.2, False][0] > 2e-3 and abs(rel[0.1, False][0]) < 0.4 * rel[0.2, False][0], rel
    # both sides filtered: mass, damping, friction loss +0.0002 %, -0.0014 %, +0.007 % at 0.2 s (-0.005 %,
    # +0.024 % for damping and friction loss at 0.1 s); what is left is MuJoCo's soft friction constraint.
    # 1e-4 / 5e-4 sit 40x under the unfiltered bias and 25x under the noisy fits' half-widths.
    for filter_window_s in (0.2, 0.1):
        assert np.all(np.abs(rel[filter_window_s, True]) < [1e-4, 1e-4, 5e-4]), rel
