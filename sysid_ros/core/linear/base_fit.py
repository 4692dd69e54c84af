"""The base-parameter fit of an arm with measured joint torque, written back as MuJoCo model values (issue 32).

tau = W(q, qd, qdd) theta with `arm_regressor`'s W: per jointed body (bodies welded to it folded in) its 10
inertial parameters about its origin, per joint viscous, Coulomb (tanh(qd / band): MuJoCo's friction loss, a sign
softened over `band`), armature and an effort offset. Steps: the rows (zero-phase Butterworth on positions and
torque, central differences), the base parameters by QR with column pivoting (reported: what the data identify),
ordinary then per-joint weighted least squares (rows scaled by 1 / each joint's residual RMS; never a dense
rows x rows matrix), then a physically consistent fit: each body's pseudo-inertia J = U U' with U upper
triangular in the log-Cholesky parametrisation (Rucker & Wensing 2022), so every iterate is a body a density
can make, solved by `scipy.optimize.least_squares` on the weighted problem reduced to its R factor (as many
residuals as parameters), started from the least-squares solution projected onto physical bodies, masses held to
`mass_ratio` x the model file's, damping and friction loss >= 0, armature >= 0 but where the least squares put it
below zero and the joint-space inertia stays positive definite (`negative_armature`), and a small ridge on
unit-norm columns toward the model file so what the data cannot see stays where the user put it. Intervals: a block
bootstrap over time segments of the weighted least squares (per-block normal equations summed, so a replicate
costs one small solve), for the base parameters and for each parameter the data identify alone.

The fitted values land in an `MjSpec` as MuJoCo holds them: body mass, centre of mass and full inertia (a
jointed body carries its welded group; the welded bodies' own inertials are zeroed), joint damping, friction
loss, armature, and the effort offset as the joint motor's constant bias.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import mujoco
import numpy as np
import scipy.linalg
from scipy.optimize import least_squares
from scipy.signal import butter, filtfilt
from threadpoolctl import threadpool_limits

from ..errors import DataError, ModelError
from ..sim import joint_motor, set_effort_offset
from .arm_regressor import INERTIAL_NAMES, JOINT_TERMS, ArmRegressor, BaseParameters, base_parameters

MUJOCO_TERM = {"viscous": "damping", "coulomb": "frictionloss", "armature": "armature", "offset": "effort_offset"}
NONNEGATIVE = ("viscous", "coulomb", "armature")
FRICTION_SOLREF = (-1.0, -1.0e4)
FRICTION_SOLIMP = (0.99, 0.99, 0.001, 0.5, 2.0)
"""The friction loss's constraint as the fit writes it: direct damping 1e4 and impedance 0.99, so `mj_inverse` gives
about frictionloss x sign(qd + 1e-4 qdd), the fit's Coulomb column (MuJoCo's defaults soften it over a band that
grows with the joint's inverse inertia: on the Panda's wrist, with no armature, 2x the held-out torque error)."""


@dataclass(frozen=True)
class BaseFitSettings:
    """How the fit runs; the defaults are the ones measured on the real Panda log (docs/identification_arm.md)."""

    coulomb_band_rad_s: float = 0.001
    mass_ratio: tuple[float, float] = (0.5, 2.0)
    ridge: float = 1e-5  # toward the model file, on unit-norm columns
    max_rows: int = 4000  # time rows the fit uses at most (evenly spaced; filtered rows change little between)
    bootstrap_replicates: int = 200
    block_s: float = 1.0  # bootstrap block length (several times the filter's impulse response)
    physical: bool = True
    seed: int = 0
    negative_armature: float = 0.5
    """How far below zero the physical fit may take a joint's armature where the weighted least squares put it
    there: this fraction of the smallest diagonal inertia the least-squares bodies give the joint on the training
    poses (0: armature >= 0 everywhere). The bodies stay physical (pseudo-inertia); a link-side torque sensor sees
    no rotor inertia, and on the real Panda the weighted least squares ask for -0.02 to -0.09 kg m^2 on joints 3-7
    (held at zero, joint 4 was 13 % worse held out than the least squares). Kept only where the written model's
    joint-space inertia stays positive definite on the training poses, the armature taking at most this share of
    its smallest eigenvalue; the joints held >= 0 instead are named in `notes` (FIGAROH's LMI fit leaves armature
    free: its joint-space inertia on the Panda comes out indefinite)."""


@dataclass(frozen=True)
class Rows:
    """Filtered positions, velocities, accelerations and torque on a uniform clock (model DOF order)."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    period_s: float


