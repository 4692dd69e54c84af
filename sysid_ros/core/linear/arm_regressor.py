"""Whole-arm inverse dynamics as tau = W(q, qd, qdd) theta, computed with MuJoCo alone (no Pinocchio).

theta holds 10 standard inertial parameters per body, in Pinocchio's order (m, m cx, m cy, m cz, Ixx,
Ixy, Iyy, Ixz, Iyz, Izz), with c the centre of mass and I the inertia about the body frame's origin, both
in the body frame; then per joint a viscous, a Coulomb (tanh(qd/band)), an armature and an offset term.
Each body's columns come from the Newton-Euler equations about its origin: with the origin's linear
acceleration a (gravity included as -g), angular velocity w and acceleration al, all from MuJoCo's
Jacobians and their time derivatives, the body needs the force m a + al x h + w x (w x h) and the moment
I al + w x (I w) + h x a (h = m c), and tau = Jp' force + Jr' moment. The parameters W can identify are
found by QR with column pivoting (base parameters); the rest are reported, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np
import scipy.linalg

from ..errors import DataError, ModelError
from ..signals import Derivatives, same_filter
from ..sim import effort_offsets
from .regression import (
    BootstrapSettings,
    FitThresholds,
    LinearFit,
    RowSelection,
    column_noise_covariance,
    excitation,
    fit_linear,
    select_rows,
    weigh_joints,
)

INERTIAL_NAMES = ("m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
JOINT_TERMS = ("viscous", "coulomb", "armature", "offset")


def _skew(v: np.ndarray) -> np.ndarray:
    """Cross-product matrices of (..., 3) vectors: skew(v) @ x == cross(v, x)."""
    z = np.zeros(v.shape[:-1])
    return np.stack(
        [
            np.stack([z, -v[..., 2], v[..., 1]], -1),
            np.stack([v[..., 2], z, -v[..., 0]], -1),
            np.stack([-v[..., 1], v[..., 0], z], -1),
        ],
        -2,
    )


def _inertia_map(x: np.ndarray) -> np.ndarray:
    """L(x) with I @ x == L(x) @ (Ixx, Ixy, Iyy, Ixz, Iyz, Izz), for (..., 3) vectors."""
    z = np.zeros(x.shape[:-1])
    x0, x1, x2 = x[..., 0], x[..., 1], x[..., 2]
    return np.stack(
        [np.stack([x0, x1, z, x2, z, z], -1), np.stack([z, x0, x1, z, x2, z], -1), np.stack([z, z, z, x0, x1, x2], -1)],
        -2,
    )


def body_inertial_parameters(model: mujoco.MjModel, body: int) -> np.ndarray:
    """The 10 standard parameters of one body from MuJoCo's mass, ipos, iquat and principal inertia."""
    m = float(model.body_mass[body])
    c = np.array(model.body_ipos[body])
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, model.body_iquat[body])
    rot = rot.reshape(3, 3)
    i_com = rot @ np.diag(model.body_inertia[body]) @ rot.T
    i_o = i_com + m * (c @ c * np.eye(3) - np.outer(c, c))
    return np.array([m, *(m * c), i_o[0, 0], i_o[0, 1], i_o[1, 1], i_o[0, 2], i_o[1, 2], i_o[2, 2]])


