"""Linear least squares for inverse-dynamics models: row selection, fit, block bootstrap, diagnostics.

The model is Y = Phi theta + e with Y the torque (known terms already moved to the left) and Phi built
from filtered q, qd, qdd. Filtered derivatives make neighbouring residuals strongly correlated, so the
ordinary standard errors are too small; contiguous blocks of the record are resampled instead. Neither
covers a wrong model, so the fit also reports how well the data excite each parameter and warns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.ndimage import minimum_filter1d

from ..errors import DataError


@dataclass(frozen=True)
class RowSelection:
    """Which samples enter a fit.

    `moving_speed_rad_s`: |qd| must reach it at every sample of the derivative window (0.02 rad/s by default).
    `slow_speed_rad_s`: samples slower than this are left out, where MuJoCo's soft friction loss (and
    real stiction) is not f sign(qd) (below ~0.1 rad/s); 0 keeps them.
    `torque_cap_fraction`: samples at or above this share of the torque cap are saturated and left out.
    """

    moving_speed_rad_s: float = 0.02
    slow_speed_rad_s: float = 0.1
    torque_cap_fraction: float = 0.98


@dataclass(frozen=True)
class BootstrapSettings:
    """Block bootstrap: `blocks` contiguous stretches of the record, `resamples` refits, a fixed seed."""

    blocks: int = 20
    resamples: int = 300
    seed: int = 0


@dataclass(frozen=True)
class FitThresholds:
    """When to refuse or warn.

    `min_rows`: fewer usable rows raise DataError (the tuner falls back to priors under 50).
    `max_condition`: above it, the column-normalized regressor is ill conditioned (100: the tuner refuses such a fit).
    `max_relative_half_width`: a 95 % half-width wider than this share of |value| is flagged.
    `min_column_snr`: a column whose RMS over the used rows is below this many times its noise is flagged.
    `max_noise_bias`: without noise compensation, a column whose noise variance exceeds this share of
    its variance is flagged (errors-in-variables: least squares shrinks its coefficient by about that share).
    `friction_band_rad_s`: below this speed friction is not f sign(qd) (0.1 rad/s); a record
    that spends more than `max_slow_share` of its valid samples there, or never leaves it, is flagged.
    `min_peak_to_noise`: peak speed and acceleration must exceed their noise by this factor.
    """

    min_rows: int = 50
    max_condition: float = 100.0
    max_relative_half_width: float = 0.25
    min_column_snr: float = 3.0
    max_noise_bias: float = 0.01
    friction_band_rad_s: float = 0.1
    max_slow_share: float = 0.5
    min_peak_to_noise: float = 10.0


@dataclass(frozen=True)
class Excitation:
    """What the record reached, against what its noise allows (per joint where the arrays are per joint)."""

    peak_speed_rad_s: np.ndarray
    speed_noise_rad_s: np.ndarray
    peak_accel_rad_s2: np.ndarray
    accel_noise_rad_s2: np.ndarray
    slow_share: np.ndarray
    friction_band_rad_s: float
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class LinearFit:
    """Estimates with OLS and block-bootstrap uncertainty, residual statistics and warnings.

    `half_width_95` comes from the bootstrap percentiles. `warnings` are whole-fit; `parameter_warnings`
    maps a parameter name to why the data may not identify it; `unreliable` lists those names.
    `noise_compensated` says whether the regressor's noise covariance was taken out of the fit.
    """

    names: tuple[str, ...]
    values: np.ndarray
    half_width_95: np.ndarray
    std_error_ols: np.ndarray
    std_error_bootstrap: np.ndarray
    residual_rms: float
    residual_lag1_autocorr: float
    rows_used: int
    rows_total: int
    condition_number: float
    column_snr: np.ndarray
    excitation: Excitation | None
    warnings: tuple[str, ...]
    parameter_warnings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    noise_compensated: bool = False

    @property
    def unreliable(self) -> tuple[str, ...]:
        return tuple(self.parameter_warnings)

    def value(self, name: str) -> float:
        return float(self.values[self.names.index(name)])

    def as_dict(self) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.names, self.values)}


def select_rows(
    qd: np.ndarray,
    valid: np.ndarray,
    window_samples: int,
    selection: RowSelection,
    tau: np.ndarray | None = None,
    torque_cap_nm: float | np.ndarray | None = None,
) -> np.ndarray:
    """Mask of samples that are valid, moving across the whole derivative window, fast, and unsaturated."""
    speed = np.where(valid, np.abs(qd), 0.0)
    mask = valid & (
        minimum_filter1d(speed, size=window_samples, axis=0, mode="constant", cval=0.0) >= selection.moving_speed_rad_s
    )
    mask &= speed >= selection.slow_speed_rad_s
    if tau is not None:
        torque = np.asarray(tau, dtype=np.float64)
        mask &= np.isfinite(torque)
        if torque_cap_nm is not None:
            mask &= np.abs(np.nan_to_num(torque)) < selection.torque_cap_fraction * np.asarray(torque_cap_nm)
    return mask


def weigh_joints(weights: np.ndarray, regressor: np.ndarray, torque: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares across joints: each joint's equations, regressor (..., J, p) and torque (..., J),
    scaled by that joint's weight (J,), e.g. 1 / its residual noise."""
    weights = np.asarray(weights, dtype=float)
    return regressor * weights[:, None], torque * weights


