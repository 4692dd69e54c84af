"""The statistical stopping rule (`core/identify/rollout/stopping.py`) on least-squares problems with a known answer.

Linear residuals r = A x - b with white noise: the Gauss-Newton step from x is the exact way to the optimum,
so its length in standard errors is sqrt(d' A'A d / s^2) for d = x - x_opt. A null direction (two columns
the data see only as their sum) must neither make that length infinite nor keep the backend busy.
"""

from __future__ import annotations

import numpy as np
import pytest
from mujoco import minimize

from sysid_ros.core.identify import NegligibleStep, StoppingJacobian, step_standard_errors


def linear(seed: int = 0, rows: int = 400, sum_only: bool = False):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(rows, 3)) * np.array([1.0, 30.0, 0.02])  # columns on very different scales
    if sum_only:
        a[:, 2] = a[:, 1]  # parameters 1 and 2 enter only as their sum
    truth = np.array([1.0, 0.5, 2.0])
    b = a @ truth + rng.normal(size=rows)
    return a, b


def test_step_length_in_standard_errors_on_a_linear_problem():
    a, b = linear()
    x_opt = np.linalg.lstsq(a, b, rcond=None)[0]
    cov = np.linalg.inv(a.T @ a)
    for k, frac in ((0, 0.05), (1, 0.3), (2, 2.0)):  # move one parameter by frac of its standard error
        d = np.zeros(3)
        d[k] = frac * np.sqrt(cov[k, k])
        x = x_opt + d
        r = a @ x - b
        s2 = r @ r / (len(b) - 3)
        expected = np.sqrt(d @ a.T @ a @ d / s2)
        got = step_standard_errors(a, r, x, np.full(3, -10.0), np.full(3, 10.0))
        assert got == pytest.approx(expected, rel=1e-6)
        assert got == pytest.approx(frac, rel=0.02)  # s^2 is the noise's variance within ~1 %
    r = a @ x_opt - b
    assert step_standard_errors(a, r, x_opt, np.full(3, -10.0), np.full(3, 10.0)) < 1e-6


def test_a_null_direction_is_left_out_and_a_held_bound_too():
    a, b = linear(sum_only=True)
    x_opt = np.linalg.lstsq(a, b, rcond=None)[0]
    lower, upper = np.full(3, -10.0), np.full(3, 10.0)
    along_null = x_opt + np.array([0.0, 1.0, -1.0])  # the same residual: nothing left to gain
    assert step_standard_errors(a, a @ along_null - b, along_null, lower, upper) < 1e-6
    # parameter 0 held at a lower bound above its optimum, the others at their best given it
    x = x_opt.copy()
    x[0] += 0.5
    x[1:] = np.linalg.lstsq(a[:, 1:], b - a[:, 0] * x[0], rcond=None)[0]
    r = a @ x - b
    assert (a.T @ r)[0] > 0  # the gradient pushes parameter 0 down
    assert step_standard_errors(a, r, x, lower, upper) > 5.0  # free, it has far to go
    lower[0] = x[0]
    assert step_standard_errors(a, r, x, lower, upper) < 1e-6  # held at its bound: nothing left


def curved(a, b):
    """r = a0 x0 + a1 s + 0.2 a1 s^2 - b with s = x1 + x2: nonlinear, and parameters 1 and 2 enter only as
    their sum. Vectorised like the backend wants (x of shape (n,), (n, 1) or (n, k))."""

    def residual(x):
        x = np.asarray(x, dtype=float)
        x2 = x if x.ndim == 2 else x.reshape(-1, 1)
        s = x2[1] + x2[2]
        out = np.outer(a[:, 0], x2[0]) + np.outer(a[:, 1], s + 0.2 * s**2) - b[:, None]
        return out if x.ndim == 2 else out[:, 0]

    return residual


def test_the_backend_stops_at_the_optimum_instead_of_line_searching_a_flat_valley():
    """Parameters 1 and 2 enter only as their sum: the backend alone ends in a failed Armijo loop; with the
    rule it stops when the next step is negligible, at the same optimum."""
    a, b = linear(seed=3)
    residual = curved(a, b)
    calls = [0]

    def counted(x):
        calls[0] += 1 if np.ndim(x) == 1 or np.shape(x)[1] == 1 else np.shape(x)[1]
        return residual(x)

    x0 = np.array([0.0, 0.0, 0.0])
    lower, upper = np.full(3, -10.0), np.full(3, 10.0)
    x_plain, _ = minimize.least_squares(x0, counted, bounds=[lower, upper], mu_factor=10**0.5, verbose=0, xtol=1e-12)
    plain = calls[0]
    calls[0] = 0
    jac = StoppingJacobian(counted, lower, upper)
    with pytest.raises(NegligibleStep) as stop:
        minimize.least_squares(
            x0, counted, bounds=[lower, upper], mu_factor=10**0.5, verbose=0, xtol=1e-12, jacobian=jac
        )
    ruled = calls[0]
    x_rule = np.ravel(stop.value.x)
    assert stop.value.standard_errors < 0.1
    r_plain, r_rule = residual(x_plain), residual(x_rule)
    # the same fit: costs within a hundredth of one chi-square unit, the identifiable parameter within 0.1 SE
    assert abs(r_rule @ r_rule - r_plain @ r_plain) < 0.01
    assert abs(x_rule[0] - x_plain[0]) < 0.1 * np.sqrt(np.linalg.pinv(a.T @ a)[0, 0] * (r_plain @ r_plain) / 397)
    assert ruled < plain / 2, (ruled, plain)
    np.testing.assert_array_equal(stop.value.jac, jac.last[1])


def test_the_jacobian_is_computed_once_per_point():
    a, b = linear(seed=1)
    residual = curved(a, b)
    calls = []
    jac = StoppingJacobian(lambda x: calls.append(x) or residual(x), np.full(3, -10.0), np.full(3, 10.0))
    x = np.zeros((3, 1))
    first = jac(x, residual(x[:, 0]))
    second = jac(x.copy(), residual(x[:, 0]))
    assert len(calls) == 1 and second is first
    np.testing.assert_allclose(first[:, 0], a[:, 0], rtol=1e-5, atol=1e-6)  # the backend's forward difference