def filtered_rows(q: np.ndarray, tau: np.ndarray, period_s: float, cutoff_hz: float, order: int = 4) -> Rows:
    """Butterworth low-pass forwards and backwards on positions and torque, velocity and acceleration by central
    differences (uniformly sampled rows)."""
    q, tau = np.asarray(q, dtype=float), np.asarray(tau, dtype=float)
    if q.shape != tau.shape or q.ndim != 2 or len(q) < 50:
        raise DataError(f"need matching (N >= 50, nv) positions and torques; got {q.shape} and {tau.shape}")
    if not (0 < cutoff_hz < 0.5 / period_s):
        raise DataError(f"filter cutoff {cutoff_hz} Hz must lie below the Nyquist rate {0.5 / period_s} Hz")
    b, a = butter(order, cutoff_hz, fs=1.0 / period_s)
    qf, tf = filtfilt(b, a, q, axis=0), filtfilt(b, a, tau, axis=0)
    qd = np.gradient(qf, period_s, axis=0)
    return Rows(qf, qd, np.gradient(qd, period_s, axis=0), tf, period_s)


def _welded_groups(model: mujoco.MjModel) -> list[tuple[int, list[int]]]:
    """(jointed body, the bodies welded to it) for every body with a joint."""
    groups: dict[int, list[int]] = {}
    for b in range(1, model.nbody):
        root = int(model.body_weldid[b])
        if root != 0:
            groups.setdefault(root, []).append(b)
    return [(root, [b for b in members if b != root]) for root, members in sorted(groups.items())]


def _relative_pose(model: mujoco.MjModel, root: int, body: int) -> tuple[np.ndarray, np.ndarray]:
    """(rotation, position) of `body`'s frame in `root`'s (constant: they are welded)."""
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    r0, rb = data.xmat[root].reshape(3, 3), data.xmat[body].reshape(3, 3)
    return r0.T @ rb, r0.T @ (data.xpos[body] - data.xpos[root])


def _params(m: float, c: np.ndarray, i_com: np.ndarray) -> np.ndarray:
    """10 standard parameters (m, m c, inertia about the origin as Ixx Ixy Iyy Ixz Iyz Izz)."""
    i_o = i_com + m * (c @ c * np.eye(3) - np.outer(c, c))
    return np.array([m, *(m * c), i_o[0, 0], i_o[0, 1], i_o[1, 1], i_o[0, 2], i_o[1, 2], i_o[2, 2]])


def _body_com_inertia(model: mujoco.MjModel, b: int) -> tuple[float, np.ndarray, np.ndarray]:
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, model.body_iquat[b])
    rot = rot.reshape(3, 3)
    return float(model.body_mass[b]), np.array(model.body_ipos[b]), rot @ np.diag(model.body_inertia[b]) @ rot.T


def group_parameters(model: mujoco.MjModel, root: int, welded: Sequence[int]) -> np.ndarray:
    """The 10 parameters of a welded group, in its jointed body's frame."""
    total = np.zeros(10)
    for b in [root, *welded]:
        m, c, i_com = _body_com_inertia(model, b)
        rot, pos = (np.eye(3), np.zeros(3)) if b == root else _relative_pose(model, root, b)
        total += _params(m, rot @ c + pos, rot @ i_com @ rot.T)
    return total


def pseudo_inertia(p: np.ndarray) -> np.ndarray:
    """J = [[Sigma, h], [h', m]] of 10 standard parameters (Sigma = tr(I)/2 - I, I about the origin)."""
    m, h = p[0], p[1:4]
    i_o = np.array([[p[4], p[5], p[7]], [p[5], p[6], p[8]], [p[7], p[8], p[9]]])
    out = np.empty((4, 4))
    out[:3, :3] = 0.5 * np.trace(i_o) * np.eye(3) - i_o
    out[:3, 3] = out[3, :3] = h
    out[3, 3] = m
    return out