def excitation(
    qd: np.ndarray,
    qdd: np.ndarray,
    valid: np.ndarray,
    speed_noise_rad_s: float | np.ndarray,
    accel_noise_rad_s2: float | np.ndarray,
    limits: FitThresholds = FitThresholds(),
    names: Sequence[str] | None = None,
) -> Excitation:
    """Peak speed and acceleration against their noise, and the share of samples in the friction band."""
    qd2, qdd2, ok = (np.atleast_2d(np.asarray(a).T).T for a in (qd, qdd, valid))
    labels = list(names) if names is not None else [f"joint {j}" for j in range(qd2.shape[1])]
    speed = np.where(ok, np.abs(qd2), 0.0)
    accel = np.where(ok, np.abs(qdd2), 0.0)
    peak_v, peak_a = speed.max(axis=0), accel.max(axis=0)
    band = limits.friction_band_rad_s
    slow = (ok & (speed < band)).sum(axis=0) / np.maximum(ok.sum(axis=0), 1)
    sv = np.broadcast_to(np.asarray(speed_noise_rad_s, dtype=float), peak_v.shape)
    sa = np.broadcast_to(np.asarray(accel_noise_rad_s2, dtype=float), peak_a.shape)
    notes = []
    for j, label in enumerate(labels):
        if peak_v[j] < limits.min_peak_to_noise * sv[j]:
            notes.append(
                f"{label}: peak speed {peak_v[j]:.3g} rad/s is under {limits.min_peak_to_noise:g}x "
                f"its noise {sv[j]:.2g} rad/s"
            )
        if peak_a[j] < limits.min_peak_to_noise * sa[j]:
            notes.append(
                f"{label}: peak acceleration {peak_a[j]:.3g} rad/s^2 is under "
                f"{limits.min_peak_to_noise:g}x its noise {sa[j]:.2g} rad/s^2"
            )
        if peak_v[j] < 2 * band:
            notes.append(
                f"{label}: never faster than {peak_v[j]:.3g} rad/s, near the {band:g} rad/s band where "
                "friction is not f sign(qd)"
            )
        if slow[j] > limits.max_slow_share:
            notes.append(
                f"{label}: {slow[j]:.0%} of samples are slower than {band:g} rad/s, where friction is not f sign(qd)"
            )
    return Excitation(peak_v, sv.copy(), peak_a, sa.copy(), slow, band, tuple(notes))


