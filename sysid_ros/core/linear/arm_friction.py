"""Joint friction a real arm shows, in the whole-arm regression: per joint a torque-sensor offset, viscous
friction, and a smooth Coulomb term c tanh(qd / v_s) whose velocity scale v_s is found per joint by a 1-D
search (bounded Brent on log v_s, coordinate-wise over the joints), on top of the rigid-body base parameters.

For a fixed v_s the torque is linear in everything else (`arm_regressor`), so the search only swaps one
joint's Coulomb column: each trial updates one row and column of the normal equations (no new regressor).
The search uses at most `SEARCH_ROWS` evenly spaced rows (their Coulomb columns filtered on the whole record);
the final fit at the chosen v_s is `fit_arm` (block-bootstrap intervals, noise compensation) on every valid
sample: a smooth friction model holds at low speed too, so slow samples are not dropped. v_s is reported
without an interval of its own; the other terms' intervals are widened to the spread of block resamples that
repeat the search (`SEARCH_RESAMPLES`), so they carry the search's uncertainty too.

The measured torque is smoothed by the acceleration filter's kernel K. The rigid-body terms commute with K
well enough, but a friction that rises within tens of mrad/s does not: tanh(K[v] / v_s) is not K[tanh(v / v_s)]
near a reversal, and fitting the former reads a sharp rise as a wide one (measured on the logged iiwa:
v_s 1.3-2.8x the truth). Given the record's own velocity (`friction_velocity`, the measured joint velocity),
the Coulomb column is K[tanh(v / v_s)], filtered exactly like the torque.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import mujoco
import numpy as np
import scipy.linalg
from scipy.optimize import minimize_scalar

from ..errors import DataError
from ..signals import Derivatives, smooth_like_acceleration
from .arm_regressor import (
    JOINT_TERMS,
    ArmFit,
    ArmRegressor,
    BaseParameters,
    fit_arm,
    structural_base_parameters,
    with_coulomb,
)
from .regression import BootstrapSettings, FitThresholds, RowSelection

VELOCITY_SCALE_BOUNDS_RAD_S = (0.002, 1.0)
"""Where v_s is searched: from nearly a sign (2 mrad/s) to a friction that is still rising at 1 rad/s."""
FRICTION_TERMS = ("offset", "viscous", "coulomb", "armature")
GRID_POINTS = 14
"""Log-spaced trial v_s (a factor ~1.6 apart) before Brent refines the best one between its neighbours."""


SEARCH_ROWS = 4000
"""Rows the v_s search uses at most, evenly spaced: the rows are derivatives through a tens-of-ms filter, so at
1 kHz neighbours nearly repeat each other (the final fit uses every row; `bench/bench_arm_friction_speed.py`)."""

SEARCH_RESAMPLES = 20
"""Block resamples that repeat the v_s search, so the intervals carry the search's own uncertainty (measured on
the simulated iiwa's periodic record, 40 seeds: intervals conditional on v_s covered Coulomb and viscous terms
70-90 %, 0.5-0.7x their errors' spread; see `bench/bench_periodic_coverage.py`)."""


