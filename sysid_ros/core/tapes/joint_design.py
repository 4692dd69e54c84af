"""The `optimal` idea for one servo joint: a short periodic Fourier-series tape designed for the joint's own regressor.

A servo tuner fits tau = J qdd + b qd + tc tanh(qd / 0.01) + gs sin q + gc cos q (`linear.joint_columns`): five
columns, none of which depends on the parameters, so the design needs no model. The joint moves
q(t) = start + sum_l s_l sin(l w t) + c_l (cos(l w t) - 1), l = 1..harmonics, with sum_l l s_l = 0 and
sum_l l^2 c_l = 0 (at rest at the start pose where each period starts: `tape.FourierCurve`). For a shape (the
coefficients in that null space) the motion is scaled about the start into the joint's room (travel, speed and
acceleration, `moves.room`, with the builders' SCALE_MARGIN; `travel_share` of the travel either side: a poorly
damped loop overshoots a tape that reaches the room's edge at speed), so every shape the search sees is feasible; the
search (seeded random starts, each refined by Nelder-Mead) minimises the mean over the columns of
log diag((W'W / n)^-1), the geometric mean of the predicted interval half-widths per unit of motion time (the
`intervals` criterion of `tapes.optimal`). The period is picked from `period_candidates` by that same figure (an
information rate, so a short period is not favoured for its length), its harmonics kept under the chirp's top
frequency (min(2 Hz, rate / 50)). Deterministic for a seed; a design (2-4 s) is kept in memory for the process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import scipy.linalg
from scipy.optimize import minimize

from ..errors import ConfigError
from ..linear import REVOLUTE_TERMS, joint_columns
from .envelope import Envelope, check_tape
from .kinds import LEAD_S, SCALE_MARGIN, chirp_top_hz
from .moves import Room, room
from .tape import FourierCurve, Tape


@dataclass(frozen=True)
class JointDesign:
    """What shapes a one-joint designed tape besides its envelope and rate."""

    periods: int = 2
    max_harmonics: int = 6
    period_candidates: tuple[float, ...] = (3.0, 4.0, 5.0, 6.0)
    starts: int = 24
    samples_per_harmonic: int = 40
    seed: int = 0
    travel_share: float = 0.75  # of the room either side of the start: a poorly damped loop overshoots its tape

    def __post_init__(self) -> None:
        for name in ("periods", "max_harmonics", "starts", "samples_per_harmonic", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (name != "seed"):
                raise ConfigError(f"joint design {name} must be a whole number >= 1, got {value!r}", parameter=name)
        if self.max_harmonics < 2:
            raise ConfigError(f"joint design max_harmonics must be >= 2, got {self.max_harmonics}")
        if not (math.isfinite(self.travel_share) and 0 < self.travel_share <= 1):
            raise ConfigError(f"joint design travel_share must be in (0, 1], got {self.travel_share}")
        if not self.period_candidates or not all(math.isfinite(p) and p > 0 for p in self.period_candidates):
            raise ConfigError(f"joint design period_candidates must be positive, got {self.period_candidates}")


def _null_basis(weights: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the vectors x with weights @ x = 0."""
    return scipy.linalg.null_space(weights[None, :])


@dataclass(frozen=True)
class _Shape:
    """The scaled motion of one shape on the design grid and its coefficients."""

    sines: np.ndarray
    cosines: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray


def _shape(
    x: np.ndarray,
    basis: tuple[np.ndarray, np.ndarray],
    phase: np.ndarray,
    omega: np.ndarray,
    r: Room,
    travel_share: float = 1.0,
) -> _Shape:
    """Coefficients from null-space coordinates `x`, scaled into the room about r.start."""
    ns, nc = basis
    s, c = ns @ x[: ns.shape[1]], nc @ x[ns.shape[1] :]
    sin, cos = np.sin(phase), np.cos(phase)
    dev = sin @ s + cos @ c - np.sum(c)
    d1 = cos @ (omega * s) - sin @ (omega * c)
    d2 = -(sin @ (omega**2 * s) + cos @ (omega**2 * c))
    up, down = max(float(dev.max()), 1e-12), max(float(-dev.min()), 1e-12)
    k = SCALE_MARGIN * min(
        travel_share * (r.high - r.start) / up,
        travel_share * (r.start - r.low) / down,
        r.speed / max(float(np.abs(d1).max()), 1e-12),
        r.accel / max(float(np.abs(d2).max()), 1e-12),
    )
    return _Shape(k * s, k * c, r.start + k * dev, k * d1, k * d2)