def condition_number(phi: np.ndarray) -> float:
    """Condition number of the regressor with each column scaled to unit norm (zero columns left out)."""
    norms = np.linalg.norm(phi, axis=0)
    keep = norms > 0
    if not keep.any():
        return float("inf")
    s = np.linalg.svd(phi[:, keep] / norms[keep], compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")


def _solve(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    return np.linalg.lstsq(gram, rhs, rcond=None)[0]


def _block_bootstrap(
    y: np.ndarray, x: np.ndarray, time_index: np.ndarray, noise_cov: np.ndarray | None, settings: BootstrapSettings
) -> np.ndarray:
    """Refits on resampled contiguous blocks; per-block normal equations make each refit a small solve.

    `x` is column-scaled already; `noise_cov` (in the same scaling) is subtracted per row as in the fit.
    """
    edges = np.linspace(time_index.min(), time_index.max() + 1, settings.blocks + 1)
    block = np.clip(np.searchsorted(edges, time_index, side="right") - 1, 0, settings.blocks - 1)
    p = x.shape[1]
    gram = np.zeros((settings.blocks, p, p))
    rhs = np.zeros((settings.blocks, p))
    for b in range(settings.blocks):
        xb = x[block == b]
        gram[b], rhs[b] = xb.T @ xb, xb.T @ y[block == b]
        if noise_cov is not None:
            gram[b] -= len(xb) * noise_cov
    rng = np.random.default_rng(settings.seed)
    counts = np.stack(
        [
            np.bincount(rng.integers(0, settings.blocks, settings.blocks), minlength=settings.blocks)
            for _ in range(settings.resamples)
        ]
    )
    a = np.einsum("rb,bij->rij", counts, gram)
    b = np.einsum("rb,bi->ri", counts, rhs)
    try:  # all refits in one batched LU solve; a singular resample falls back to least squares one by one
        return np.linalg.solve(a, b[..., None])[..., 0]
    except np.linalg.LinAlgError:
        return np.stack([_solve(ai, bi) for ai, bi in zip(a, b)])


def fit_linear(
    y: np.ndarray,
    phi: np.ndarray,
    names: Sequence[str],
    *,
    rows: np.ndarray | None = None,
    time_index: np.ndarray | None = None,
    noise_covariance: np.ndarray | None = None,
    compensate_noise: bool = False,
    excitation_: Excitation | None = None,
    bootstrap: BootstrapSettings = BootstrapSettings(),
    limits: FitThresholds = FitThresholds(),
    joint: str | None = None,
) -> LinearFit:
    """Ordinary least squares of y on phi over `rows`, with block-bootstrap 95 % intervals and warnings.

    `time_index` gives each row's sample number (stacked multi-joint rows share one), so bootstrap blocks
    stay contiguous in time. `noise_covariance` (P x P, per row, see `column_noise_covariance`) drives
    the per-column excitation checks (skipped without it); `compensate_noise` also subtracts it from the
    normal equations (bias-compensated least squares), which removes the errors-in-variables shrinkage
    that noisy accelerations cause in inertial parameters.
    """
    y_all = np.asarray(y, dtype=np.float64).ravel()
    phi_all = np.asarray(phi, dtype=np.float64)
    names = tuple(names)
    if phi_all.ndim != 2 or phi_all.shape != (len(y_all), len(names)):
        raise DataError(
            f"regressor shape {phi_all.shape} does not match {len(y_all)} rows x {len(names)} names", joint=joint
        )
    mask = np.ones(len(y_all), dtype=bool) if rows is None else np.asarray(rows, dtype=bool).ravel()
    mask = mask & np.isfinite(y_all) & np.isfinite(phi_all).all(axis=1)
    tidx = np.arange(len(y_all)) if time_index is None else np.asarray(time_index).ravel()
    n = int(mask.sum())
    if n < max(limits.min_rows, len(names) + 1):
        raise DataError(
            f"only {n} usable rows of {len(y_all)} (need {max(limits.min_rows, len(names) + 1)}): "
            "the record does not move fast enough, long enough, or is saturated",
            joint=joint,
        )
    yy, xx, tt = y_all[mask], phi_all[mask], tidx[mask]
    scale = np.linalg.norm(xx, axis=0)
    scale[scale == 0] = 1.0
    xs = xx / scale
    notes: list[str] = []
    cov_s = None
    if noise_covariance is not None and compensate_noise:  # bias-compensated least squares: E[X'X] = X0'X0 + n Sigma
        cov_s = np.asarray(noise_covariance, dtype=float) / np.outer(scale, scale)
        gram = xs.T @ xs
        share = np.diag(cov_s) * n / np.maximum(np.diag(gram), 1e-300)
        if np.all(share < 0.5) and np.linalg.eigvalsh(gram - n * cov_s).min() > 0:
            theta = _solve(gram - n * cov_s, xs.T @ yy) / scale
        else:
            notes.append("errors-in-variables compensation skipped: the noise is too large a share of a column")
            cov_s = None
    if cov_s is None:
        theta = _solve(xs.T @ xs, xs.T @ yy) / scale
    resid = yy - xx @ theta
    dof = max(n - len(names), 1)
    cov = resid @ resid / dof * np.linalg.pinv(xs.T @ xs) / np.outer(scale, scale)
    se_ols = np.sqrt(np.clip(np.diag(cov), 0, None))
    boots = _block_bootstrap(yy, xs, tt, cov_s, bootstrap) / scale
    lo, hi = np.percentile(boots, [2.5, 97.5], axis=0)
    half = (hi - lo) / 2
    se_boot = boots.std(axis=0, ddof=1)
    r0 = resid - resid.mean()
    lag1 = float(r0[1:] @ r0[:-1] / (r0 @ r0)) if r0 @ r0 > 0 else 0.0
    cond = condition_number(xx)

    col_rms = np.sqrt(np.mean(xx**2, axis=0))
    col_var = xx.var(axis=0)
    snr = np.full(len(names), np.inf)
    per: dict[str, list[str]] = {}
    if noise_covariance is not None:
        noise = column_noise_std(np.asarray(noise_covariance, dtype=float))
        snr = np.where(noise > 0, col_rms / np.where(noise > 0, noise, 1.0), np.inf)
        for i, name in enumerate(names):
            if snr[i] < limits.min_column_snr:
                per.setdefault(name, []).append(f"its column is excited only {snr[i]:.2g}x above its noise")
            elif cov_s is None and col_var[i] > 0 and noise[i] ** 2 > limits.max_noise_bias * col_var[i]:
                per.setdefault(name, []).append(
                    f"noise is {noise[i] ** 2 / col_var[i]:.1%} of its column's variance "
                    "(least squares shrinks it by about that much)"
                )
    for i, name in enumerate(names):
        if col_rms[i] == 0:
            per.setdefault(name, []).append("its column is zero on the used rows")
        elif half[i] > limits.max_relative_half_width * abs(theta[i]):
            per.setdefault(name, []).append(
                f"95 % half-width {half[i]:.3g} is over "
                f"{limits.max_relative_half_width:.0%} of its value {theta[i]:.3g}"
            )
    notes = list(excitation_.warnings if excitation_ is not None else ()) + notes
    if cond > limits.max_condition:
        notes.append(f"condition number {cond:.3g} of the column-normalized regressor exceeds {limits.max_condition:g}")
    notes += [f"{name}: {why}" for name, reasons in per.items() for why in reasons]
    return LinearFit(
        names,
        theta,
        half,
        se_ols,
        se_boot,
        float(np.sqrt(np.mean(resid**2))),
        lag1,
        n,
        len(y_all),
        cond,
        snr,
        excitation_,
        tuple(notes),
        {k: tuple(v) for k, v in per.items()},
        cov_s is not None,
    )


def column_noise_covariance(
    phi_clean: np.ndarray, phi_noisy: Sequence[np.ndarray], rows: np.ndarray | None = None
) -> np.ndarray:
    """Per-row covariance of the regressor's noise, from draws of the regressor with one more dose of noise."""
    clean = np.asarray(phi_clean)
    keep = np.ones(len(clean), dtype=bool) if rows is None else np.asarray(rows, dtype=bool).ravel()
    diffs = [np.asarray(p)[keep] - clean[keep] for p in phi_noisy]
    diffs = [d[np.isfinite(d).all(axis=1)] for d in diffs]
    total = sum(d.T @ d for d in diffs)
    count = sum(len(d) for d in diffs)
    if count == 0:
        raise DataError("no finite rows to measure the regressor noise on")
    return total / count


def column_noise_std(noise_covariance: np.ndarray) -> np.ndarray:
    """Each column's noise standard deviation."""
    return np.sqrt(np.clip(np.diag(noise_covariance), 0, None))


# --- open-loop validation on a held-out torque record -------------------------------------------------
