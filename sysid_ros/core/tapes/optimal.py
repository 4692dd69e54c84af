"""The `optimal` tape: motion designed for the model, a periodic band-limited Fourier series per joint (Swevers,
Gansemann, Tukel, de Schutter & van Brussel 1997) whose coefficients make the base-parameter regressor the
identification will fit as informative as the envelope allows.

Each joint moves q(t) = start + sum_l s_l sin(l w t) + c_l (cos(l w t) - 1), l = 1..harmonics, w = 2 pi base_hz,
for `periods` whole periods. The coefficients live in the null space of sum_l l s_l = 0 and sum_l l^2 c_l = 0, so
every period starts and ends at rest (position, velocity and acceleration) at the start pose: no window is needed
and the record is exactly periodic (averaged over periods, differentiated in the frequency domain: `linear.periodic`).

The regressor is the whole arm's (`linear.arm_regressor`: 10 inertial parameters per body; viscous, Coulomb,
armature and offset per joint) reduced to its base parameters by QR with column pivoting, on a grid of
`design_samples` points per period. The default criterion, `intervals`, minimises the mean over base parameters of
log diag((W'W)^-1): the geometric mean of the predicted 95 % half-widths, whatever each parameter's unit;
`logdet` maximises log det(W'W) (D-optimal); `condition` minimises the condition number of the column-normalised
regressor (that one ignores amplitude). Travel, speed, acceleration and the model's inverse-dynamics torque enter as
quadratic penalties (limits: the rooms of `moves`, TORQUE_USE of the torque limit); seeded random starts, the best
refined by L-BFGS-B. The result is then made feasible exactly: each joint scaled about its start into its room on a
fine grid, the whole motion shrunk until the torque fits, and again until the MJCF's geometry stays `clearance_m`
clear of itself (`plan.self_collisions`). Deterministic for a seed; cached by its inputs (`cache_dir`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import zlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import scipy.linalg
import yaml
from scipy.optimize import minimize

from ..errors import ConfigError, EnvelopeError, SysidRosError
from ..files import load_yaml, model_path, read_bytes, replace_file
from .envelope import Envelope, check_tape
from .moves import TORQUE_USE, Room, rooms
from .plan import ArmModel, arm_model, self_collisions
from .tape import FourierCurve, Tape

CRITERIA = ("intervals", "logdet", "condition")
DESIGN_VERSION = 1  # part of the cache key: a change to the design's code that changes its result bumps it
PENALTY = 100.0
LEAD_S = 0.25  # rest before the first period and after the last


@dataclass(frozen=True)
class Design:
    """What shapes an optimal tape besides the envelopes, the model and the seed."""

    harmonics: int = 5
    base_hz: float = 0.2
    periods: int = 2
    criterion: str = "intervals"
    starts: int = 4
    max_iters: int = 30
    design_samples: int = 60
    clearance_m: float = 0.01

    def __post_init__(self) -> None:
        for name in ("harmonics", "periods", "starts", "design_samples"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"optimal tape {name} must be a whole number >= 1, got {value!r}", parameter=name)
        if not 2 <= self.harmonics <= 20:
            raise ConfigError(f"optimal tape harmonics must be 2..20, got {self.harmonics}", parameter="harmonics")
        if isinstance(self.max_iters, bool) or not isinstance(self.max_iters, int) or self.max_iters < 0:
            raise ConfigError(f"optimal tape max_iters must be >= 0, got {self.max_iters!r}", parameter="max_iters")
        if not (math.isfinite(self.base_hz) and self.base_hz > 0):
            raise ConfigError(f"optimal tape base_hz must be positive, got {self.base_hz}", parameter="base_hz")
        if not (math.isfinite(self.clearance_m) and self.clearance_m >= 0):
            raise ConfigError(f"clearance_m must be >= 0, got {self.clearance_m}", parameter="clearance_m")
        if self.criterion not in CRITERIA:
            raise ConfigError(f"criterion must be one of {CRITERIA}, got {self.criterion!r}", parameter="criterion")
        if self.design_samples < 4 * self.harmonics:
            raise ConfigError(
                f"design_samples must be at least 4 x harmonics ({4 * self.harmonics})", parameter="design_samples"
            )

    @property
    def period_s(self) -> float:
        return 1.0 / self.base_hz


def _null_basis(weights: np.ndarray) -> np.ndarray:
    """Orthonormal basis (L, L-1) of the coefficient vectors c with weights @ c = 0."""
    return scipy.linalg.null_space(weights[None, :])


class _Problem:
    """The design's objective on a grid of one period: criterion plus envelope penalties, in unscaled units."""

    def __init__(
        self,
        am: ArmModel,
        joints: tuple[str, ...],
        rooms_: list[Room],
        envelopes: Mapping[str, Envelope],
        design: Design,
    ) -> None:
        self.am, self.design, self.joints = am, design, joints
        order = np.arange(1, design.harmonics + 1)
        self.omega = 2 * math.pi * design.base_hz * order
        self.ns, self.nc = _null_basis(order.astype(float)), _null_basis(order.astype(float) ** 2)
        self.start = np.array([r.start for r in rooms_])
        self.low, self.high = np.array([r.low for r in rooms_]), np.array([r.high for r in rooms_])
        self.speed, self.accel = np.array([r.speed for r in rooms_]), np.array([r.accel for r in rooms_])
        self.torque = TORQUE_USE * np.array([envelopes[j].max_torque_nm for j in joints])
        self.unit = 0.5 * (self.high - self.low) / design.harmonics  # x of order 1 moves a joint about its room
        self.n_free = design.harmonics - 1

    def coefficients(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(J, L) sine and cosine position coefficients of the free variables x (J * 2 (L - 1))."""
        x = np.asarray(x, dtype=float).reshape(len(self.joints), 2, self.n_free)
        return (x[:, 0] @ self.ns.T) * self.unit[:, None], (x[:, 1] @ self.nc.T) * self.unit[:, None]

    def motion(self, sines: np.ndarray, cosines: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, ...]:
        """q, qd, qdd (N, J) at times tau into a period."""
        phase = np.multiply.outer(tau, self.omega)
        sin, cos = np.sin(phase), np.cos(phase)
        q = self.start + sin @ sines.T + (cos - 1.0) @ cosines.T
        qd = cos @ (self.omega * sines).T - sin @ (self.omega * cosines).T
        qdd = -(sin @ (self.omega**2 * sines).T + cos @ (self.omega**2 * cosines).T)
        return q, qd, qdd

    def regressor(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Base regressor rows (N * J, rank) and the model's torque (N, J), in the tape's joint order."""
        w, torque = self.am.rows(q, qd, qdd)
        return w.reshape(-1, self.am.base.rank), torque

    def criterion(self, rows: np.ndarray) -> float:
        gram = rows.T @ rows
        if self.design.criterion == "condition":
            norms = np.linalg.norm(rows, axis=0)
            s = np.linalg.svd(rows / np.where(norms > 0, norms, 1.0), compute_uv=False)
            return float(np.log(s[0] / s[-1])) if s[-1] > 0 else 1e3
        try:
            chol = np.linalg.cholesky(gram)
        except np.linalg.LinAlgError:
            return 1e3
        if self.design.criterion == "logdet":
            return float(-2.0 * np.sum(np.log(np.diag(chol))) / len(gram))
        inv = scipy.linalg.solve_triangular(chol, np.eye(len(gram)), lower=True)
        return float(np.mean(np.log(np.sum(inv**2, axis=0))))

    def penalty(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, torque: np.ndarray) -> float:
        over = [
            np.maximum(q - self.high, self.low - q) / (0.5 * (self.high - self.low)),
            np.abs(qd) / self.speed - 1.0,
            np.abs(qdd) / self.accel - 1.0,
            np.abs(torque) / self.torque - 1.0,
        ]
        return float(sum(np.sum(np.maximum(o, 0.0) ** 2) for o in over))

    def objective(self, x: np.ndarray) -> float:
        tau = np.arange(self.design.design_samples) / (self.design.design_samples * self.design.base_hz)
        q, qd, qdd = self.motion(*self.coefficients(x), tau)
        rows, torque = self.regressor(q, qd, qdd)
        return self.criterion(rows) + PENALTY * self.penalty(q, qd, qdd, torque)

    def fit_kinematics(self, sines: np.ndarray, cosines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each joint scaled about its start until travel, speed and acceleration fit its room on a fine grid."""
        tau = np.linspace(0.0, 1.0 / self.design.base_hz, 100 * self.design.harmonics * 20 + 1)
        q, qd, qdd = self.motion(sines, cosines, tau)
        up, down = q.max(axis=0) - self.start, self.start - q.min(axis=0)
        with np.errstate(divide="ignore"):
            f = np.minimum.reduce(
                [
                    np.ones(len(self.start)),
                    np.where(up > 0, (self.high - self.start) / up, np.inf),
                    np.where(down > 0, (self.start - self.low) / down, np.inf),
                    self.speed / np.abs(qd).max(axis=0),
                    self.accel / np.abs(qdd).max(axis=0),
                ]
            )
        f = 0.999 * np.nan_to_num(f, nan=1.0, posinf=1.0)
        return sines * f[:, None], cosines * f[:, None]

    def torque_ratio(self, sines: np.ndarray, cosines: np.ndarray) -> float:
        """Peak |model torque| / (TORQUE_USE x limit) over one period, 40 points per cycle of the top harmonic."""
        tau = np.linspace(0.0, 1.0 / self.design.base_hz, 40 * self.design.harmonics + 1)
        _, torque = self.regressor(*self.motion(sines, cosines, tau))
        return float(np.max(np.abs(torque) / self.torque))


def _rng(seed: int) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"tape seed must be a non-negative integer, got {seed!r}")
    return np.random.default_rng([int(seed), zlib.crc32(b"optimal")])


def design_coefficients(
    am: ArmModel,
    joints: tuple[str, ...],
    rooms_: list[Room],
    envelopes: Mapping[str, Envelope],
    design: Design,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(J, L) sine and cosine coefficients about each joint's start: optimised, then made to fit the envelope."""
    problem = _Problem(am, joints, rooms_, envelopes, design)
    rng = _rng(seed)
    candidates = []
    for _ in range(design.starts):  # random shapes, each scaled into the room: the best one is refined
        x = rng.normal(0.0, 1.0, (len(joints), 2, problem.n_free))
        s, c = problem.fit_kinematics(*problem.coefficients(x))
        x = np.concatenate(
            [(s / problem.unit[:, None]) @ problem.ns, (c / problem.unit[:, None]) @ problem.nc], axis=1
        ).ravel()
        candidates.append((problem.objective(x), x))
    best = min(candidates, key=lambda item: item[0])[1]
    if design.max_iters:
        got = minimize(problem.objective, best, method="L-BFGS-B", options={"maxiter": design.max_iters})
        best = got.x if np.isfinite(got.fun) else best
    sines, cosines = problem.fit_kinematics(*problem.coefficients(best))
    for _ in range(60):  # shrink about the start pose until the model's torque fits
        if problem.torque_ratio(sines, cosines) <= 0.999:
            break
        sines, cosines = 0.95 * sines, 0.95 * cosines
    else:
        raise EnvelopeError(
            "no optimal motion keeps the model's torque inside the envelope: the start pose itself "
            "needs more than the torque limit allows",
            limit="torque",
        )
    for _ in range(40):  # and until the arm stays clear of itself
        tau = np.linspace(0.0, 1.0 / design.base_hz, 40 * design.harmonics + 1)
        q_model = np.zeros((len(tau), am.model.nq))
        q_model[:, am.dof_of_joint] = problem.motion(sines, cosines, tau)[0]
        hits = self_collisions(am.model, q_model, design.clearance_m)
        if not hits:
            return sines, cosines
        sines, cosines = 0.9 * sines, 0.9 * cosines
    raise EnvelopeError(
        f"no optimal motion keeps the arm clear of itself: {hits[0]} at the start pose", limit="collision"
    )


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sysid_ros" / "tapes"


def cache_key(
    model: str | Path,
    envelopes: Mapping[str, Envelope],
    start: Mapping[str, float] | None,
    command_rate_hz: float,
    seed: int,
    design: Design,
    name: str,
) -> str:
    """A hash of everything the design depends on: the model file's bytes, envelopes, start, rate, seed, design."""
    path = model_path(str(model))
    inputs = {
        "version": DESIGN_VERSION,
        "model": hashlib.sha256(read_bytes(path, "model file")).hexdigest(),
        "envelopes": {j: e.to_dict() for j, e in envelopes.items()},
        "start": {j: float(v) for j, v in (start or {}).items()},
        "rate": float(command_rate_hz),
        "seed": int(seed),
        "design": asdict(design),
        "name": name,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:20]


def _cached(path: Path, envelopes: Mapping[str, Envelope]) -> Tape | None:
    """The tape in a cache file, or None when there is none or it is unreadable or no longer fits."""
    if not path.is_file():
        return None
    try:
        tape = Tape.from_dict(load_yaml(path, "cached optimal tape"))
        check_tape(tape, envelopes)
    except SysidRosError:
        return None
    return tape


def optimal(
    envelopes: Mapping[str, Envelope],
    command_rate_hz: float,
    *,
    model: str | Path | None = None,
    seed: int = 0,
    start: Mapping[str, float] | None = None,
    name: str | None = None,
    design: Design = Design(),
    cache_dir: str | Path | None = None,
    cache: bool = True,
) -> Tape:
    """A Fourier-series tape designed for `model`'s base regressor inside `envelopes` (see the module)."""
    if not model:
        raise ConfigError("an optimal tape is designed for a model: name one (tape_recorder: the model parameter)")
    rate = float(command_rate_hz)
    if not (math.isfinite(rate) and rate > 0.0):
        raise ConfigError(f"command_rate_hz must be positive and finite, got {command_rate_hz}")
    joints, rooms_ = rooms(envelopes, start)
    label = name or f"optimal-s{seed}"
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = folder / f"{label}-{cache_key(model, envelopes, start, rate, seed, design, label)}.yaml"
    if cache and (hit := _cached(path, envelopes)) is not None:
        return hit
    am = arm_model(model, joints)
    sines, cosines = design_coefficients(am, joints, rooms_, envelopes, design, seed)
    end = LEAD_S + design.periods * design.period_s + LEAD_S
    curves = tuple(
        FourierCurve(
            LEAD_S,
            design.period_s,
            design.periods,
            end,
            r.start - float(np.sum(c)),
            tuple(float(v) for v in s),
            tuple(float(v) for v in c),
        )
        for r, s, c in zip(rooms_, sines, cosines)
    )
    tape = Tape(
        name=label, kind="optimal", interface="position", joints=joints, curves=curves, command_rate_hz=rate, seed=seed
    )
    check_tape(tape, envelopes)
    if cache:
        folder.mkdir(parents=True, exist_ok=True)
        replace_file(path, yaml.safe_dump(tape.to_dict(), sort_keys=False).encode())
    return tape