def _widened_by_search(fit: ArmFit, search: tuple, bootstrap: BootstrapSettings, resamples: int) -> tuple[ArmFit, int]:
    """`fit` with each half-width at least 1.96 standard deviations of the base parameters over block resamples
    that repeat the v_s search (one sweep from the chosen v_s); and the search's trials."""
    arm, base, deriv, torque, scales, bounds, velocity, weights, w_all = search
    n = len(deriv.q)
    block = np.minimum(np.arange(n) * bootstrap.blocks // n, bootstrap.blocks - 1)
    rng = np.random.default_rng(bootstrap.seed)
    thetas, evaluations = [], 0
    for _ in range(resamples):
        counts = np.bincount(rng.integers(0, bootstrap.blocks, bootstrap.blocks), minlength=bootstrap.blocks)
        _, _, more, theta = _search_scales(
            arm, base, deriv, torque, scales, bounds, 1, velocity, weights, w_all, row_counts=counts[block]
        )
        thetas.append(theta)
        evaluations += more
    half = np.maximum(fit.fit.half_width_95, 1.96 * np.std(thetas, axis=0, ddof=1))
    return replace(fit, fit=replace(fit.fit, half_width_95=half)), evaluations


@dataclass(frozen=True)
class JointFriction:
    """One joint's friction and offset: (value, 95 % half-width) per term, None when the data identify the
    term only in combination with others; `velocity_scale_rad_s` is v_s of tanh(qd / v_s)."""

    joint: str
    velocity_scale_rad_s: float
    terms: dict[str, tuple[float, float] | None]
    on_search_bound: bool = False

    def value(self, term: str) -> float:
        got = self.terms.get(term)
        return float("nan") if got is None else got[0]


@dataclass(frozen=True, eq=False)
class ArmFrictionFit:
    """The whole-arm regression with smooth friction and offsets: the fit, its regressor (with the fitted v_s)
    and the per-joint report."""

    arm: ArmRegressor
    fit: ArmFit
    joints: tuple[JointFriction, ...]
    search_evaluations: int
    filtered_friction: bool  # the Coulomb column is K[tanh(v / v_s)] of a given velocity

    def predicted_torque(
        self, deriv: Derivatives, friction_velocity: np.ndarray | None = None, regressor: np.ndarray | None = None
    ) -> np.ndarray:
        """Torque (N, nv) on a record's derivatives (NaN where they are not valid); give the record's
        `friction_velocity` when the fit had one, and its `regressor` W on the valid rows when computed
        already (any Coulomb band: the fit's replaces it)."""
        out = np.full(deriv.q.shape, np.nan)
        ok = deriv.valid.all(axis=1)
        coulomb = None
        if self.filtered_friction:
            if friction_velocity is None:
                raise DataError("this fit filters its friction like the torque: give the record's velocity")
            coulomb = coulomb_columns(deriv, friction_velocity, self.arm.coulomb_band_rad_s)[ok]
        out[ok] = self.fit.predicted_torque(self.arm, deriv.q[ok], deriv.qd[ok], deriv.qdd[ok], coulomb, regressor)
        return out


def coulomb_columns(deriv: Derivatives, velocity: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """K[tanh(v / v_s)] per joint: the Coulomb term filtered like the torque (NaN at the record's edges)."""
    return smooth_like_acceleration(deriv, np.tanh(np.asarray(velocity, dtype=float) / np.asarray(scales)))


def friction_loss_columns(deriv: Derivatives, velocity: np.ndarray, bands: np.ndarray) -> np.ndarray:
    """K[clip(v / band)] per joint: MuJoCo's friction loss over a band (`sim.friction`) filtered like the torque
    (NaN at the record's edges)."""
    return smooth_like_acceleration(deriv, np.clip(np.asarray(velocity, dtype=float) / np.asarray(bands), -1.0, 1.0))


def concatenate(parts: Sequence[tuple[Derivatives, np.ndarray]]) -> tuple[Derivatives, np.ndarray]:
    """Derivatives and torques of several records as one (same sample period and filter)."""
    if not parts:
        raise DataError("no torque record to fit")
    first = parts[0][0]
    if len(parts) == 1:
        return parts[0]
    noise = np.nanmean(
        [np.broadcast_to(np.asarray(d.position_noise_rad, dtype=float), first.q.shape[1:]) for d, _ in parts], axis=0
    )
    raw = None if any(d.position_raw is None for d, _ in parts) else np.concatenate([d.position_raw for d, _ in parts])
    joined = replace(
        first,
        q=np.concatenate([d.q for d, _ in parts]),
        qd=np.concatenate([d.qd for d, _ in parts]),
        qdd=np.concatenate([d.qdd for d, _ in parts]),
        valid=np.concatenate([d.valid for d, _ in parts]),
        position_noise_rad=noise,
        position_raw=raw,
    )
    return joined, np.concatenate([t for _, t in parts])


def _solve(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    try:
        return scipy.linalg.solve(gram, rhs, assume_a="pos")
    except (np.linalg.LinAlgError, ValueError):
        return np.linalg.lstsq(gram, rhs, rcond=None)[0]


def _search_rows(ok: np.ndarray) -> np.ndarray:
    """Indices of at most `SEARCH_ROWS` evenly spaced rows where `ok`."""
    rows = np.flatnonzero(ok)
    if len(rows) <= SEARCH_ROWS:
        return rows
    return rows[np.linspace(0, len(rows) - 1, SEARCH_ROWS).round().astype(int)]


def _search_scales(
    arm: ArmRegressor,
    base: BaseParameters,
    deriv: Derivatives,
    tau: np.ndarray,
    start: np.ndarray,
    bounds: tuple[float, float],
    sweeps: int,
    velocity: np.ndarray | None,
    weights: np.ndarray,
    w_all: np.ndarray,
    row_counts: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Per joint v_s minimising the training residual (joint j's equations weighted by weights[j]), by
    coordinate-wise 1-D searches on `SEARCH_ROWS` rows at most; returns v_s, each joint's unweighted residual RMS
    there, the trials and the base parameters there. `row_counts` (N,) counts each row that many times (a
    bootstrap resample)."""
    valid = deriv.valid.all(axis=1)
    ok = valid & np.isfinite(tau).all(axis=1)
    smoothed = None if velocity is None else coulomb_columns(deriv, velocity, start)  # on the whole record
    if smoothed is not None:
        ok &= np.isfinite(smoothed).all(axis=1)
    if ok.sum() < 50:
        raise DataError(f"only {int(ok.sum())} samples with valid derivatives and torques on every joint")
    rows = _search_rows(ok)
    qd = deriv.qd[rows]
    root = np.ones(len(rows)) if row_counts is None else np.sqrt(np.asarray(row_counts, dtype=float)[rows])
    factor = root[:, None] * weights  # (n, nv): each equation's weight
    # the base regressor on these rows (a copy), every joint's Coulomb column at `start` (w_all's are at the
    # first pass's v_s, not this pass's start); stored (nv, n, r), each joint's equations contiguous
    w = with_coulomb(
        arm, base, w_all[(np.cumsum(valid) - 1)[rows]], np.tanh(qd / start) if smoothed is None else smoothed[rows]
    )
    w = np.ascontiguousarray((w * factor[..., None]).transpose(1, 0, 2))
    y = np.ascontiguousarray((tau[rows] * factor).T)  # (nv, n)
    flat = w.reshape(-1, base.rank)
    gram = flat.T @ flat
    scale = np.sqrt(np.diag(gram))
    scale[scale == 0] = 1.0
    gram /= np.outer(scale, scale)
    w /= scale
    rhs = flat.T @ y.ravel()
    yy = float(y.ravel() @ y.ravel())
    position = {int(i): k for k, i in enumerate(base.independent)}
    scales = np.array(start, dtype=float)
    evaluations = 0

    def column(j: int, c: int, v: float | np.ndarray) -> np.ndarray:
        """Joint j's weighted, scaled Coulomb column c at v_s = v, (n,), or one column per v_s of an array,
        (n, len(v))."""
        v = np.asarray(v, dtype=float)
        if velocity is None:
            col = np.tanh(np.multiply.outer(qd[:, j], 1.0 / v))
        else:
            col = smooth_like_acceleration(deriv, np.tanh(np.multiply.outer(velocity[:, j], 1.0 / v)))[rows]
        return col * (factor[:, j] / scale[c]).reshape((-1,) + (1,) * (col.ndim - 1))

    def swapped(j: int, c: int, v: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        col = column(j, c, v)
        g_c = w[j].T @ col  # the column lives on joint j's equations only
        g_c[c] = col @ col
        g = gram.copy()
        g[c, :], g[:, c] = g_c, g_c
        b = rhs.copy()
        b[c] = y[j] @ col
        return g, b, col

    def grid_rss(j: int, c: int, vs: np.ndarray) -> np.ndarray:
        """The residual sum of squares at every v_s of `vs` (joint j's Coulomb column c swapped), one batched solve."""
        cols = column(j, c, vs)
        g_c = w[j].T @ cols  # (r, len(vs))
        g_c[c] = np.sum(cols * cols, axis=0)
        g = np.repeat(gram[None], len(vs), axis=0)
        g[:, c, :], g[:, :, c] = g_c.T, g_c.T
        b = np.repeat(rhs[None], len(vs), axis=0)
        b[:, c] = y[j] @ cols
        try:
            theta = np.linalg.solve(g, b[..., None])[..., 0]
        except np.linalg.LinAlgError:
            theta = np.stack([_solve(gk, bk) for gk, bk in zip(g, b)])
        return yy - np.sum(b * theta, axis=1)

    for _ in range(sweeps):
        for j, joint in enumerate(arm.joint_names):
            c = position.get(arm.names.index(f"{joint}.coulomb"))
            if c is None:
                continue
            tried: dict[float, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

            def rss(log_v: float, j: int = j, c: int = c, tried: dict = tried) -> float:
                nonlocal evaluations
                evaluations += 1
                g, b, _ = tried[log_v] = swapped(j, c, float(np.exp(log_v)))
                return yy - float(b @ _solve(g, b))

            grid = np.linspace(*np.log(bounds), GRID_POINTS)  # the profile can have several minima: bracket first
            k = int(np.argmin(grid_rss(j, c, np.exp(grid))))
            evaluations += len(grid)
            best = minimize_scalar(
                rss,
                bounds=(grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]),
                method="bounded",
                options={"xatol": 0.01},
            )
            scales[j] = float(np.exp(best.x))
            gram, rhs, col = tried[best.x] if best.x in tried else swapped(j, c, scales[j])
            w[j, :, c] = col
    theta = _solve(gram, rhs)
    rms = np.sqrt(np.sum((y - w @ theta) ** 2, axis=1) / np.sum(root**2)) / weights
    return scales, rms, evaluations, theta / scale


def fit_arm_friction(
    model: mujoco.MjModel,
    deriv: Derivatives,
    tau: np.ndarray,
    *,
    bounds: tuple[float, float] = VELOCITY_SCALE_BOUNDS_RAD_S,
    start_rad_s: float = 0.05,
    sweeps: int = 2,
    bootstrap: BootstrapSettings = BootstrapSettings(),
    limits: FitThresholds = FitThresholds(),
    friction_velocity: np.ndarray | None = None,
    search_resamples: int = SEARCH_RESAMPLES,
) -> ArmFrictionFit:
    """Rigid-body base parameters plus per joint offset, viscous, smooth Coulomb (v_s searched) and armature;
    with `friction_velocity` (N, nv), the measured velocity, the Coulomb term is filtered like the torque.
    `search_resamples` block resamples repeat the v_s search (0: intervals conditional on the chosen v_s)."""
    torque = np.asarray(tau, dtype=float)
    arm = ArmRegressor(model, JOINT_TERMS, coulomb_band_rad_s=start_rad_s)
    if deriv.q.ndim != 2 or torque.shape != deriv.q.shape or deriv.q.shape[1] != arm.nv:
        raise DataError(f"need (N, {arm.nv}) positions and torques; got {deriv.q.shape} and {torque.shape}")
    base = structural_base_parameters(arm)
    velocity = None if friction_velocity is None else np.asarray(friction_velocity, dtype=float)
    if velocity is not None and velocity.shape != torque.shape:
        raise DataError(f"friction_velocity must be {torque.shape}; got {velocity.shape}")
    # joints' residuals differ by orders of magnitude (shoulder N m, wrist tens of mN m): a first pass finds
    # them, the second weights each joint's equations by 1 / its residual RMS (so the shoulder's error does
    # not set the wrist's parameters) and searches again from there
    valid = deriv.valid.all(axis=1)
    w_valid = arm.compute(deriv.q[valid], deriv.qd[valid], deriv.qdd[valid])
    w_all = base.reduce(w_valid)
    scales, rms, evaluations, _ = _search_scales(
        arm, base, deriv, torque, np.full(arm.nv, start_rad_s), bounds, sweeps, velocity, np.ones(arm.nv), w_all
    )
    weights = 1.0 / np.maximum(rms, 1e-9 * rms.max(initial=1.0))
    scales, rms, more, _ = _search_scales(arm, base, deriv, torque, scales, bounds, 1, velocity, weights, w_all)
    arm = ArmRegressor(model, JOINT_TERMS, coulomb_band_rad_s=scales)
    fit = fit_arm(
        arm,
        deriv,
        torque,
        base,
        selection=RowSelection(moving_speed_rad_s=0.0, slow_speed_rad_s=0.0),
        bootstrap=bootstrap,
        limits=limits,
        joint_weights=weights,
        regressor=w_valid,
        coulomb=None if velocity is None else coulomb_columns(deriv, velocity, scales),
    )
    evaluations += more
    if search_resamples > 0 and base.rank:
        fit, more = _widened_by_search(
            fit, (arm, base, deriv, torque, scales, bounds, velocity, weights, w_all), bootstrap, search_resamples
        )
        evaluations += more
    position = {int(i): k for k, i in enumerate(base.independent)}
    alone = np.abs(base.beta).max(axis=1, initial=0.0) == 0 if base.rank else np.zeros(0, dtype=bool)
    joints = []
    lo, hi = np.log(bounds)
    for j, joint in enumerate(arm.joint_names):
        terms: dict[str, tuple[float, float] | None] = {}
        for term in FRICTION_TERMS:
            k = position.get(arm.names.index(f"{joint}.{term}"))
            ok = k is not None and alone[k]
            terms[term] = (float(fit.fit.values[k]), float(fit.fit.half_width_95[k])) if ok else None
        edge = min(np.log(scales[j]) - lo, hi - np.log(scales[j])) < 0.05
        joints.append(JointFriction(joint, float(scales[j]), terms, bool(edge)))
    return ArmFrictionFit(arm, fit, tuple(joints), evaluations, velocity is not None)