def from_pseudo_inertia(j: np.ndarray) -> np.ndarray:
    sigma = j[:3, :3]
    i_o = np.trace(sigma) * np.eye(3) - sigma
    return np.array([j[3, 3], *j[:3, 3], i_o[0, 0], i_o[0, 1], i_o[1, 1], i_o[0, 2], i_o[1, 2], i_o[2, 2]])


_U_ENTRY = ((0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3))
"""Where coordinates 1-9 (d1-d3, s12 s23 s13, t1-t3) sit in U."""


def _cholesky_factor(x: np.ndarray) -> np.ndarray:
    """U of log-Cholesky coordinates (alpha, d1-d3, s12 s23 s13, t1-t3)."""
    v = np.eye(4)
    for k, (i, j) in enumerate(_U_ENTRY):
        v[i, j] = np.exp(x[k + 1]) if k < 3 else x[k + 1]
    return np.exp(x[0]) * v


def from_log_cholesky(x: np.ndarray) -> np.ndarray:
    """10 standard parameters of log-Cholesky coordinates (alpha, d1-d3, s12 s23 s13, t1-t3): m = exp(2 alpha)."""
    u = _cholesky_factor(x)
    return from_pseudo_inertia(u @ u.T)


_FROM_J = np.stack([from_pseudo_inertia(e.reshape(4, 4)) for e in np.eye(16)], axis=1)
"""from_pseudo_inertia as a (10, 16) matrix on the flattened J (it is linear)."""
_DU_ROWS = np.array([i for i, _ in _U_ENTRY])
_DU_COLS = np.array([j for _, j in _U_ENTRY])


def log_cholesky_jacobian(x: np.ndarray) -> np.ndarray:
    """d(10 standard parameters) / d(log-Cholesky coordinates), (10, 10): column k from dU_k U' + U dU_k'."""
    u = _cholesky_factor(x)
    du = np.zeros((10, 4, 4))
    du[0] = u  # d/d alpha
    k = np.arange(1, 10)
    du[k, _DU_ROWS, _DU_COLS] = np.where(k <= 3, u[_DU_ROWS, _DU_COLS], np.exp(x[0]))
    dj = du @ u.T
    return _FROM_J @ (dj + dj.transpose(0, 2, 1)).reshape(10, 16).T


def to_log_cholesky(p: np.ndarray, floor: float = 1e-9) -> np.ndarray:
    """Log-Cholesky coordinates of the nearest physical body (pseudo-inertia eigenvalues clamped to `floor` x
    the largest)."""
    val, vec = np.linalg.eigh(pseudo_inertia(p))
    j = vec @ np.diag(np.maximum(val, floor * max(val.max(), 1e-12))) @ vec.T
    flip = np.eye(4)[::-1]
    u = flip @ np.linalg.cholesky(flip @ j @ flip) @ flip  # upper triangular, j = u u'
    scale = u[3, 3]
    u = u / scale
    return np.array([np.log(scale), *np.log(np.diag(u)[:3]), u[0, 1], u[1, 2], u[0, 2], *u[:3, 3]])


@dataclass(frozen=True, eq=False)
class BaseParameterFit:
    """The fit: parameter names (per jointed body its 10, per joint its 4 terms), the model file's values, the
    weighted least-squares and (when run) physically consistent values, the base parameters of the data, each
    joint's residual RMS of the first pass (the weights are its inverse), bootstrap intervals (name: 95 % low,
    high) of the base parameters and of the parameters identified alone, and the spec with the values written."""

    names: tuple[str, ...]
    prior: np.ndarray
    least_squares: np.ndarray
    physical: np.ndarray | None
    base: BaseParameters
    base_values: np.ndarray
    joint_rms_nm: np.ndarray
    intervals: dict[str, tuple[float, float]]
    spec: mujoco.MjSpec
    rows: int
    notes: tuple[str, ...] = field(default=())

    @property
    def values(self) -> np.ndarray:
        return self.least_squares if self.physical is None else self.physical

    def value(self, name: str) -> float:
        return float(self.values[self.names.index(name)])