class ArmRegressor:
    """W(q, qd, qdd) for a fixed-base arm of hinge and slide joints; holds its compiled model and data."""

    def __init__(
        self,
        model: mujoco.MjModel,
        joint_terms: Sequence[str] = JOINT_TERMS,
        coulomb_band_rad_s: float | Sequence[float] = 0.01,
    ) -> None:
        """`coulomb_band_rad_s` is v_s of the Coulomb term tanh(qd / v_s), one for all joints or one per joint
        (0: sign(qd))."""
        bad = [
            mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) or str(j)
            for j in range(model.njnt)
            if int(model.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        ]
        if bad or model.nq != model.nv:
            raise ModelError(f"the arm regressor handles hinge and slide joints only; not {bad}")
        unknown = set(joint_terms) - set(JOINT_TERMS)
        if unknown:
            raise ModelError(f"unknown joint terms {sorted(unknown)}; known: {JOINT_TERMS}")
        self.model = model
        self.data = mujoco.MjData(model)
        self.nv = model.nv
        self.bodies = tuple(range(1, model.nbody))
        self.joint_terms = tuple(joint_terms)
        self.coulomb_band_rad_s = np.broadcast_to(np.asarray(coulomb_band_rad_s, dtype=float), (model.nv,)).copy()
        body_names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}" for b in self.bodies]
        dof_joint = model.dof_jntid
        self.joint_names = tuple(
            mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(dof_joint[d])) or f"dof{d}" for d in range(self.nv)
        )
        self.names = tuple(f"{b}.{p}" for b in body_names for p in INERTIAL_NAMES) + tuple(
            f"{j}.{t}" for j in self.joint_names for t in self.joint_terms
        )
        gravity_off = model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_GRAVITY
        self._gravity = np.zeros(3) if gravity_off else np.array(model.opt.gravity)

    @property
    def n_params(self) -> int:
        return len(self.names)

    def true_parameters(self) -> np.ndarray:
        """theta of the model as compiled: inertials, damping, friction loss (as Coulomb), armature, and the
        effort offset its joint motors' constant bias stands for (`effort_offset`: measured minus applied)."""
        m = self.model
        joint = {
            "viscous": m.dof_damping[:, 0] if m.dof_damping.ndim == 2 else m.dof_damping,
            "coulomb": m.dof_frictionloss,
            "armature": m.dof_armature,
            "offset": effort_offsets(m),
        }
        inertial = [body_inertial_parameters(m, b) for b in self.bodies]
        per_joint = [[float(joint[t][d]) for t in self.joint_terms] for d in range(self.nv)]
        return np.concatenate([np.concatenate(inertial), np.ravel(per_joint)])

    def _kinematics(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per row and body: rotation, Jacobians of the body origin and their time derivatives."""
        n, nb, nv = len(q), len(self.bodies), self.nv
        rot = np.empty((n, nb, 3, 3))
        jp, jr, jpd, jrd = (np.empty((n, nb, 3, nv)) for _ in range(4))
        m, d = self.model, self.data
        for k in range(n):
            d.qpos[:] = q[k]
            d.qvel[:] = qd[k]
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_comVel(m, d)
            for i, b in enumerate(self.bodies):
                mujoco.mj_jacBody(m, d, jp[k, i], jr[k, i], b)
                mujoco.mj_jacDot(m, d, jpd[k, i], jrd[k, i], d.xpos[b], b)
            rot[k] = d.xmat[1:].reshape(nb, 3, 3)
        return rot, jp, jr, jpd, jrd

    def coulomb(self, qd: np.ndarray) -> np.ndarray:
        """The Coulomb columns tanh(qd / v_s) per joint (sign(qd) where v_s is 0), shape of `qd` (N, nv)."""
        band = self.coulomb_band_rad_s
        return np.where(band > 0, np.tanh(qd / np.where(band > 0, band, 1.0)), np.sign(qd))

    def compute(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """W with shape (N, nv, P) for N rows of positions, velocities and accelerations."""
        q, qd, qdd = (np.atleast_2d(np.asarray(a, dtype=np.float64)) for a in (q, qd, qdd))
        if not (q.shape == qd.shape == qdd.shape and q.shape[1] == self.nv):
            raise DataError(f"q, qd, qdd must be (N, {self.nv}); got {q.shape}, {qd.shape}, {qdd.shape}")
        if not (np.isfinite(q).all() and np.isfinite(qd).all() and np.isfinite(qdd).all()):
            raise DataError("q, qd, qdd must be finite; select valid rows first")
        rot, jp, jr, jpd, jrd = self._kinematics(q, qd)
        w = np.einsum("nbij,nj->nbi", jr, qd)
        al = np.einsum("nbij,nj->nbi", jr, qdd) + np.einsum("nbij,nj->nbi", jrd, qd)
        a = np.einsum("nbij,nj->nbi", jp, qdd) + np.einsum("nbij,nj->nbi", jpd, qd) - self._gravity
        jpt, jrt = np.swapaxes(jp, -1, -2), np.swapaxes(jr, -1, -2)
        col_m = np.einsum("nbvi,nbi->nbv", jpt, a)[..., None]
        # first moment h = R h_local: force (skew(al) + skew(w)^2) R h_local, moment -skew(a) R h_local
        sw = _skew(w)
        force_h = (_skew(al) + sw @ sw) @ rot
        moment_h = -_skew(a) @ rot
        col_h = jpt @ force_h + jrt @ moment_h
        # inertia about the origin, local: moment R (L(al_l) + skew(w_l) L(w_l)) iota
        rt = np.swapaxes(rot, -1, -2)
        w_l = np.einsum("nbij,nbj->nbi", rt, w)
        al_l = np.einsum("nbij,nbj->nbi", rt, al)
        col_i = jrt @ rot @ (_inertia_map(al_l) + _skew(w_l) @ _inertia_map(w_l))
        inertial = np.concatenate([col_m, col_h, col_i], axis=-1)  # (n, nb, nv, 10)
        n = len(q)
        w_in = np.moveaxis(inertial, 1, 2).reshape(n, self.nv, -1)
        terms = {"viscous": qd, "coulomb": self.coulomb(qd), "armature": qdd, "offset": np.ones_like(qd)}
        w_joint = np.zeros((n, self.nv, self.nv, len(self.joint_terms)))
        for t, term in enumerate(self.joint_terms):
            w_joint[:, np.arange(self.nv), np.arange(self.nv), t] = terms[term]
        return np.concatenate([w_in, w_joint.reshape(n, self.nv, -1)], axis=-1)


@dataclass(frozen=True, eq=False)
class BaseParameters:
    """Which combinations of theta the regressor identifies (QR with column pivoting).

    Base parameter i is theta[independent[i]] + sum_j beta[i, j] theta[dependent[j]]. Parameters in
    `unidentifiable` have (numerically) zero columns: the data say nothing about them. Parameters in
    `dependent` are identifiable only inside those combinations.
    """

    names: tuple[str, ...]
    independent: np.ndarray
    dependent: np.ndarray
    beta: np.ndarray
    rank: int
    unidentifiable: tuple[str, ...]

    def values(self, theta: np.ndarray) -> np.ndarray:
        """Base parameter values for a full parameter vector."""
        theta = np.asarray(theta, dtype=float)
        return theta[self.independent] + self.beta @ theta[self.dependent]

    def reduce(self, w: np.ndarray) -> np.ndarray:
        """The base regressor: the independent columns of W (last axis)."""
        return np.asarray(w)[..., self.independent]

    @property
    def base_names(self) -> tuple[str, ...]:
        return tuple(self.describe(i) for i in range(self.rank))

    @property
    def identifiable_alone(self) -> tuple[str, ...]:
        """Parameters that are a base parameter by themselves (no other parameter mixed in)."""
        alone = np.abs(self.beta).max(axis=1, initial=0.0) == 0
        return tuple(self.names[i] for i, ok in zip(self.independent, alone) if ok)

    @property
    def combined_only(self) -> tuple[str, ...]:
        """Parameters identifiable only in combination with others."""
        mixed = set(self.names[i] for i, row in zip(self.independent, self.beta) if np.abs(row).max(initial=0) > 0)
        mixed |= {self.names[j] for j, col in zip(self.dependent, self.beta.T) if np.abs(col).max(initial=0) > 0}
        return tuple(n for n in self.names if n in mixed)

    def describe(self, i: int) -> str:
        """Base parameter i as a readable combination, e.g. 'link2.mx +0.3*link3.m'."""
        parts = [self.names[self.independent[i]]]
        for j, coef in zip(self.dependent, self.beta[i]):
            if coef != 0:
                parts.append(f"{coef:+.6g}*{self.names[j]}")
        return " ".join(parts)


def base_parameters(
    w: np.ndarray, names: Sequence[str], rank_tol: float = 1e-8, zero_tol: float = 1e-10
) -> BaseParameters:
    """Base parameters of a stacked regressor (rows, P) or (N, nv, P) by pivoted QR of its scaled columns.

    Columns are scaled to unit norm; rank counts |R_kk| above `rank_tol` times the largest. Combination
    coefficients below `zero_tol` (after undoing the scaling, relative to the largest) are set to zero.
    """
    names = tuple(names)
    stacked = np.asarray(w, dtype=float).reshape(-1, len(names))
    norms = np.linalg.norm(stacked, axis=0)
    peak = norms.max() if norms.size else 0.0
    if peak == 0:
        raise DataError("the regressor is zero: no motion, or no mass on any moving body")
    zero = norms <= 1e-12 * peak
    scale = np.where(zero, 1.0, norms)
    _, r, piv = scipy.linalg.qr(stacked / scale, mode="economic", pivoting=True)
    diag = np.abs(np.diag(r))
    rank = int(np.sum(diag > rank_tol * diag[0]))
    independent, dependent = piv[:rank], piv[rank:]
    beta_s = scipy.linalg.solve_triangular(r[:rank, :rank], r[:rank, rank:])
    beta = beta_s / scale[independent][:, None] * scale[dependent][None, :]
    big = np.abs(beta).max(initial=0.0)
    beta[np.abs(beta) <= zero_tol * max(big, 1.0)] = 0.0
    beta[:, zero[dependent]] = 0.0
    lost = {int(j) for c, j in enumerate(dependent) if zero[j] or np.abs(beta[:, c]).max(initial=0.0) == 0}
    unidentifiable = tuple(n for i, n in enumerate(names) if i in lost)
    order = np.argsort(independent)  # keep the parameters' natural order
    return BaseParameters(names, independent[order], dependent, beta[order], rank, unidentifiable)


def structural_base_parameters(
    arm: ArmRegressor, samples: int = 100, seed: int = 0, rank_tol: float = 1e-8
) -> BaseParameters:
    """Base parameters of the arm's structure, from random states within its joint ranges (data-independent)."""
    rng = np.random.default_rng(seed)
    m = arm.model
    lo = np.where(m.jnt_limited[m.dof_jntid], m.jnt_range[m.dof_jntid, 0], -np.pi)
    hi = np.where(m.jnt_limited[m.dof_jntid], m.jnt_range[m.dof_jntid, 1], np.pi)
    q = rng.uniform(lo, hi, (samples, arm.nv))
    w = arm.compute(q, rng.normal(0.0, 1.0, q.shape), rng.normal(0.0, 3.0, q.shape))
    return base_parameters(w, arm.names, rank_tol=rank_tol)


@dataclass(frozen=True, eq=False)
class ArmFit:
    """Base-parameter estimates of a whole arm; `rows` marks the (time, joint) equations used."""

    base: BaseParameters
    fit: LinearFit
    rows: np.ndarray

    def predicted_torque(
        self,
        arm: ArmRegressor,
        q: np.ndarray,
        qd: np.ndarray,
        qdd: np.ndarray,
        coulomb: np.ndarray | None = None,
        regressor: np.ndarray | None = None,
    ) -> np.ndarray:
        """Torque (N, nv) the fitted base parameters predict (`coulomb`, `regressor`: as in `fit_arm`)."""
        return _base_regressor(arm, self.base, q, qd, qdd, coulomb, regressor) @ self.fit.values


def _base_regressor(
    arm: ArmRegressor,
    base: BaseParameters,
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    coulomb: np.ndarray | None,
    regressor: np.ndarray | None,
) -> np.ndarray:
    """base.reduce(W) on these rows with `arm`'s Coulomb columns (or `coulomb`); W computed unless given."""
    if regressor is None:
        return with_coulomb(arm, base, base.reduce(arm.compute(q, qd, qdd)), coulomb)
    if regressor.shape != (len(q), arm.nv, arm.n_params):
        raise DataError(f"a precomputed regressor must be ({len(q)}, {arm.nv}, {arm.n_params}); got {regressor.shape}")
    return with_coulomb(arm, base, base.reduce(regressor), arm.coulomb(qd) if coulomb is None else coulomb)


def with_coulomb(arm: ArmRegressor, base: BaseParameters, w: np.ndarray, coulomb: np.ndarray | None) -> np.ndarray:
    """The base regressor `w` (N, nv, rank) with each joint's Coulomb column set to `coulomb` (N, nv), when given."""
    if coulomb is None or "coulomb" not in arm.joint_terms:
        return w
    position = {int(i): k for k, i in enumerate(base.independent)}
    for j, joint in enumerate(arm.joint_names):
        c = position.get(arm.names.index(f"{joint}.coulomb"))
        if c is not None:
            w[:, j, c] = coulomb[:, j]
    return w


def fit_arm(
    arm: ArmRegressor,
    deriv: Derivatives,
    tau: np.ndarray,
    base: BaseParameters | None = None,
    *,
    selection: RowSelection = RowSelection(),
    torque_cap_nm: float | np.ndarray | None = None,
    compensate_noise: bool = True,
    bootstrap: BootstrapSettings = BootstrapSettings(),
    limits: FitThresholds = FitThresholds(),
    noise_seed: int = 1,
    coulomb: np.ndarray | None = None,
    joint_weights: np.ndarray | None = None,
    regressor: np.ndarray | None = None,
) -> ArmFit:
    """Least squares of every joint's torque on the base regressor, equation by equation.

    A joint's equation at a sample is used when that joint is moving and unsaturated there (its Coulomb
    term is only valid then); bootstrap blocks are contiguous in time across all joints. `coulomb` (N, nv),
    when given, replaces the Coulomb columns tanh(qd / band) (e.g. a measured velocity's tanh filtered
    like the torque); it is taken as noise-free. `joint_weights` (nv,) scale each joint's equations (weighted
    least squares, e.g. 1 / each joint's residual RMS); the fit's residual statistics are then in those units.
    `regressor`: W (`arm.compute`, any Coulomb band) of the samples with valid derivatives on every joint,
    when the caller has it already; its Coulomb columns are replaced by `arm`'s (or `coulomb`).
    """
    torque = np.asarray(tau, dtype=np.float64)
    if deriv.q.ndim != 2 or deriv.q.shape[1] != arm.nv or torque.shape != deriv.q.shape:
        raise DataError(f"need (N, {arm.nv}) positions and torques; got {deriv.q.shape} and {torque.shape}")
    base = base if base is not None else structural_base_parameters(arm)
    ok = deriv.valid.all(axis=1)
    if ok.sum() == 0:
        raise DataError("no sample has valid derivatives on every joint")
    rows = select_rows(deriv.qd, deriv.valid, deriv.window_samples, selection, torque, torque_cap_nm) & ok[:, None]
    w = np.full((len(torque), arm.nv, base.rank), np.nan)
    w[ok] = _base_regressor(
        arm, base, deriv.q[ok], deriv.qd[ok], deriv.qdd[ok], None if coulomb is None else coulomb[ok], regressor
    )
    weights = np.ones(arm.nv) if joint_weights is None else np.asarray(joint_weights, dtype=float)
    w, weighted_torque = weigh_joints(weights, w, torque)
    sigma = np.nan_to_num(np.broadcast_to(np.asarray(deriv.position_noise_rad, dtype=float), (arm.nv,)), nan=0.0)
    cov = None
    if np.any(sigma > 0) and rows.any():
        extra = same_filter(deriv, np.random.default_rng(noise_seed).normal(0.0, 1.0, deriv.q.shape) * sigma)
        both = ok & extra.valid.all(axis=1)
        w_noisy = np.full_like(w, np.nan)
        w_noisy[both] = weigh_joints(
            weights,
            with_coulomb(
                arm,
                base,
                base.reduce(
                    arm.compute(
                        deriv.q[both] + extra.q[both],
                        deriv.qd[both] + extra.qd[both],
                        deriv.qdd[both] + extra.qdd[both],
                    )
                ),
                None if coulomb is None else coulomb[both],
            ),
            torque[both],
        )[0]
        cov = column_noise_covariance(w.reshape(-1, base.rank), [w_noisy.reshape(-1, base.rank)], rows.ravel())
    exc = excitation(
        deriv.qd,
        deriv.qdd,
        deriv.valid,
        sigma * deriv.qd_noise_gain,
        sigma * deriv.qdd_noise_gain,
        limits,
        names=arm.joint_names,
    )
    time_index = np.repeat(np.arange(len(torque)), arm.nv)
    fit = fit_linear(
        weighted_torque.ravel(),
        w.reshape(-1, base.rank),
        base.base_names,
        rows=rows.ravel(),
        time_index=time_index,
        noise_covariance=cov,
        compensate_noise=compensate_noise,
        excitation_=exc,
        bootstrap=bootstrap,
        limits=limits,
    )
    return ArmFit(base, fit, rows)
