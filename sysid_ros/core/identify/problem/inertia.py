"""The 10 inertial parameters of a body in log-Cholesky coordinates (Rucker & Wensing, "Smooth Parameterization
of Rigid-Body Inertia", IEEE RA-L 2022): every coordinate vector is a physical body.

The 4x4 pseudo-inertia J = [[Sigma, h], [h', m]] (Sigma the second moment of mass about the body origin, h = m c
its first moment) is positive definite exactly when the body is physical (m > 0, inertia positive definite,
triangle inequalities strict). Writing J = U U' with

    U = e^alpha [[e^d1, s12, s13, t1], [0, e^d2, s23, t2], [0, 0, e^d3, t3], [0, 0, 0, 1]]

maps every theta = (alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3) in R^10 to a positive definite J, and back.
Read off: m = e^(2 alpha), centre of mass c = t, second moment about the centre Sigma_c = m A A' (A the upper
3x3 block), inertia about the centre I_c = tr(Sigma_c) 1 - Sigma_c. So t is the centre of mass in metres,
and A's entries are lengths (the body's extent): natural coordinates to bound and to put a prior on.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import ConfigError
from .file import COMPONENTS

COORDINATES = ("alpha", "d1", "d2", "d3", "s12", "s23", "s13", "t1", "t2", "t3")
"""log-Cholesky coordinates, in the order of the optimiser's vector."""
PHYSICAL = COMPONENTS["body_inertia"]
"""What a `body_inertia` result reports: kg, m (body frame), kg m^2 about the centre of mass (MuJoCo's
`fullinertia` order)."""
SECOND_MOMENT_FACTOR = 10.0
"""Default box: each of the body's second moments about its centre of mass within this factor of the nominal's
(each length e^d within its square root): a body keeps roughly its shape, as CAD gets a link's shape right
far better than its mass distribution's details."""
COM_BOX_RMS_RADII = 1.0
"""Default box: the centre of mass within this many of the body's rms radii (sqrt(tr Sigma_c / m)) of the
nominal centre per axis, at least `COM_BOX_MIN_M` (a centre outside the body's own extent is not that body)."""
COM_BOX_MIN_M = 0.02


def tensor_entries(tensor: np.ndarray) -> np.ndarray:
    """A symmetric 3x3 tensor as MuJoCo's `fullinertia` (ixx iyy izz ixy ixz iyz)."""
    return np.array([tensor[0, 0], tensor[1, 1], tensor[2, 2], tensor[0, 1], tensor[0, 2], tensor[1, 2]])