class ArmColumns:
    """The fit's regressor: jointed bodies (welded groups folded) and joint terms, from `ArmRegressor`."""

    def __init__(self, model: mujoco.MjModel, band_rad_s: float) -> None:
        self.model = model
        self.arm = ArmRegressor(model, JOINT_TERMS, coulomb_band_rad_s=band_rad_s)
        self.groups = _welded_groups(model)
        if not self.groups:
            raise ModelError("the model has no jointed body to fit")
        self.body_names = tuple(
            mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, r) or f"body{r}" for r, _ in self.groups
        )
        cols = [self.arm.bodies.index(r) * 10 + i for r, _ in self.groups for i in range(10)]
        self.columns = np.array(cols + list(range(10 * len(self.arm.bodies), self.arm.n_params)))
        self.names = tuple(self.arm.names[c] for c in self.columns)
        self.n_bodies = len(self.groups)
        self.prior = np.concatenate(
            [
                np.concatenate([group_parameters(model, r, w) for r, w in self.groups]),
                self.arm.true_parameters()[10 * len(self.arm.bodies) :],
            ]
        )

    def compute(self, rows: Rows, index: np.ndarray) -> np.ndarray:
        """W (len(index), nv, P) on the chosen time rows."""
        return self.arm.compute(rows.q[index], rows.qd[index], rows.qdd[index])[:, :, self.columns]

    @property
    def armature(self) -> np.ndarray:
        """Indices of the armature terms (joint order)."""
        return np.array([i for i, name in enumerate(self.names) if name.rsplit(".", 1)[1] == "armature"])

    def bounds(self, mass_ratio: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
        """Bounds in the physical fit's coordinates (log-Cholesky per body, then the joint terms)."""
        lo, hi = np.full(len(self.names), -np.inf), np.full(len(self.names), np.inf)
        for k in range(self.n_bodies):
            m0 = max(self.prior[10 * k], 1e-6)
            lo[10 * k], hi[10 * k] = 0.5 * np.log(mass_ratio[0] * m0), 0.5 * np.log(mass_ratio[1] * m0)
        for i, name in enumerate(self.names):
            if name.rsplit(".", 1)[1] in NONNEGATIVE:
                lo[i] = 0.0
        return lo, hi


def _weights(w: np.ndarray, tau: np.ndarray, ridge: float, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per joint residual RMS of the ordinary least squares, its solution)."""
    theta = _ridge_solve(w.reshape(-1, w.shape[-1]), tau.ravel(), ridge, prior)
    return np.sqrt(np.mean((tau - w @ theta) ** 2, axis=0)), theta


def _ridge_solve(a: np.ndarray, y: np.ndarray, ridge: float, prior: np.ndarray) -> np.ndarray:
    """argmin |a x - y|^2 + ridge |D (x - prior)|^2 with D the column norms (unit-norm columns)."""
    gram, rhs = a.T @ a, a.T @ y
    return _solve_normal(gram, rhs, ridge, prior)


def _solve_normal(gram: np.ndarray, rhs: np.ndarray, ridge: float, prior: np.ndarray) -> np.ndarray:
    d = _ridge_scale(gram)
    return scipy.linalg.solve(gram + ridge * np.diag(d), rhs + ridge * d * prior, assume_a="pos", check_finite=False)


def _ridge_scale(gram: np.ndarray) -> np.ndarray:
    """Each column's squared norm, floored at 1e-6 x the median (a column the data never see keeps the prior)."""
    diag = np.diag(gram)
    seen = diag[diag > 0]
    return np.maximum(diag, 1e-6 * (np.median(seen) if seen.size else 1.0))


def _physical(
    cols: ArmColumns,
    gram: np.ndarray,
    rhs: np.ndarray,
    start: np.ndarray,
    ridge: float,
    mass_ratio: tuple[float, float],
    max_evaluations: int = 300,
    armature_floor: np.ndarray | None = None,
) -> np.ndarray:
    """The physically consistent fit on normal equations (gram, rhs), from the full parameter vector `start`;
    `armature_floor` (per joint) replaces armature's lower bound 0."""
    lo, hi = cols.bounds(mass_ratio)
    if armature_floor is not None:
        lo[cols.armature] = armature_floor
    return physically_consistent(gram, rhs, start, cols.prior, cols.n_bodies, lo, hi, ridge, max_evaluations)


def physically_consistent(
    gram: np.ndarray,
    rhs: np.ndarray,
    start: np.ndarray,
    prior: np.ndarray,
    n_bodies: int,
    lo: np.ndarray,
    hi: np.ndarray,
    ridge: float,
    max_evaluations: int = 300,
) -> np.ndarray:
    """argmin |A x - y|^2 + ridge |D (x - prior)|^2 given A'A = `gram`, A'y = `rhs` (D the column norms), over
    parameters whose first `n_bodies` blocks of 10 are bodies' standard inertial parameters, each kept a
    physical body by the log-Cholesky parametrisation; `lo`, `hi` bound the solver's coordinates (each body's
    first: half the log of its mass; the rest as they are). From `start` (projected onto physical bodies)."""
    nb = n_bodies
    d = _ridge_scale(gram)
    chol = scipy.linalg.cholesky(gram + ridge * np.diag(d), lower=False)
    z = scipy.linalg.solve_triangular(chol, rhs + ridge * d * prior, trans="T")

    def theta(x: np.ndarray) -> np.ndarray:  # (no body: the plain coordinates alone)
        return np.concatenate([*(from_log_cholesky(x[10 * k : 10 * k + 10]) for k in range(nb)), x[10 * nb :]])

    x0 = np.concatenate(
        [*(to_log_cholesky(start[10 * k : 10 * k + 10], floor=1e-3) for k in range(nb)), start[10 * nb :]]
    )
    inset = 1e-6 * (np.abs(np.nan_to_num(lo, posinf=0.0, neginf=0.0)) + 1.0)
    x0 = np.minimum(np.maximum(x0, lo + inset), hi - inset)

    def jacobian(x: np.ndarray) -> np.ndarray:
        d_theta = np.eye(len(x))
        for k in range(nb):
            d_theta[10 * k : 10 * k + 10, 10 * k : 10 * k + 10] = log_cholesky_jacobian(x[10 * k : 10 * k + 10])
        return chol @ d_theta

    sol = least_squares(
        lambda x: chol @ theta(x) - z,
        x0,
        jac=jacobian,
        bounds=(lo, hi),
        method="trf",
        x_scale="jac",
        max_nfev=max_evaluations,
    )
    return theta(sol.x)


def block_normal_equations(a: np.ndarray, y: np.ndarray, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per time block (`blocks`: each row's block, 0..B-1) the normal equations of a x = y, a (rows, DOFs, P) and
    y (rows, DOFs) already weighted: (B, P, P) and (B, P); a block bootstrap's resample sums them with its counts."""
    n_blocks, p = int(blocks.max()) + 1, a.shape[-1]
    grams, rhs = np.zeros((n_blocks, p, p)), np.zeros((n_blocks, p))
    for k in range(n_blocks):
        ak = a[blocks == k].reshape(-1, p)
        grams[k], rhs[k] = ak.T @ ak, ak.T @ y[blocks == k].ravel()
    return grams, rhs


def _blocks(n_rows: int, period_s: float, block_s: float) -> np.ndarray:
    """Block index of each time row."""
    per = max(1, int(round(block_s / period_s)))
    return np.arange(n_rows) // per


def fit_base_parameters(
    model: mujoco.MjModel | mujoco.MjSpec,
    rows: Rows,
    settings: BaseFitSettings = BaseFitSettings(),
    train: np.ndarray | None = None,
) -> BaseParameterFit:
    """The base-parameter fit on `rows` (model DOF order; `train`: a boolean mask of the rows to use). BLAS on one
    thread: its matrices are small, and on shared cores extra BLAS threads only spin (the real Panda's fit with the
    2 cores loaded: 7-23 s wall and 7-18 s CPU, against 1.6-2.4 s of both on one thread)."""
    with threadpool_limits(limits=1, user_api="blas"):
        return _fit(model, rows, settings, train)


def _fit(
    model: mujoco.MjModel | mujoco.MjSpec, rows: Rows, settings: BaseFitSettings, train: np.ndarray | None
) -> BaseParameterFit:
    spec = model.copy() if isinstance(model, mujoco.MjSpec) else None
    compiled = spec.copy().compile() if spec is not None else model
    cols = ArmColumns(compiled, settings.coulomb_band_rad_s)
    if rows.q.shape[1] != compiled.nv:
        raise DataError(f"rows have {rows.q.shape[1]} joints; the model has {compiled.nv} DOFs")
    usable = (
        np.isfinite(rows.q).all(1)
        & np.isfinite(rows.qd).all(1)
        & np.isfinite(rows.qdd).all(1)
        & np.isfinite(rows.tau).all(1)
    )
    if train is not None:
        usable &= np.asarray(train, dtype=bool)
    index = np.flatnonzero(usable)
    if len(index) < 50:
        raise DataError(f"only {len(index)} usable rows: need at least 50")
    index = index[:: max(1, int(np.ceil(len(index) / settings.max_rows)))]
    w = cols.compute(rows, index)
    tau = rows.tau[index]
    rms, _ = _weights(w, tau, settings.ridge, cols.prior)
    weight = 1.0 / np.maximum(rms, 1e-6 * max(rms.max(), 1e-12))
    ww, tw = w * weight[None, :, None], tau * weight
    a = ww.reshape(-1, ww.shape[-1])
    base = base_parameters(a, cols.names)
    theta_ls = _ridge_solve(a, tw.ravel(), settings.ridge, cols.prior)
    gram, rhs = a.T @ a, a.T @ tw.ravel()
    notes: list[str] = []
    physical = None
    if settings.physical:
        if settings.negative_armature > 0 and np.any(theta_ls[cols.armature] < 0):
            physical, held = _negative_armature(
                cols, _spec_of(spec, compiled), gram, rhs, theta_ls, rows.q[index], settings
            )
            if held:
                notes.append("armature held >= 0 on " + ", ".join(held))
        if physical is None:
            physical = _physical(cols, gram, rhs, theta_ls, settings.ridge, settings.mass_ratio)
    # block bootstrap of the weighted least squares: per-block normal equations, summed per replicate
    blocks = _blocks(len(index), rows.period_s * max(1, index[1] - index[0] if len(index) > 1 else 1), settings.block_s)
    grams, rhss = block_normal_equations(ww, tw, blocks)
    nblk = len(grams)
    intervals: dict[str, tuple[float, float]] = {}
    if settings.bootstrap_replicates > 0 and nblk >= 5:
        rng = np.random.default_rng(settings.seed)
        reps = []
        for _ in range(settings.bootstrap_replicates):
            pick = rng.integers(0, nblk, nblk)
            counts = np.bincount(pick, minlength=nblk).astype(float)
            reps.append(_solve_normal(np.tensordot(counts, grams, 1), counts @ rhss, settings.ridge, cols.prior))
        reps = np.array(reps)
        centre = theta_ls
        # basic (pivot) intervals around the full-data estimate
        lo_q, hi_q = np.percentile(reps, [2.5, 97.5], axis=0)
        base_reps = np.array([base.values(r) for r in reps])
        blo, bhi = np.percentile(base_reps, [2.5, 97.5], axis=0)
        bval = base.values(centre)
        for i, name in enumerate(base.base_names):
            intervals[name] = (float(2 * bval[i] - bhi[i]), float(2 * bval[i] - blo[i]))
        for name in base.identifiable_alone:
            i = cols.names.index(name)
            intervals[name] = (float(2 * centre[i] - hi_q[i]), float(2 * centre[i] - lo_q[i]))
    elif settings.bootstrap_replicates > 0:
        notes.append(f"no bootstrap intervals: {nblk} blocks of {settings.block_s} s (need 5)")
    values = theta_ls if physical is None else physical
    out = write_into(_spec_of(spec, compiled), cols, values, negative_armature=physical is not None)
    return BaseParameterFit(
        cols.names,
        cols.prior,
        theta_ls,
        physical,
        base,
        base.values(values),
        rms,
        intervals,
        out,
        len(index),
        tuple(notes),
    )


def _spec_of(spec: mujoco.MjSpec | None, compiled: mujoco.MjModel) -> mujoco.MjSpec:
    return spec if spec is not None else mujoco.MjSpec.from_string(_xml_of(compiled))


def _negative_armature(
    cols: ArmColumns,
    spec: mujoco.MjSpec,
    gram: np.ndarray,
    rhs: np.ndarray,
    theta_ls: np.ndarray,
    q: np.ndarray,
    settings: BaseFitSettings,
) -> tuple[np.ndarray | None, list[str]]:
    """`with_negative_armature` on the base-parameter fit's columns, checked on up to 200 of the poses `q`."""
    probe = q[:: max(1, len(q) // 200)]

    def inertias(values: np.ndarray, armature: bool) -> np.ndarray:
        if not armature:
            values = values.copy()
            values[cols.armature] = 0.0
        return inertia_matrices(write_into(spec, cols, values, negative_armature=armature).compile(), probe)

    def fit(floor: np.ndarray) -> np.ndarray:
        return _physical(cols, gram, rhs, theta_ls, settings.ridge, settings.mass_ratio, armature_floor=floor)

    joints = [cols.names[i].rsplit(".", 1)[0] for i in cols.armature]
    dofs = np.arange(len(joints))
    room = settings.negative_armature
    floor, held = armature_floors(theta_ls, cols.armature, dofs, joints, inertias, room)
    values, _, held = with_negative_armature(fit, inertias, floor, cols.armature, dofs, joints, held, room)
    return values, held


def armature_floors(
    least_squares: np.ndarray,
    armature: np.ndarray,
    dofs: np.ndarray,
    joints: Sequence[str],
    inertias: Callable[[np.ndarray, bool], np.ndarray],
    room: float,
) -> tuple[np.ndarray, list[str]]:
    """Each joint's armature floor for the physical fit: -`room` x the joint's smallest diagonal inertia on the
    probe poses (the least-squares bodies, without armature) where the least squares put the armature below zero
    but not beyond that, else 0; and the joints the least squares put below zero held >= 0 from the start (on the
    real Panda the wrist asks for more than its whole diagonal inertia: letting it down to the floor, the check of
    `with_negative_armature` held it at zero all the same, in three more fits). `inertias(values, armature)` gives
    the joint-space inertia at the probe poses of `values` (with or without their armature); `armature` indexes
    the armature values, `dofs` their joints' DOFs, `joints` names them."""
    wish = np.minimum(least_squares[armature], 0.0)
    if not np.any(wish < 0):
        return np.zeros(len(armature)), []
    with warnings.catch_warnings():  # MuJoCo's compiler warns of a singular inertia
        warnings.simplefilter("ignore")
        diag = np.diagonal(inertias(least_squares, False), axis1=1, axis2=2).min(axis=0)[dofs]
    floor = np.where((wish < 0) & (-wish < room * diag), -room * diag, 0.0)
    held = [j for j, f, v in zip(joints, floor, wish) if f == 0 and v < 0]
    return floor, held


def with_negative_armature(
    fit: Callable[[np.ndarray], np.ndarray],
    inertias: Callable[[np.ndarray, bool], np.ndarray],
    floor: np.ndarray,
    armature: np.ndarray,
    dofs: np.ndarray,
    joints: Sequence[str],
    held: list[str],
    room: float,
) -> tuple[np.ndarray | None, np.ndarray, list[str]]:
    """The physical fit (`fit(floor)`: values with each joint's armature >= its floor) with armature below zero
    where `armature_floors` allows it, kept when on every probe pose the joint-space inertia's smallest eigenvalue
    is at least (1 - room) x the one of the same bodies without armature (positive definite, the armature taking
    at most that share); else the joint weighing most in that direction is held >= 0 and the fit runs again.
    (values, or None when every joint ends held >= 0; the floors kept; the joints held >= 0 that the least squares
    put below zero)."""
    floor, held = floor.copy(), list(held)
    while np.any(floor < 0):
        trial = fit(floor)
        with warnings.catch_warnings():  # MuJoCo's compiler warns of a singular inertia: what this checks
            warnings.simplefilter("ignore")
            low0 = np.linalg.eigvalsh(inertias(trial, False))[:, 0]
            val, vec = np.linalg.eigh(inertias(trial, True))
        worst = int(np.argmin(val[:, 0] - (1.0 - room) * low0))
        if val[worst, 0] >= (1.0 - room) * low0[worst] and low0[worst] > 0:
            return trial, floor, held
        weight = np.where(floor < 0, -trial[armature] * vec[worst, dofs, 0] ** 2, -np.inf)
        j = int(np.argmax(weight))
        floor[j] = 0.0
        held.append(joints[j])
    return None, floor, held


def inertia_matrices(model: mujoco.MjModel, q: np.ndarray) -> np.ndarray:
    """The joint-space inertia (armature included) at each pose of `q` (model DOF order; hinge and slide joints)."""
    data = mujoco.MjData(model)
    out = np.zeros((len(q), model.nv, model.nv))
    for k, pose in enumerate(q):
        data.qpos[: model.nv] = pose
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_crb(model, data)
        mujoco.mj_fullM(model, data, out[k])
    return out


def min_inertia_eigenvalue(model: mujoco.MjModel, q: np.ndarray) -> float:
    """The smallest eigenvalue of the joint-space inertia (armature included) over the poses `q`."""
    return float(np.linalg.eigvalsh(inertia_matrices(model, q))[:, 0].min())


def _xml_of(model: mujoco.MjModel) -> str:
    """The XML of a compiled model (when the caller has no spec)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.xml")
        mujoco.mj_saveLastXML(path, model)
        with open(path) as f:
            return f.read()


def body_values(p: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass, centre of mass, inertia tensor about it) of 10 standard parameters."""
    m = float(p[0])
    c = np.asarray(p[1:4]) / m
    i_o = np.array([[p[4], p[5], p[7]], [p[5], p[6], p[8]], [p[7], p[8], p[9]]])
    return m, c, i_o - m * (c @ c * np.eye(3) - np.outer(c, c))


def write_into(
    spec: mujoco.MjSpec, cols: ArmColumns, values: np.ndarray, negative_armature: bool = False
) -> mujoco.MjSpec:
    """A copy of `spec` with the fitted bodies (each welded group on its jointed body) and joint terms (damping and
    friction loss >= 0, armature too unless `negative_armature`)."""
    out = spec.copy()
    model = cols.model
    for k, (_root, welded) in enumerate(cols.groups):
        m, c, tensor = body_values(from_log_cholesky(to_log_cholesky(values[10 * k : 10 * k + 10], floor=1e-6)))
        body = out.body(cols.body_names[k])
        body.mass, body.ipos = m, c
        body.fullinertia = [tensor[0, 0], tensor[1, 1], tensor[2, 2], tensor[0, 1], tensor[0, 2], tensor[1, 2]]
        body.iquat, body.inertia = [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
        body.explicitinertial = True
        for b in welded:
            other = out.body(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b))
            other.mass, other.ipos, other.inertia = 0.0, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
            other.iquat, other.fullinertia = [1.0, 0.0, 0.0, 0.0], [np.nan] * 6
            other.explicitinertial = True
    for i, name in enumerate(cols.names[10 * cols.n_bodies :]):
        joint, term = name.rsplit(".", 1)
        value = float(values[10 * cols.n_bodies + i])
        target = out.joint(joint)
        if term == "viscous":
            target.damping[0] = max(value, 0.0)
        elif term == "coulomb":
            target.frictionloss = max(value, 0.0)
            target.solref_friction, target.solimp_friction = FRICTION_SOLREF, FRICTION_SOLIMP
        elif term == "armature":
            target.armature = value if negative_armature else max(value, 0.0)
        else:
            motor = joint_motor(out, joint)
            if motor is None:
                if abs(value) > 0:
                    raise ModelError(f"joint {joint}: an effort offset of {value:.4g} N m needs a motor on the joint")
                continue
            set_effort_offset(motor, value, float(motor.gear[0]))
    return out


__all__ = [
    "BaseFitSettings",
    "BaseParameterFit",
    "Rows",
    "filtered_rows",
    "fit_base_parameters",
    "physically_consistent",
    "block_normal_equations",
    "write_into",
    "from_log_cholesky",
    "to_log_cholesky",
    "pseudo_inertia",
    "INERTIAL_NAMES",
    "MUJOCO_TERM",
]