def _score(shape: _Shape, terms: tuple[str, ...]) -> float:
    """Mean log diag((W'W / n)^-1): lower is narrower intervals per second of motion."""
    w = joint_columns(shape.q, shape.qd, shape.qdd, terms)
    info = w.T @ w / len(w)
    try:
        inverse = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return math.inf
    diag = np.diag(inverse)
    return float(np.mean(np.log(diag))) if np.all(diag > 0) and np.all(np.isfinite(diag)) else math.inf


def _design(
    r: Room, period_s: float, harmonics: int, terms: tuple[str, ...], design: JointDesign
) -> tuple[float, _Shape]:
    """The best shape for one period length: (score, shape)."""
    order = np.arange(1, harmonics + 1, dtype=float)
    omega = 2 * math.pi * order / period_s
    t = np.arange(design.samples_per_harmonic * harmonics) * period_s / (design.samples_per_harmonic * harmonics)
    phase = np.multiply.outer(t, omega)
    basis = (_null_basis(order), _null_basis(order**2))
    dims = basis[0].shape[1] + basis[1].shape[1]
    rng = np.random.default_rng([design.seed, harmonics, round(1e3 * period_s)])

    def cost(x: np.ndarray) -> float:
        return _score(_shape(x, basis, phase, omega, r, design.travel_share), terms) if np.any(x) else math.inf

    best: tuple[float, np.ndarray] = (math.inf, np.zeros(dims))
    for _ in range(design.starts):
        x0 = rng.standard_normal(dims) / np.tile(order[: dims // 2 + 1], 2)[:dims]
        got = minimize(cost, x0, method="Nelder-Mead", options={"maxiter": 300 * dims, "xatol": 1e-4, "fatol": 1e-5})
        if got.fun < best[0]:
            best = (float(got.fun), got.x)
    return best[0], _shape(best[1], basis, phase, omega, r, design.travel_share)


@lru_cache(maxsize=64)
def _best(r: Room, top_hz: float, terms: tuple[str, ...], design: JointDesign) -> tuple[float, float, _Shape] | None:
    """(score, period, shape) of the best period candidate; None if none has two harmonics under `top_hz`."""
    best: tuple[float, float, _Shape] | None = None
    for period in design.period_candidates:
        harmonics = min(design.max_harmonics, int(math.floor(top_hz * period + 1e-9)))
        if harmonics < 2:
            continue
        score, shape = _design(r, period, harmonics, terms, design)
        if best is None or score < best[0]:
            best = (score, period, shape)
    return best


def joint_optimal(
    joint: str,
    envelope: Envelope,
    command_rate_hz: float,
    *,
    start: float | None = None,
    terms: tuple[str, ...] = REVOLUTE_TERMS,
    name: str = "ident-designed",
    design: JointDesign = JointDesign(),
) -> Tape:
    """A periodic Fourier-series tape for one joint, designed for its `terms` within its envelope (see the module)."""
    rate = float(command_rate_hz)
    if not (math.isfinite(rate) and rate > 0.0):
        raise ConfigError(f"command_rate_hz must be positive and finite, got {command_rate_hz}")
    r = room(envelope, start, joint=joint)
    best = _best(r, chirp_top_hz(rate), tuple(terms), replace(design, periods=1))  # the shape is the periods'
    if best is None or not math.isfinite(best[0]):
        raise ConfigError(f"no designed tape fits: the periods {design.period_candidates} s are too short", joint=joint)
    _, period, shape = best
    curve = FourierCurve(
        LEAD_S,
        period,
        design.periods,
        LEAD_S + design.periods * period + LEAD_S,
        r.start - float(np.sum(shape.cosines)),
        tuple(float(v) for v in shape.sines),
        tuple(float(v) for v in shape.cosines),
    )
    tape = Tape(
        name=name, kind="optimal", interface="position", joints=(joint,), curves=(curve,), command_rate_hz=rate, seed=0
    )
    check_tape(tape, {joint: envelope})
    return tape
