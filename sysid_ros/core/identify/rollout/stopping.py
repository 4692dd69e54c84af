"""A statistical stopping rule for the `mujoco` least-squares backend.

The backend stops on a small relative step (`xtol`) or a failed line search. Near an optimum that the data
determine only up to a direction (two masses on one joint axis), its Gauss-Newton steps follow that flat
valley and the Armijo test fails for every regularizer up to 1e8: 28 rollouts of every segment on the iiwa,
41 % of the whole fit, to move nothing. Long before that the remaining step is statistically nothing.

The rule, checked at every Jacobian (no extra rollout): the Gauss-Newton step from here (on the parameters
that are not held at a bound, directions J'J does not determine left out) would lower the cost by
`delta = g' H+ g / 2`. With residuals scaled by their noise, that step moves the estimate by
`sqrt(2 delta / s^2)` standard errors in the Mahalanobis norm (so each parameter by at most that many of its
own), s^2 = r'r / (N - p) the residual variance. Below `STEP_STANDARD_ERRORS` the fit stops where it is. The
standard errors are those of white residuals, the narrowest the data allow (measured start states only
widen them), so the rule never stops earlier than a tenth of the honest uncertainty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from mujoco import minimize

STEP_STANDARD_ERRORS = 0.1
"""Stop when the next Gauss-Newton step would move the estimate by less than this many standard errors."""


class NegligibleStep(Exception):
    """Raised out of the backend to end the fit at `x` (its residual `r` and Jacobian `jac` known)."""

    def __init__(self, x: np.ndarray, r: np.ndarray, jac: np.ndarray, standard_errors: float) -> None:
        super().__init__(f"the next step moves the estimate by {standard_errors:.3g} standard errors")
        self.x, self.r, self.jac, self.standard_errors = x, r, jac, standard_errors


def step_standard_errors(
    jac: np.ndarray, r: np.ndarray, x: np.ndarray, lower: np.ndarray, upper: np.ndarray, rcond: float = 1e-10
) -> float:
    """How far (in standard errors, Mahalanobis) the Gauss-Newton step from `x` would move the estimate.

    Parameters at a bound whose gradient pushes outwards are held; columns are scaled to unit norm and
    eigen-directions of J'J below `rcond` of the largest (not determined by the data) are left out.
    """
    jac, r, x = np.asarray(jac, float), np.ravel(r), np.ravel(x)
    grad = jac.T @ r
    held = ((x <= np.ravel(lower)) & (grad > 0)) | ((x >= np.ravel(upper)) & (grad < 0))
    free = jac[:, ~held]
    dof = max(len(r) - jac.shape[1], 1)
    s2 = float(r @ r) / dof
    if free.shape[1] == 0 or s2 <= 0:
        return 0.0
    norms = np.linalg.norm(free, axis=0)
    scaled = free / np.where(norms > 0, norms, 1.0)
    lam, vec = np.linalg.eigh(scaled.T @ scaled)
    keep = lam > rcond * max(float(lam.max()), 1e-300)
    proj = vec[:, keep].T @ (scaled.T @ r)
    decrease = 0.5 * float(np.sum(proj**2 / lam[keep]))
    return float(np.sqrt(2.0 * decrease / s2))


@dataclass
class StoppingJacobian:
    """`jacobian=` for `mujoco.minimize.least_squares` (through `sysid.optimize`): the backend's own
    finite-difference Jacobian, computed once per point (the backend asks again at an unmoved final point),
    and `NegligibleStep` raised when the next step would move the estimate by less than `standard_errors`."""

    residual: Callable[[np.ndarray], np.ndarray]  # x (n,) or (n, k) -> stacked residual (rows,) or (rows, k)
    lower: np.ndarray
    upper: np.ndarray
    standard_errors: float = STEP_STANDARD_ERRORS
    eps: float = float(np.finfo(np.float64).eps ** 0.5)
    last: tuple[np.ndarray, np.ndarray] | None = None

    def __call__(self, x: np.ndarray, r: np.ndarray) -> np.ndarray:
        if self.last is not None and np.array_equal(self.last[0], x):
            return self.last[1]
        bounds = [np.reshape(self.lower, (-1, 1)), np.reshape(self.upper, (-1, 1))]
        jac, _ = minimize.jacobian_fd(
            self.residual, np.reshape(x, (-1, 1)), np.reshape(r, (-1, 1)), np.float64(self.eps), 0, bounds
        )
        self.last = (np.array(x, copy=True), jac)
        moved = step_standard_errors(jac, r, x, self.lower, self.upper)
        if moved < self.standard_errors:
            raise NegligibleStep(np.array(x, copy=True), np.ravel(r).copy(), jac, moved)
        return jac
