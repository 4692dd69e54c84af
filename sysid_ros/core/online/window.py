"""One window: Savitzky-Golay derivatives, the project's linear fit, and a confidence per parameter.

The confidence is the excitation seen through the equations of motion: the noise a window leaves in
parameter i is var_i = [A^-1 S A^-1]_ii, with A = Phi' Phi over the used rows (the column energies and
their overlaps; 1 / [A^-1]_ii is the energy of column i that the other columns do not explain) and S the
long-run covariance of phi_t e_t (Newey-West with Bartlett weights over one derivative window, because
filtered derivatives correlate residuals over about that long; ordinary standard errors would be several
times too small). Confidence w_i = 1 / (1 + var_i / (precision_i scale_i)^2): 0.5 when the window pins
the parameter to `precision` of its scale, towards 1 as the column's unexplained energy grows, towards 0
when the motion leaves the column in the noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.ndimage import convolve1d
from scipy.signal import savgol_coeffs

from ..errors import DataError
from ..linear import BootstrapSettings, FitThresholds, fit_linear, select_rows, weigh_joints
from ..signals import estimate_position_noise, window_samples
from .config import OnlineConfig, WindowModel
from .reports import ACCEPTED, DISCARDED, WindowFit
from .timebase import on_uniform_grid

_CHEAP_BOOTSTRAP = BootstrapSettings(blocks=4, resamples=2)  # fit_linear's intervals are not used here
JOINT_WEIGHT_PASSES = 2  # reweighting fits per window (an iiwa's joint weights settle within 1 %, measured)


def discarded(time_ns: int, p: int, note: str, rows: int = 0) -> WindowFit:
    """A window that says nothing: no values, zero confidence."""
    nan = np.full(p, np.nan)
    return WindowFit(time_ns, nan, nan.copy(), np.zeros(p), rows, (DISCARDED,) * p, note)


@lru_cache(maxsize=16)
def _kernels(n: int, polyorder: int, dt_s: float) -> np.ndarray:
    """Savitzky-Golay convolution kernels for the value, first and second derivative (3, n)."""
    return np.stack([savgol_coeffs(n, polyorder, deriv=d, delta=dt_s) for d in (0, 1, 2)])


def _filtered(x: np.ndarray, kernels: np.ndarray) -> list[np.ndarray]:
    """x (N,) or (N, J) through each kernel along time, the ends (half a window) and anything near a NaN
    set to NaN.

    The same filter as `derivatives.savgol_derivatives` (scipy's kernels, 'nearest' ends, masked), with
    the kernels cached: a stream fits the same window shape every hop.
    """
    n = kernels.shape[1]
    half = n // 2
    finite = np.isfinite(x)
    filled = np.where(finite, x, 0.0)
    bad = convolve1d(np.asarray(~finite, dtype=float), np.ones(n), axis=0, mode="constant") > 0
    bad[:half] = bad[len(x) - half :] = True
    out = []
    for k in kernels:
        y = convolve1d(filled, k, axis=0, mode="nearest")
        y[bad] = np.nan
        out.append(y)
    return out


def _column_noise_covariance(
    config: OnlineConfig,
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    rows: np.ndarray,
    sigma_rad: float,
    kernels: np.ndarray,
) -> np.ndarray:
    """Per-row covariance of the regressor's noise, from white position noise through the filter.

    The filter turns noise sigma into (dq, dqd, dqdd) with covariance sigma^2 K K' (K: the kernels); each
    column is a function of (q, qd, qdd), linearized by central differences, so the same rule covers
    qdd, qd, sin q and tanh(qd / band) alike (sign(qd) has no slope off zero, where rows are kept).
    """
    base = (q[rows], qd[rows], qdd[rows])
    k_cov = sigma_rad**2 * kernels @ kernels.T
    jac = []
    for j, x in enumerate(base):
        h = 1e-6 * max(1.0, float(np.max(np.abs(x))))
        plus = [b + h if i == j else b for i, b in enumerate(base)]
        minus = [b - h if i == j else b for i, b in enumerate(base)]
        jac.append((config.model.columns(*plus) - config.model.columns(*minus)) / (2 * h))
    jac_rows = np.stack(jac, axis=-1)  # (rows, P, 3)
    return np.einsum("rpi,ij,rqj->pq", jac_rows, k_cov, jac_rows) / max(len(base[0]), 1)


def _hac_std(
    y: np.ndarray, phi: np.ndarray, rows: np.ndarray, theta: np.ndarray, a: np.ndarray, lags: int
) -> np.ndarray:
    """Standard errors that hold for correlated residuals: A^-1 S A^-1, S from overlapping block sums.

    y and rows are (N, J), phi (N, J, P): the joints' equations at one time are summed before blocking.
    The Bartlett-weighted long-run covariance equals the mean outer product of sums of phi_t e_t over
    blocks of `lags` samples, divided by the block length; unused rows count as zero (time kept).
    """
    x = np.where(rows[..., None], np.nan_to_num(phi), 0.0)
    e = np.where(rows, np.nan_to_num(y) - x @ theta, 0.0)
    g = (x * e[..., None]).sum(axis=1)
    s = _long_run(g, lags)
    a_inv = np.linalg.pinv(a)
    return np.sqrt(np.clip(np.diag(a_inv @ s @ a_inv), 0.0, None))


def _long_run(g: np.ndarray, lags: int) -> np.ndarray:
    """Sum over time of the Bartlett long-run covariance of g (N, K): overlapping block sums of `lags`."""
    block = max(1, min(lags, len(g)))
    csum = np.vstack([np.zeros((1, g.shape[1])), np.cumsum(g, axis=0)])
    sums = csum[block:] - csum[:-block]
    return sums.T @ sums / block * (len(g) / max(len(sums), 1))


def _halves_disagree(
    y: np.ndarray, phi: np.ndarray, rows: np.ndarray, cov: np.ndarray | None, lags: int, z_max: float
) -> str:
    """Why the window's two halves fit different parameters (a change inside the window), or ''.

    A window that straddles a change fits neither model, yet its standard errors only see noise; the
    halves, each fitted alone with its own standard errors, disagree by more than `z_max` sigma there.
    """
    mid = len(y) // 2
    fits = []
    for part in (np.arange(len(y)) < mid, np.arange(len(y)) >= mid):
        r = rows & part[:, None]
        x = phi[r]
        if len(x) < 2 * phi.shape[-1] + 10:
            return ""
        a = x.T @ x - (len(x) * cov if cov is not None else 0.0)
        if np.linalg.eigvalsh(a).min() <= 0:
            a = x.T @ x
        theta = np.linalg.lstsq(a, x.T @ y[r], rcond=None)[0]
        fits.append((theta, _hac_std(y, phi, r, theta, a, lags)))
    (t1, s1), (t2, s2) = fits
    z = np.abs(t2 - t1) / np.sqrt(s1**2 + s2**2 + 1e-300)
    worst = int(np.argmax(z))
    return f"the window's halves disagree by {z[worst]:.1f} sigma (a change inside it?)" if z[worst] > z_max else ""


@dataclass(frozen=True, eq=False)
class Prepared:
    """A stretch of samples ready for the linear fit: tau - known = phi theta on the `rows` (time, joint)."""

    end_ns: int
    time_ns: np.ndarray  # (N,)
    q: np.ndarray  # (N, J) raw positions
    phi: np.ndarray  # (N, J, P)
    y: np.ndarray  # (N, J) filtered torque minus the known part
    rows: np.ndarray  # (N, J) equations used
    lags: int  # derivative window, samples (residual correlation length)
    derivatives: tuple[np.ndarray, np.ndarray, np.ndarray]
    kernels: np.ndarray


def prepare(
    config: OnlineConfig, time_ns: np.ndarray, q: np.ndarray, tau: np.ndarray, min_derivative_windows: int = 4
) -> Prepared | WindowFit:
    """Savitzky-Golay derivatives, row selection and the model's columns for (N,) or (N, J) samples, or a
    discarded window saying why the stretch says nothing (fewer than `min_derivative_windows` derivative
    windows of samples, too few moving rows, free motion)."""
    q2, tau2 = (np.asarray(a, dtype=np.float64).reshape(len(time_ns), -1) for a in (q, tau))
    end, p = int(time_ns[-1]), len(config.model.names)
    steps = np.diff(time_ns)
    if len(steps) == 0 or steps.min() <= 0:
        return discarded(end, p, "fewer than two increasing samples")
    time_ns, q2, tau2 = on_uniform_grid(time_ns, q2, tau2)
    steps = np.diff(time_ns)
    dt_s = round(float(np.median(steps))) * 1e-9
    n = window_samples(config.derivative_window_s, dt_s, config.derivative_polyorder)
    if len(q2) < min_derivative_windows * n:
        return discarded(end, p, f"{len(q2)} samples are too few for a {n}-sample derivative window")
    kernels = _kernels(n, config.derivative_polyorder, dt_s)
    qf, qd, qdd = _filtered(q2, kernels)
    valid = np.isfinite(qf) & np.isfinite(qd) & np.isfinite(qdd)
    rows = select_rows(qd, valid, n, config.selection, tau2)
    used = int(rows.sum())
    if used < config.min_rows:
        return discarded(end, p, f"{used} rows move faster than {config.selection.slow_speed_rad_s} rad/s", used)
    phi, known = config.model.regressor(np.asarray(time_ns, dtype=np.int64), qf, qd, qdd, valid.all(axis=1))
    y = _filtered(tau2, kernels[:1])[0] if config.filter_torque else tau2
    # Free motion (no torque applied) satisfies the model with every parameter at zero: without input the
    # window cannot tell the scale of anything, however fast the joint moves. Seen as false "changes to 0"
    # at the end of every torque tape, when the joint swings out freely.
    torque_rms = float(np.sqrt(np.mean(np.square(tau2[rows]))))
    if not torque_rms >= config.min_torque_rms_nm:
        return discarded(
            end,
            p,
            f"torque RMS {torque_rms:.3g} N m below {config.min_torque_rms_nm} N m: "
            "free motion does not scale the parameters",
            used,
        )
    y = y - known
    rows &= np.isfinite(y) & np.isfinite(phi).all(axis=-1)
    return Prepared(end, np.asarray(time_ns), q2, phi, y, rows, n, (qf, qd, qdd), kernels)


def residual_scale(prep: Prepared, theta: np.ndarray) -> np.ndarray:
    """Per joint, the long-run standard deviation of the residual tau - known - phi theta on the used rows
    (Bartlett over one derivative window): what a change detector measures its residuals against."""
    e = np.where(prep.rows, np.nan_to_num(prep.y - prep.phi @ theta), 0.0)
    used = np.maximum(prep.rows.sum(axis=0), 1)
    return np.sqrt(np.diag(_long_run(e, prep.lags)) / used)


def joint_noise(prep: Prepared, passes: int = JOINT_WEIGHT_PASSES) -> np.ndarray:
    """Per joint, the residual noise of the window's fit weighted by itself: `passes` least-squares fits,
    each dividing every joint's equations by the residual scale (`residual_scale`) the previous fit left
    (the first fit unweighted). Ones for one joint, or when a joint's residual is zero."""
    noise = np.ones(prep.y.shape[1])
    if prep.y.shape[1] == 1:
        return noise
    x = np.where(prep.rows[..., None], np.nan_to_num(prep.phi), 0.0)
    y = np.where(prep.rows, np.nan_to_num(prep.y), 0.0)
    gram, score = np.einsum("tjp,tjq->jpq", x, x), np.einsum("tjp,tj->jp", x, y)  # per joint: normal equations
    for _ in range(passes):
        weight = noise**-2
        theta = np.linalg.lstsq(np.einsum("j,jpq->pq", weight, gram), weight @ score, rcond=None)[0]
        measured = residual_scale(prep, theta)
        if not np.all(np.isfinite(measured)) or measured.max() <= 0:
            break
        noise = np.where(measured > 0, measured, measured.max())
    return noise


def fit_window(
    config: OnlineConfig, time_ns: np.ndarray, q: np.ndarray, tau: np.ndarray, scale: np.ndarray
) -> WindowFit:
    """Fit one window ((N,) or (N, J) samples of the model's joints) and score each parameter against the
    larger of |scale| (the current estimate, NaN if none) and |its window value|, floored by the model's
    `scale_floor`.

    With several joints, each joint's equations are weighted by its own residual noise (`joint_noise`):
    an arm's shoulder joints carry tenths of a N m of model and filter error where its wrist carries
    thousandths, and unweighted they would drown the wrist's view of a payload."""
    names = config.model.names
    p, end = len(names), int(time_ns[-1])
    prep = prepare(config, time_ns, q, tau)
    if isinstance(prep, WindowFit):
        return prep
    noise = joint_noise(prep)
    rows = prep.rows
    phi, y = weigh_joints(1.0 / noise, prep.phi, prep.y)
    used = int(rows.sum())
    cov = None
    if isinstance(config.model, WindowModel):  # one joint: the regressor's noise from the filter, linearized
        try:
            sigma = float(estimate_position_noise(prep.q[:, 0]))
        except DataError:
            sigma = 0.0
        qf, qd, qdd = (d[:, 0] for d in prep.derivatives)
        if sigma > 0:
            cov = _column_noise_covariance(config, qf, qd, qdd, rows[:, 0], sigma, prep.kernels)
    time_index = np.repeat(np.arange(len(y)), y.shape[1])
    try:
        fit = fit_linear(
            y.ravel(),
            phi.reshape(-1, p),
            names,
            rows=rows.ravel(),
            time_index=time_index,
            noise_covariance=cov,
            compensate_noise=cov is not None,
            bootstrap=_CHEAP_BOOTSTRAP,
            limits=FitThresholds(min_rows=config.min_rows),
            joint=config.joint,
        )
    except DataError as exc:
        return discarded(end, p, str(exc), used)
    x = phi[rows]
    a = x.T @ x - (len(x) * cov if fit.noise_compensated and cov is not None else 0.0)
    std = _hac_std(y, phi, rows, fit.values, a, prep.lags)
    if config.halves_z_max > 0:
        why = _halves_disagree(y, phi, rows, cov if fit.noise_compensated else None, prep.lags, config.halves_z_max)
        if why:
            return discarded(end, p, why, fit.rows_used)
    magnitude = np.fmax(np.abs(scale), np.abs(fit.values))  # the larger of estimate and window value
    ref = np.maximum(np.nan_to_num(magnitude), config.model.floors()) * config.per_parameter("precision")
    confidence = 1.0 / (1.0 + (std / ref) ** 2)
    confidence = np.where(np.isfinite(confidence) & np.isfinite(fit.values), confidence, 0.0)
    return WindowFit(
        end,
        fit.values.copy(),
        std,
        confidence,
        fit.rows_used,
        (ACCEPTED,) * p,
        residual_scale=residual_scale(prep, fit.values),
    )
