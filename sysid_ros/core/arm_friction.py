"""Joint friction a real arm shows, in the whole-arm regression: per joint a torque-sensor offset, viscous
friction, and a smooth Coulomb term c tanh(qd / v_s) whose velocity scale v_s is found per joint by a 1-D
search (bounded Brent on log v_s, coordinate-wise over the joints), on top of the rigid-body base parameters.

For a fixed v_s the torque is linear in everything else (`arm_regressor`), so the search only swaps one
joint's Coulomb column: each trial updates one row and column of the normal equations (no new regressor).
The final fit at the chosen v_s is `fit_arm` (block-bootstrap intervals, noise compensation) on every valid
sample: a smooth friction model holds at low speed too, so slow samples are not dropped. The intervals of
the other terms are conditional on the chosen v_s (reported without an interval of its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import mujoco
import numpy as np
from scipy.optimize import minimize_scalar

from .arm_regressor import JOINT_TERMS, ArmFit, ArmRegressor, BaseParameters, fit_arm, structural_base_parameters
from .derivatives import Derivatives
from .errors import DataError
from .regression import BootstrapSettings, Limits, RowSelection

VELOCITY_SCALE_BOUNDS_RAD_S = (0.002, 1.0)
"""Where v_s is searched: from nearly a sign (2 mrad/s) to a friction that is still rising at 1 rad/s."""
FRICTION_TERMS = ("offset", "viscous", "coulomb", "armature")


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

    def predicted_torque(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        return self.fit.predicted_torque(self.arm, q, qd, qdd)


def concatenate(parts: Sequence[tuple[Derivatives, np.ndarray]]) -> tuple[Derivatives, np.ndarray]:
    """Derivatives and torques of several records as one (same sample period and filter)."""
    if not parts:
        raise DataError("no torque record to fit")
    first = parts[0][0]
    if len(parts) == 1:
        return parts[0]
    noise = np.nanmean([np.broadcast_to(np.asarray(d.position_noise_rad, dtype=float), first.q.shape[1:])
                        for d, _ in parts], axis=0)
    raw = None if any(d.position_raw is None for d, _ in parts) else np.concatenate([d.position_raw for d, _ in parts])
    joined = replace(first, q=np.concatenate([d.q for d, _ in parts]), qd=np.concatenate([d.qd for d, _ in parts]),
                     qdd=np.concatenate([d.qdd for d, _ in parts]),
                     valid=np.concatenate([d.valid for d, _ in parts]), position_noise_rad=noise, position_raw=raw)
    return joined, np.concatenate([t for _, t in parts])


def _search_scales(arm: ArmRegressor, base: BaseParameters, deriv: Derivatives, tau: np.ndarray,
                   start_rad_s: float, bounds: tuple[float, float], sweeps: int) -> tuple[np.ndarray, int]:
    """Per joint v_s minimising the training residual, by coordinate-wise bounded 1-D searches."""
    ok = deriv.valid.all(axis=1) & np.isfinite(tau).all(axis=1)
    if ok.sum() < 50:
        raise DataError(f"only {int(ok.sum())} samples with valid derivatives and torques on every joint")
    qd, y = deriv.qd[ok], tau[ok]
    w = base.reduce(arm.compute(deriv.q[ok], qd, deriv.qdd[ok]))  # (n, nv, r)
    scale = np.linalg.norm(w.reshape(-1, base.rank), axis=0)
    scale[scale == 0] = 1.0
    w = w / scale
    gram = np.einsum("nja,njb->ab", w, w)
    rhs = np.einsum("nja,nj->a", w, y)
    yy = float(np.sum(y ** 2))
    position = {int(i): k for k, i in enumerate(base.independent)}
    scales = np.full(arm.nv, start_rad_s)
    evaluations = 0

    def swapped(j: int, c: int, v: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        col = np.tanh(qd[:, j] / v) / scale[c]
        g = gram.copy()
        b = rhs.copy()
        g_c = w[:, j, :].T @ col  # the column lives on joint j's equations only
        g_c[c] = col @ col
        g[c, :], g[:, c] = g_c, g_c
        b[c] = y[:, j] @ col
        return g, b, col

    for _ in range(sweeps):
        for j, joint in enumerate(arm.joint_names):
            c = position.get(arm.names.index(f"{joint}.coulomb"))
            if c is None:
                continue

            def rss(log_v: float) -> float:
                nonlocal evaluations
                evaluations += 1
                g, b, _ = swapped(j, c, float(np.exp(log_v)))
                theta = np.linalg.lstsq(g, b, rcond=None)[0]
                return yy - float(b @ theta)

            best = minimize_scalar(rss, bounds=tuple(np.log(bounds)), method="bounded", options={"xatol": 0.01})
            scales[j] = float(np.exp(best.x))
            gram, rhs, col = swapped(j, c, scales[j])
            w[:, j, c] = col
    return scales, evaluations


def fit_arm_friction(model: mujoco.MjModel, deriv: Derivatives, tau: np.ndarray, *,
                     bounds: tuple[float, float] = VELOCITY_SCALE_BOUNDS_RAD_S, start_rad_s: float = 0.05,
                     sweeps: int = 2, bootstrap: BootstrapSettings = BootstrapSettings(),
                     limits: Limits = Limits()) -> ArmFrictionFit:
    """Rigid-body base parameters plus per joint offset, viscous, smooth Coulomb (v_s searched) and armature."""
    torque = np.asarray(tau, dtype=float)
    arm = ArmRegressor(model, JOINT_TERMS, coulomb_band_rad_s=start_rad_s)
    if deriv.q.ndim != 2 or torque.shape != deriv.q.shape or deriv.q.shape[1] != arm.nv:
        raise DataError(f"need (N, {arm.nv}) positions and torques; got {deriv.q.shape} and {torque.shape}")
    base = structural_base_parameters(arm)
    scales, evaluations = _search_scales(arm, base, deriv, torque, start_rad_s, bounds, sweeps)
    arm = ArmRegressor(model, JOINT_TERMS, coulomb_band_rad_s=scales)
    fit = fit_arm(arm, deriv, torque, base, selection=RowSelection(moving_speed_rad_s=0.0, slow_speed_rad_s=0.0),
                  bootstrap=bootstrap, limits=limits)
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
    return ArmFrictionFit(arm, fit, tuple(joints), evaluations)
