"""Derivative filters checked on noise-free signals (the lesson's rule: check the filter before trusting it)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sysid_ros.core.errors import DataError
from sysid_ros.core.signals import (
    JointSamples,
    advanced,
    estimate_position_noise,
    finite_differences,
    hold_differences,
    hold_kernel,
    quartic_derivatives,
    same_filter,
    samples_derivatives,
    savgol_derivatives,
    smooth_like_acceleration,
    uniform_dt_s,
    velocity_lag,
    window_samples,
)

DT = 0.002


def test_window_in_seconds_is_odd_and_matches_the_lesson() -> None:
    assert window_samples(0.1, DT, 3) == 51  # 0.1 s at 2 ms: 51 samples (odd, centred)
    assert window_samples(0.11, DT, 4) == 55
    assert window_samples(0.11, 0.001, 4) == 111
    with pytest.raises(DataError):
        window_samples(0.1, 0.0, 3)


@pytest.mark.parametrize("polyorder", [3, 4])
def test_polynomials_up_to_the_order_are_differentiated_exactly(polyorder: int) -> None:
    t = np.arange(400) * DT
    c = [0.3, -1.2, 2.0, 0.7, -0.4][: polyorder + 1]
    q = sum(ci * t**i for i, ci in enumerate(c))
    qd = sum(i * ci * t ** (i - 1) for i, ci in enumerate(c) if i >= 1)
    qdd = sum(i * (i - 1) * ci * t ** (i - 2) for i, ci in enumerate(c) if i >= 2)
    d = savgol_derivatives(q, DT, 0.1, polyorder)
    v = d.valid
    assert v.sum() == 400 - 2 * (d.window_samples // 2)
    np.testing.assert_allclose(d.q[v], q[v], atol=1e-10)
    np.testing.assert_allclose(d.qd[v], qd[v], atol=1e-8)
    np.testing.assert_allclose(d.qdd[v], qdd[v], atol=1e-6)


def test_sine_bias_matches_the_filter_theory() -> None:
    # A cubic fit over a half-width T attenuates qdd of a sine at w by about (wT)^2/14 (the t^4 Taylor term);
    # the quartic fit removes that term, leaving an error of order (wT)^4.
    t = np.arange(3000) * DT
    w = 2 * np.pi * 3.0
    q, qdd = np.sin(w * t), -(w**2) * np.sin(w * t)
    cubic = savgol_derivatives(q, DT, 0.1, 3)
    quartic = quartic_derivatives(q, DT)
    v = cubic.valid & quartic.valid
    gain_cubic = np.dot(cubic.qdd[v], qdd[v]) / np.dot(qdd[v], qdd[v])
    half = cubic.window_samples // 2 * DT
    assert gain_cubic == pytest.approx(1 - (w * half) ** 2 / 14, abs=0.01)
    gain_quartic = np.dot(quartic.qdd[v], qdd[v]) / np.dot(qdd[v], qdd[v])
    assert abs(1 - gain_quartic) < 0.01 < abs(1 - gain_cubic)
    # velocity of a cubic fit is already close: error ~ (wT)^4 too
    assert np.max(np.abs(cubic.qd[v] - w * np.cos(w * t[v]))) < 0.01 * w


def test_edges_and_missing_samples_are_invalid_not_extrapolated() -> None:
    q = np.sin(np.arange(500) * DT * 5.0)
    q[250] = np.nan
    d = savgol_derivatives(q, DT)
    half = d.window_samples // 2
    assert not d.valid[:half].any() and not d.valid[-half:].any()
    assert not d.valid[250 - half : 250 + half + 1].any()
    assert d.valid[half] and d.valid[250 - half - 1] and d.valid[250 + half + 1]
    assert np.isnan(d.qdd[~d.valid]).all() and np.isfinite(d.qdd[d.valid]).all()


def test_two_dimensional_positions_are_filtered_per_joint() -> None:
    t = np.arange(600) * DT
    q = np.stack([np.sin(2 * t), 0.5 * t**2], axis=1)
    d = quartic_derivatives(q, DT)
    assert d.q.shape == q.shape and d.valid.shape == q.shape
    np.testing.assert_allclose(d.qdd[d.valid[:, 1], 1], 1.0, atol=1e-8)


def test_noise_gains_and_the_noise_estimate_match_monte_carlo() -> None:
    rng = np.random.default_rng(0)
    sigma = 5e-4
    t = np.arange(20000) * DT
    clean = 0.4 * np.sin(2 * np.pi * 0.7 * t)
    noise = rng.normal(0.0, sigma, t.size)
    for d_clean, d_noisy in (
        (savgol_derivatives(clean, DT), savgol_derivatives(clean + noise, DT)),
        (finite_differences(clean, DT), finite_differences(clean + noise, DT)),
    ):
        v = d_clean.valid
        # 20000 samples: the std of a std estimate is ~1/sqrt(2 n_eff); 5 % covers the filter's correlation
        assert np.std(d_noisy.qd[v] - d_clean.qd[v]) == pytest.approx(sigma * d_clean.qd_noise_gain, rel=0.05)
        assert np.std(d_noisy.qdd[v] - d_clean.qdd[v]) == pytest.approx(sigma * d_clean.qdd_noise_gain, rel=0.05)
    # finite differences: sqrt(6)/(4 h^2) sigma ~ 77 rad/s^2 of acceleration noise from 0.5 mrad
    assert sigma * finite_differences(clean, DT).qdd_noise_gain == pytest.approx(76.5, rel=0.01)
    assert estimate_position_noise(clean + noise) == pytest.approx(sigma, rel=0.05)
    assert savgol_derivatives(clean + noise, DT).position_noise_rad == pytest.approx(sigma, rel=0.05)
    again = same_filter(quartic_derivatives(clean, DT), clean)
    assert again.window_samples == 55 and again.polyorder == 4


def test_sample_period_from_integer_times() -> None:
    times = np.arange(100, dtype=np.int64) * 2_000_000 + 1_700_000_000_000_000_000
    assert uniform_dt_s(times) == pytest.approx(0.002)
    jittered = times.copy()
    jittered[40] += 500_000
    with pytest.raises(DataError, match="not uniform"):
        uniform_dt_s(jittered)
    with pytest.raises(DataError):
        uniform_dt_s(times.astype(float))
    with pytest.raises(DataError):
        savgol_derivatives(np.zeros(10), DT)


def test_derivatives_from_joint_samples_per_joint() -> None:
    times = np.arange(1000, dtype=np.int64) * 2_000_000 + 1_700_000_000_000_000_000
    t = (times - times[0]) * 1e-9
    positions = np.stack([0.5 * t**2, np.sin(t), t], axis=1)
    samples = JointSamples(("a", "b", "c"), times, position=positions)
    d = samples_derivatives(samples, ["c", "a"])
    assert d.q.shape == (1000, 2) and d.dt_s == pytest.approx(0.002)
    one = d.column(1)
    assert one.q.ndim == 1 and np.ndim(one.position_noise_rad) == 0
    np.testing.assert_allclose(one.qdd[one.valid], 1.0, atol=1e-6)  # 1/h^2 amplifies rounding
    np.testing.assert_allclose(d.column(0).qd[d.valid[:, 0]], 1.0, atol=1e-9)
    with pytest.raises(DataError):
        one.column(0)
    with pytest.raises(DataError, match="no positions"):
        samples_derivatives(JointSamples(("a",), times, effort=np.zeros((1000, 1))))


@pytest.mark.parametrize(
    "make",
    [
        lambda q: savgol_derivatives(q, DT, 0.2, 4),
        lambda q: savgol_derivatives(q, DT, 0.1, 3),
        lambda q: finite_differences(q, DT),
    ],
)
def test_the_acceleration_filter_is_a_smoother_of_second_differences(make) -> None:
    """What filtering the torque alike rests on: acceleration = g * (q[k+1] - 2 q[k] + q[k-1]) / h^2 exactly,
    with g centred and of unit sum, for any signal (here a random walk, nothing smooth about it)."""
    q = np.cumsum(np.random.default_rng(4).normal(0.0, 1e-3, 3000))
    d = make(q)
    g = hold_kernel(d)
    assert len(g) % 2 == 1 and g.sum() == pytest.approx(1.0, abs=1e-8) and np.allclose(g, g[::-1], atol=1e-9)
    _, v, a = hold_differences(d)
    smoothed = smooth_like_acceleration(d, a)
    ok = d.valid & np.isfinite(smoothed)
    assert ok.sum() > 0.9 * d.valid.sum()
    # relative 1e-8: the double running sum of a kernel with entries ~1/h^2 rounds at ~1e-9
    np.testing.assert_allclose(smoothed[ok], d.qdd[ok], rtol=0, atol=1e-8 * np.abs(d.qdd[ok]).max())
    np.testing.assert_allclose(v[:-1], np.diff(q) / DT)
    with pytest.raises(DataError, match="raw positions"):
        hold_differences(replace(d, position_raw=None))


@pytest.mark.parametrize("lag", [0.0, 1.5, 4.8, -3.0])
def test_a_lagging_velocity_is_measured_against_the_positions_and_read_earlier(lag: float) -> None:
    """A drive's filtered velocity estimate lags its positions' derivative (the real Panda's by 4.8 samples): the
    lag comes back within 0.1 sample through 0.2 mrad/s of velocity noise and 0.05 mrad of position noise, and the
    velocity read that much earlier matches the derivative."""
    rng = np.random.default_rng(3)
    dt = 0.001
    t = np.arange(8000) * dt
    freqs, phases = np.array([0.3, 0.7, 1.3]), rng.uniform(0, 2 * np.pi, (3, 2))
    q = np.column_stack(
        [sum(np.sin(2 * np.pi * f * t + phases[k, j]) / f for k, f in enumerate(freqs)) for j in range(2)]
    )
    qd = np.column_stack(
        [sum(2 * np.pi * np.cos(2 * np.pi * f * t + phases[k, j]) for k, f in enumerate(freqs)) for j in range(2)]
    )
    v = advanced(qd, -lag) + rng.normal(0.0, 2e-4, qd.shape)
    measured = velocity_lag(q + rng.normal(0.0, 5e-5, q.shape), v, dt)
    assert measured == pytest.approx(lag, abs=0.1)
    inner = slice(100, -100)
    assert np.max(np.abs(advanced(v, measured)[inner] - qd[inner])) < 0.01 * np.max(np.abs(qd))
