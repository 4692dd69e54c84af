"""Single-joint inverse-dynamics models that are linear in their parameters, and their least-squares fits.

`JointModel` is the servo tuner's joint model, tau = J qdd + b qd + tc tanh(qd/0.01) + gs sin q + gc cos q
(+ a constant, which is gravity on a linear axis). `PendulumModel` is a point mass on a massless rod,
tau - Ic qdd = m (L^2 qdd + g L sin q) + b qd + f sign(qd). Terms known in advance (a rotor inertia, a
model feed-forward) move to the left-hand side; the rest go through `regression.fit_linear`.

Filtering both sides (`filter_torque`): the torque is not smoothed but the acceleration is, so a plain
fit compares filtered motion with raw torque; a 0.2 s quartic window biased the pendulum mass +0.5 % even
on noise-free data, twice its 95 % half-width. With `filter_torque` the regressor is evaluated on the raw
samples' own differences (`derivatives.hold_differences`) and every column and the torque go through the
smoother g that the acceleration filter applies to second differences (`hold_kernel`): the inertia
column is then the filter's acceleration exactly, and linear terms commute with the filter (measured on
the noise-free pendulum: mass, damping, friction loss within 0.001 %, 0.001 %, 0.004 %). Friction
columns take the filtered velocity (a raw difference's noise would flip its sign); rows moving across
the whole window have one sign throughout, which g leaves unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np

from ..errors import ConfigError, DataError
from ..signals import Derivatives, hold_differences, same_filter, smooth_like_acceleration
from .regression import (
    BootstrapSettings,
    FitThresholds,
    LinearFit,
    RowSelection,
    column_noise_covariance,
    excitation,
    fit_linear,
    select_rows,
)

REVOLUTE_TERMS = ("inertia_kg_m2", "viscous_nm_s_rad", "coulomb_nm", "gravity_sin_nm", "gravity_cos_nm")
PRISMATIC_TERMS = ("inertia_kg_m2", "viscous_nm_s_rad", "coulomb_nm", "offset_nm")
ALL_TERMS = REVOLUTE_TERMS + ("offset_nm",)
PENDULUM_TERMS = ("mass_kg", "damping_nm_s_rad", "friction_nm")

Regressor = Callable[..., np.ndarray]  # (q, qd, qdd, friction_qd) -> (N, P) columns


@dataclass(frozen=True)
class JointModel:
    """tau = J qdd + b qd + tc tanh(qd / band) + gs sin q + gc cos q + offset (N m, or N on a linear axis)."""

    inertia_kg_m2: float = 0.0
    viscous_nm_s_rad: float = 0.0
    coulomb_nm: float = 0.0
    gravity_sin_nm: float = 0.0
    gravity_cos_nm: float = 0.0
    offset_nm: float = 0.0
    coulomb_band_rad_s: float = 0.01

    def torque(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        theta = np.array([getattr(self, t) for t in ALL_TERMS])
        return joint_columns(q, qd, qdd, ALL_TERMS, self.coulomb_band_rad_s) @ theta

    def replace_terms(self, values: Mapping[str, float]) -> JointModel:
        """A copy with the given terms replaced."""
        unknown = set(values) - set(ALL_TERMS)
        if unknown:
            raise ConfigError(f"unknown joint-model terms {sorted(unknown)}; known: {ALL_TERMS}")
        current = {f.name: getattr(self, f.name) for f in fields(self)}
        current.update({k: float(v) for k, v in values.items()})
        return JointModel(**current)


def joint_columns(
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    terms: Sequence[str] = REVOLUTE_TERMS,
    coulomb_band_rad_s: float = 0.01,
    friction_qd: np.ndarray | None = None,
) -> np.ndarray:
    """The regressor of `JointModel`: one column per term, in the order of `terms`.

    `friction_qd` (default `qd`) is the velocity the Coulomb column's tanh is taken of.
    """
    q, qd, qdd = (np.asarray(a, dtype=np.float64) for a in (q, qd, qdd))
    fqd = qd if friction_qd is None else np.asarray(friction_qd, dtype=np.float64)
    columns = {
        "inertia_kg_m2": lambda: qdd,
        "viscous_nm_s_rad": lambda: qd,
        "coulomb_nm": lambda: np.tanh(fqd / coulomb_band_rad_s),
        "gravity_sin_nm": lambda: np.sin(q),
        "gravity_cos_nm": lambda: np.cos(q),
        "offset_nm": lambda: np.ones_like(q),
    }
    unknown = [t for t in terms if t not in columns]
    if unknown:
        raise ConfigError(f"unknown joint-model terms {unknown}; known: {ALL_TERMS}")
    return np.stack([columns[t]() for t in terms], axis=-1)


@dataclass(frozen=True)
class PendulumModel:
    """A point mass on a massless rod with a known rotor inertia."""

    mass_kg: float
    damping_nm_s_rad: float
    friction_nm: float
    length_m: float
    rotor_inertia_kg_m2: float = 0.0
    gravity_m_s2: float = 9.81

    def torque(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        phi = pendulum_columns(q, qd, qdd, self.length_m, self.gravity_m_s2)
        return phi @ np.array(
            [self.mass_kg, self.damping_nm_s_rad, self.friction_nm]
        ) + self.rotor_inertia_kg_m2 * np.asarray(qdd)


def pendulum_columns(
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    length_m: float,
    gravity_m_s2: float = 9.81,
    friction_qd: np.ndarray | None = None,
) -> np.ndarray:
    """Columns multiplying (m, b, f): L^2 qdd + g L sin q, qd, sign(friction_qd) (default sign(qd))."""
    q, qd, qdd = (np.asarray(a, dtype=np.float64) for a in (q, qd, qdd))
    fqd = qd if friction_qd is None else np.asarray(friction_qd, dtype=np.float64)
    return np.stack([length_m**2 * qdd + gravity_m_s2 * length_m * np.sin(q), qd, np.sign(fqd)], axis=-1)


@dataclass(frozen=True, eq=False)
class JointFit:
    """A fitted model, its regression (values, intervals, warnings) and the rows it used."""

    model: JointModel | PendulumModel
    fit: LinearFit
    rows: np.ndarray


def _one_joint(deriv: Derivatives, tau: np.ndarray, joint: str | None) -> tuple[np.ndarray, float]:
    torque = np.asarray(tau, dtype=np.float64)
    if deriv.q.ndim != 1 or torque.shape != deriv.q.shape:
        raise DataError(f"one joint expected: positions {deriv.q.shape}, torque {torque.shape}", joint=joint)
    sigma = float(np.nan_to_num(deriv.position_noise_rad, nan=0.0))
    return torque, sigma


def fit_columns(
    deriv: Derivatives,
    tau: np.ndarray,
    regressor: Regressor,
    names: Sequence[str],
    *,
    known_torque_nm: np.ndarray | None = None,
    selection: RowSelection = RowSelection(),
    torque_cap_nm: float | None = None,
    compensate_noise: bool = True,
    filter_torque: bool = False,
    bootstrap: BootstrapSettings = BootstrapSettings(),
    limits: FitThresholds = FitThresholds(),
    joint: str | None = None,
    noise_draws: int = 4,
    noise_seed: int = 1,
) -> tuple[LinearFit, np.ndarray]:
    """Fit tau - known = regressor(q, qd, qdd, friction_qd) theta on the selected rows of one joint's record.

    The regressor's noise is measured by running fresh draws of the estimated position noise through the
    same derivative filter and regressor, so every column (tanh, sin, products) is judged alike; with
    `compensate_noise` that covariance also removes the errors-in-variables bias of least squares.
    With `filter_torque` both sides go through the acceleration filter's smoother (module docstring);
    `known_torque_nm` is then subtracted after filtering (the rotor term Ic * deriv.qdd is already so).
    """
    torque, sigma = _one_joint(deriv, tau, joint)
    rows = select_rows(deriv.qd, deriv.valid, deriv.window_samples, selection, torque, torque_cap_nm)
    if filter_torque:
        signals = hold_differences(deriv)
        if not np.allclose(
            smooth_like_acceleration(deriv, signals[2])[deriv.valid],
            deriv.qdd[deriv.valid],
            rtol=1e-6,
            atol=1e-6 * np.nanmax(np.abs(deriv.qdd), initial=1.0),
        ):
            raise DataError(
                "the derivatives were changed after filtering (their acceleration is not the filter's "
                "of their raw positions): cannot filter the torque alike",
                joint=joint,
            )

        def columns(q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, friction_qd: np.ndarray) -> np.ndarray:
            return smooth_like_acceleration(deriv, regressor(q, qd, qdd, friction_qd))

        y = smooth_like_acceleration(deriv, torque)
    else:
        signals = (deriv.q, deriv.qd, deriv.qdd)
        columns = regressor
        y = torque
    if known_torque_nm is not None:
        y = y - np.asarray(known_torque_nm, dtype=np.float64)
    phi = columns(*signals, deriv.qd)
    cov = None
    if sigma > 0 and rows.any():
        rng = np.random.default_rng(noise_seed)
        noisy = []
        for _ in range(noise_draws):
            extra = same_filter(deriv, rng.normal(0.0, sigma, deriv.q.shape))
            more = hold_differences(extra) if filter_torque else (extra.q, extra.qd, extra.qdd)
            noisy.append(columns(*(a + b for a, b in zip(signals, more)), deriv.qd + extra.qd))
        cov = column_noise_covariance(phi, noisy, rows)
    exc = excitation(
        deriv.qd,
        deriv.qdd,
        deriv.valid,
        sigma * deriv.qd_noise_gain,
        sigma * deriv.qdd_noise_gain,
        limits,
        names=[joint or "joint"],
    )
    fit = fit_linear(
        y,
        phi,
        names,
        rows=rows,
        noise_covariance=cov,
        compensate_noise=compensate_noise,
        excitation_=exc,
        bootstrap=bootstrap,
        limits=limits,
        joint=joint,
    )
    return fit, rows


def fit_joint_model(
    deriv: Derivatives,
    tau: np.ndarray,
    *,
    terms: Sequence[str] = REVOLUTE_TERMS,
    fixed: Mapping[str, float] | None = None,
    known_torque_nm: np.ndarray | None = None,
    coulomb_band_rad_s: float = 0.01,
    selection: RowSelection = RowSelection(),
    torque_cap_nm: float | None = None,
    compensate_noise: bool = True,
    filter_torque: bool = False,
    bootstrap: BootstrapSettings = BootstrapSettings(),
    limits: FitThresholds = FitThresholds(),
    joint: str | None = None,
) -> JointFit:
    """Seed 004's Stage 1 fit of one joint: `terms` are estimated, `fixed` terms (e.g. a known rotor
    inertia) and `known_torque_nm` (e.g. a model feed-forward) move to the left-hand side.

    `filter_torque` filters both sides (module docstring); off by default here, where the tuner brings
    derivatives it has shifted in time and a torque it has filtered itself."""
    fixed = dict(fixed or {})
    overlap = set(fixed) & set(terms)
    if overlap:
        raise ConfigError(f"terms both fixed and estimated: {sorted(overlap)}", joint=joint)
    signals = hold_differences(deriv) if filter_torque else (deriv.q, deriv.qd, deriv.qdd)
    known = np.zeros(np.shape(tau))
    if fixed:
        known = joint_columns(*signals, tuple(fixed), coulomb_band_rad_s, friction_qd=deriv.qd) @ np.array(
            list(fixed.values()), dtype=float
        )
    if known_torque_nm is not None:
        known = known + np.asarray(known_torque_nm, dtype=np.float64)
    if filter_torque:
        known = smooth_like_acceleration(deriv, known)
    fit, rows = fit_columns(
        deriv,
        tau,
        lambda q, qd, qdd, fqd: joint_columns(q, qd, qdd, terms, coulomb_band_rad_s, friction_qd=fqd),
        terms,
        known_torque_nm=known,
        selection=selection,
        torque_cap_nm=torque_cap_nm,
        compensate_noise=compensate_noise,
        filter_torque=filter_torque,
        bootstrap=bootstrap,
        limits=limits,
        joint=joint,
    )
    model = JointModel(coulomb_band_rad_s=coulomb_band_rad_s).replace_terms({**fixed, **fit.as_dict()})
    return JointFit(model, fit, rows)


def fit_pendulum(
    deriv: Derivatives,
    tau: np.ndarray,
    *,
    length_m: float,
    rotor_inertia_kg_m2: float = 0.0,
    gravity_m_s2: float = 9.81,
    selection: RowSelection = RowSelection(),
    torque_cap_nm: float | None = None,
    compensate_noise: bool = True,
    filter_torque: bool = True,
    bootstrap: BootstrapSettings = BootstrapSettings(),
    limits: FitThresholds = FitThresholds(),
    joint: str | None = None,
) -> JointFit:
    """Lesson 18.1's fit of (m, b, f) with the rotor inertia term moved to the left-hand side.

    Both sides are filtered alike by default (`filter_torque`, module docstring): without it the 0.2 s
    quartic filter biases the mass +0.5 %, outside its 95 % interval."""
    known = rotor_inertia_kg_m2 * np.nan_to_num(deriv.qdd)  # Ic * (g * a): the filtered rotor torque either way
    fit, rows = fit_columns(
        deriv,
        tau,
        lambda q, qd, qdd, fqd: pendulum_columns(q, qd, qdd, length_m, gravity_m_s2, friction_qd=fqd),
        PENDULUM_TERMS,
        known_torque_nm=known,
        selection=selection,
        torque_cap_nm=torque_cap_nm,
        compensate_noise=compensate_noise,
        filter_torque=filter_torque,
        bootstrap=bootstrap,
        limits=limits,
        joint=joint,
    )
    model = PendulumModel(
        fit.value("mass_kg"),
        fit.value("damping_nm_s_rad"),
        fit.value("friction_nm"),
        length_m,
        rotor_inertia_kg_m2,
        gravity_m_s2,
    )
    return JointFit(model, fit, rows)
