"""The residual change detector: a GLR scan for a step in the parameters, well inside one window.

The window refit sees a change only once the sliding window is mostly past it (~`horizon_s` late). The
detector instead looks at the newest `detect_window_s` of data through the current estimate: with e the
residual tau - known - phi theta_hat and each joint's equation divided by that joint's residual noise
(the long-run standard deviation the latest accepted window measured), a step d in theta at time k
leaves e_t = phi_t d after k. Its least-squares size and the generalized likelihood ratio are

    d_k = A_k^-1 b_k,   T_k = b_k' A_k^-1 b_k,   A_k = sum_{t >= k} phi_t phi_t',  b_k = sum_{t >= k} phi_t e_t

(whitened rows), and the standard error of d_k is sqrt(diag A_k^-1) because the whitening already holds
the residual's correlation (long-run variance). The change time is the k that maximizes T_k; a parameter
has stepped when the change matters (`OnlineEstimator._matters`): |d_i| beyond eps1 of its scale, beyond
`change_floor`, and beyond `detect_sigma` standard errors of the step and of the estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .window import Prepared

MIN_AFTER_FRACTION = 0.5  # of the derivative window: rows a candidate step needs after it
CANDIDATE_STEP = 5  # samples between candidate change times


@dataclass(frozen=True)
class Step:
    """The most likely step in the newest data: when, by how much, and its standard errors."""

    change_ns: int
    glr: float
    delta: np.ndarray
    std: np.ndarray


def scan(prep: Prepared, theta: np.ndarray, noise: np.ndarray) -> Step | None:
    """The GLR scan over candidate change times in `prep` (see the module docstring); None when no
    candidate has enough moving rows after it."""
    scale = np.where(noise > 0, noise, np.inf)
    phi = np.where(prep.rows[..., None], np.nan_to_num(prep.phi), 0.0) / scale[None, :, None]
    e = np.where(prep.rows, np.nan_to_num(prep.y - prep.phi @ theta), 0.0) / scale[None, :]
    gram = np.einsum("tjp,tjq->tpq", phi, phi)
    score = np.einsum("tjp,tj->tp", phi, e)
    a_after = np.cumsum(gram[::-1], axis=0)[::-1]
    b_after = np.cumsum(score[::-1], axis=0)[::-1]
    times = np.flatnonzero(prep.rows.any(axis=1))
    min_after = max(int(MIN_AFTER_FRACTION * prep.lags), 1)
    if len(times) <= min_after:
        return None
    candidates = times[: len(times) - min_after : CANDIDATE_STEP]
    if len(candidates) == 0:
        return None
    a_inv = np.linalg.pinv(a_after[candidates])  # all candidates at once
    delta = np.einsum("kpq,kq->kp", a_inv, b_after[candidates])
    glr = np.einsum("kp,kp->k", b_after[candidates], delta)
    best = int(np.argmax(glr))
    std = np.sqrt(np.clip(np.diagonal(a_inv[best]), 0.0, None))
    return Step(int(prep.time_ns[candidates[best]]), float(glr[best]), delta[best], np.where(std > 0, std, np.inf))