def tensor_from_entries(entries: np.ndarray) -> np.ndarray:
    xx, yy, zz, xy, xz, yz = (float(v) for v in entries)
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def from_coordinates(theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass, centre of mass, 3x3 inertia about the centre of mass) of a coordinate vector."""
    alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3 = (float(v) for v in theta)
    a = np.array([[math.exp(d1), s12, s13], [0.0, math.exp(d2), s23], [0.0, 0.0, math.exp(d3)]])
    mass = math.exp(2 * alpha)
    sigma_c = mass * (a @ a.T)
    return mass, np.array([t1, t2, t3]), np.trace(sigma_c) * np.eye(3) - sigma_c


def physical_vector(theta: np.ndarray) -> np.ndarray:
    """The 10 reported values (`PHYSICAL`) of a coordinate vector."""
    mass, com, tensor = from_coordinates(theta)
    return np.r_[mass, com, tensor_entries(tensor)]


def physical_problem(mass: float, tensor: np.ndarray) -> str | None:
    """Why (mass, inertia about the centre of mass) is not a physical body, or None when it is: mass > 0,
    eigenvalues > 0 and strict triangle inequalities (equivalently, Sigma_c positive definite)."""
    if not (math.isfinite(mass) and mass > 0):
        return f"mass {mass:g} kg is not positive"
    tensor = np.asarray(tensor, dtype=float)
    if not np.all(np.isfinite(tensor)) or not np.allclose(tensor, tensor.T, rtol=0, atol=1e-15 * np.abs(tensor).max()):
        return "the inertia tensor is not a finite symmetric matrix"
    sigma_c = 0.5 * np.trace(tensor) * np.eye(3) - tensor
    low = float(np.linalg.eigvalsh(sigma_c).min())
    if low <= 0:
        principal = np.linalg.eigvalsh(tensor)
        return (
            f"principal moments {', '.join(f'{v:.4g}' for v in principal)} kg m^2 violate positivity or the "
            "triangle inequality (A + B > C)"
        )
    return None


def to_coordinates(mass: float, com: np.ndarray, tensor: np.ndarray) -> np.ndarray:
    """The coordinates of a physical body (ConfigError naming what is unphysical otherwise)."""
    problem = physical_problem(mass, tensor)
    if problem is not None:
        raise ConfigError(f"not a physical body: {problem}")
    sigma = (0.5 * np.trace(tensor) * np.eye(3) - np.asarray(tensor, dtype=float)) / mass  # A A'
    flip = np.eye(3)[::-1]
    a = flip @ np.linalg.cholesky(flip @ sigma @ flip) @ flip  # upper triangular, A A' = sigma
    return np.array([0.5 * math.log(mass), *np.log(np.diag(a)), a[0, 1], a[1, 2], a[0, 2], *np.asarray(com, float)])


def from_physical(values: np.ndarray) -> np.ndarray:
    """Coordinates of the 10 reported values (mass, com, ixx iyy izz ixy ixz iyz)."""
    values = np.asarray(values, dtype=float)
    return to_coordinates(float(values[0]), values[1:4], tensor_from_entries(values[4:10]))


def physical_jacobian(theta: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """d(physical_vector)/d(theta), 10x10, by central differences (the map is smooth: exp and products)."""
    theta = np.asarray(theta, dtype=float)
    out = np.zeros((10, 10))
    for k in range(10):
        e = np.zeros(10)
        e[k] = step
        out[:, k] = (physical_vector(theta + e) - physical_vector(theta - e)) / (2 * step)
    return out


def com_half_width(mass: float, tensor: np.ndarray) -> float:
    """How far (per axis) a default box lets the centre of mass move: COM_BOX_RMS_RADII of the body's rms
    radius sqrt(tr Sigma_c / m) = sqrt(tr I_c / (2 m)), at least COM_BOX_MIN_M."""
    return max(COM_BOX_RMS_RADII * math.sqrt(0.5 * float(np.trace(tensor)) / mass), COM_BOX_MIN_M)


def coordinate_box(theta0: np.ndarray, mass_min: float, mass_max: float) -> tuple[np.ndarray, np.ndarray]:
    """Default bounds around a body's nominal coordinates: mass in [mass_min, mass_max]; each length e^d within
    sqrt(SECOND_MOMENT_FACTOR) of the nominal; each off-diagonal length s within the body's rms radius of the
    nominal; the centre of mass within COM_BOX_RMS_RADII rms radii (at least COM_BOX_MIN_M) per axis."""
    theta0 = np.asarray(theta0, dtype=float)
    mass, _, tensor = from_coordinates(theta0)
    radius = math.sqrt(0.5 * np.trace(tensor) / mass)  # sqrt(tr Sigma_c / m)
    lengths = 0.5 * math.log(SECOND_MOMENT_FACTOR)
    com = com_half_width(mass, tensor)
    half = np.r_[0.0, [lengths] * 3, [radius] * 3, [com] * 3]
    lo, hi = theta0 - half, theta0 + half
    lo[0], hi[0] = 0.5 * math.log(mass_min), 0.5 * math.log(mass_max)
    return lo, hi


def propagate_half_widths(theta: np.ndarray, covariance: np.ndarray, half_widths: np.ndarray) -> np.ndarray:
    """95 % half-widths of the reported values from the coordinates' (first-order: through the map's Jacobian).

    `covariance` gives the coordinates' correlation, `half_widths` their (possibly widened) 95 % half-widths;
    a coordinate with an infinite half-width makes every value that depends on it infinite."""
    half_widths = np.asarray(half_widths, dtype=float)
    jac = physical_jacobian(theta)
    known = np.isfinite(half_widths)
    sd = np.sqrt(np.clip(np.diag(covariance), 0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.where(np.outer(sd, sd) > 0, covariance / np.outer(sd, sd), np.eye(len(sd)))
    h = np.where(known, half_widths, 0.0)
    out = np.sqrt(np.clip(np.diag(jac @ (h[:, None] * corr * h[None, :]) @ jac.T), 0, None))
    depends = np.abs(jac[:, ~known]) > 1e-12 * max(float(np.abs(jac).max()), 1e-300)
    out[np.any(depends, axis=1)] = math.inf
    return out
