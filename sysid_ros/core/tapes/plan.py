"""What a position tape will tell the identification of a whole arm, before anything moves: its `ExcitationPlan`.

The plan samples the tape at the record's rate over one period (periodic `optimal` tapes) or over its whole length
(any other tape), builds the base-parameter regressor the whole-arm regression fits (`linear.arm_regressor`), keeps
the equations the regression keeps (a joint's equation where that joint moves at least `slow_speed_rad_s`), and
predicts each base parameter's 95 % half-width for white torque noise of `torque_noise_nm` per sample:
1.96 sqrt(diag(G^-1 (sum_rows sigma_j^2 w w') G^-1)) with G = sum_rows w w', over all periods (averaging N periods
first gives the same). With it: the condition number of the column-normalised regressor, the seconds of motion,
each joint's margin to every limit (1 - peak / limit; the torque is the model's inverse dynamics) and the pairs of
the MJCF's geometry that come within `clearance_m` of each other (`self_collisions`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from ..errors import ConfigError, DataError, ModelError
from ..files import load_spec
from ..linear import (
    KEEP_FACTOR,
    ArmRegressor,
    BaseParameters,
    Periods,
    RowSelection,
    condition_number,
    default_settle_s,
    structural_base_parameters,
)
from .envelope import Envelope
from .tape import FourierCurve, Tape, duration_s, sample

Z95 = 1.959963984540054
KEPT_ROWS = RowSelection()  # the rows `fit_arm` keeps by default


@dataclass(frozen=True, eq=False)
class ArmModel:
    """The compiled arm, its regressor and base parameters, and the tape's joints as the model's DOF order."""

    model: mujoco.MjModel
    arm: ArmRegressor
    base: BaseParameters
    theta: np.ndarray  # the model's own parameters: the torque the design must stay under
    dof_of_joint: np.ndarray  # column j of the tape is DOF dof_of_joint[j] of the model

    def rows(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Base regressor (N, J, rank) and the model's torque (N, J), both in the tape's joint order."""
        dof = self.dof_of_joint
        qm, qdm, qddm = (np.zeros((len(q), self.arm.nv)) for _ in range(3))
        qm[:, dof], qdm[:, dof], qddm[:, dof] = q, qd, qdd
        w = self.arm.compute(qm, qdm, qddm)
        return self.base.reduce(w)[:, dof], (w @ self.theta)[:, dof]


def arm_model(model: str | Path, joints: tuple[str, ...]) -> ArmModel:
    """The model as the identification will see it, for a tape over exactly its joints."""
    try:
        compiled = load_spec(model).compile()
    except ModelError:
        raise
    except Exception as exc:
        raise ModelError(f"model does not compile: {exc}", model=str(model)) from exc
    arm = ArmRegressor(compiled)
    missing = [j for j in joints if j not in arm.joint_names]
    unmoved = [j for j in arm.joint_names if j not in joints]
    if missing or unmoved:
        raise ConfigError(
            f"a plan or optimal tape covers the whole arm: joints {missing} are not in the model, "
            f"model joints {unmoved} are not in the tape",
            model=str(model),
        )
    dof = np.array([arm.joint_names.index(j) for j in joints])
    return ArmModel(compiled, arm, structural_base_parameters(arm), arm.true_parameters(), dof)


def self_collisions(model: mujoco.MjModel, q: np.ndarray, clearance_m: float = 0.01) -> tuple[str, ...]:
    """'body / body at sample k' for each pair of geoms closer than `clearance_m` along positions q (N, nq).

    Pairs MuJoCo itself filters (contype/conaffinity, one body), a body and its parent (the world counts as a
    parent) and planes are left out: what remains is the arm against itself and whatever the MJCF fixes to the
    world beside its first link (a table counts, a floor plane does not). Contacts are on even if the model
    disables them (an identification model often does)."""
    if model.ngeom == 0:
        return ()
    m = copy.copy(model)
    m.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    m.geom_margin[:] = clearance_m
    d = mujoco.MjData(m)
    weld, parent = m.body_weldid, m.body_parentid
    flat = (int(mujoco.mjtGeom.mjGEOM_PLANE), int(mujoco.mjtGeom.mjGEOM_HFIELD))
    found: dict[tuple[str, str], int] = {}
    for k, row in enumerate(np.atleast_2d(q)):
        d.qpos[:] = row
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        for g1, g2, dist in zip(d.contact.geom1[: d.ncon], d.contact.geom2[: d.ncon], d.contact.dist[: d.ncon]):
            if dist >= clearance_m or m.geom_type[g1] in flat or m.geom_type[g2] in flat:
                continue
            b1, b2 = weld[m.geom_bodyid[g1]], weld[m.geom_bodyid[g2]]
            if b1 == b2 or weld[parent[b1]] == b2 or weld[parent[b2]] == b1:
                continue
            names = tuple(
                sorted(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(b)) or f"body{b}" for b in (b1, b2))
            )
            found.setdefault(names, k)  # type: ignore[arg-type]
    return tuple(f"{a} / {b} at sample {k}" for (a, b), k in found.items())


def periods_of(tape: Tape) -> tuple[float, float, int]:
    """(start_s, period_s, periods) of a tape whose curves all share one period; else its whole length once."""
    curves = tape.curves
    if all(isinstance(c, FourierCurve) for c in curves):
        keys = {(c.start_s, c.period_s, c.periods) for c in curves}  # type: ignore[union-attr]
        if len(keys) == 1:
            return next(iter(keys))
    return 0.0, duration_s(tape), 1


PERIODIC_KEYS = ("kind", "period_s", "periods", "harmonics", "top_hz", "first_period_ns")


def periodic_metadata(tape: Tape, start_ns: int) -> dict[str, object] | None:
    """What a recorder stores with a periodic tape's bag (`periodic`) so the identification can average its
    periods: kind, period, periods, harmonics, top harmonic and when the first period starts on the robot's clock
    (`start_ns` is the robot time of the tape's t = 0). None for a tape that is not periodic."""
    curves = tape.curves
    if not curves or not all(isinstance(c, FourierCurve) for c in curves):
        return None
    start_s, period_s, periods = periods_of(tape)
    if periods < 1 or len({(c.start_s, c.period_s, c.periods) for c in curves}) != 1:  # type: ignore[union-attr]
        return None
    harmonics = max(len(c.sines) for c in curves)  # type: ignore[union-attr]
    return {
        "kind": tape.kind,
        "period_s": float(period_s),
        "periods": int(periods),
        "harmonics": int(harmonics),
        "top_hz": float(harmonics / period_s),
        "first_period_ns": int(start_ns) + round(start_s * 1e9),
    }


def recorded_periods(metadata: Mapping[str, object]) -> Periods | None:
    """The periods a bag's recorded metadata states (its `periodic` entry, else its periodic `tape` played from
    `start_ns`); None when it states none (a bag another tool recorded, a tape that is not periodic)."""
    entry = metadata.get("periodic")
    if entry is None and isinstance(metadata.get("tape"), Mapping) and metadata.get("start_ns") is not None:
        try:
            entry = periodic_metadata(Tape.from_dict(metadata["tape"]), int(metadata["start_ns"]))  # type: ignore[arg-type]
        except (ConfigError, TypeError, ValueError) as exc:
            raise DataError(f"the recorded tape cannot be read: {exc}") from None
    if entry is None:
        return None
    if not isinstance(entry, Mapping) or any(k not in entry for k in PERIODIC_KEYS):
        raise DataError(f"the recorded `periodic` entry needs {', '.join(PERIODIC_KEYS)}; got {entry!r}")
    try:
        period_s, periods = float(entry["period_s"]), entry["periods"]  # type: ignore[arg-type]
        top_hz, first = float(entry["top_hz"]), int(entry["first_period_ns"])  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise DataError(f"the recorded `periodic` entry is not numeric: {exc}") from None
    if isinstance(periods, bool) or not isinstance(periods, int) or periods < 1:
        raise DataError(f"the recorded `periodic` entry needs whole periods >= 1, got {periods!r}")
    if not (math.isfinite(period_s) and period_s > 0 and math.isfinite(top_hz) and top_hz > 0):
        raise DataError(f"the recorded period and top harmonic must be positive, got {period_s}, {top_hz}")
    return Periods(first, period_s, periods, KEEP_FACTOR * top_hz, default_settle_s(period_s, periods), "recorded tape")


@dataclass(frozen=True, eq=False)
class ExcitationPlan:
    """The figures of a tape for the identification of a whole arm (see the module)."""

    tape_name: str
    base_names: tuple[str, ...]
    base_values: np.ndarray  # the model's own base parameter values (for relative widths)
    half_width_95: np.ndarray  # predicted, per base parameter
    condition_number: float
    torque_noise_nm: np.ndarray  # per joint, per sample
    sample_rate_hz: float
    motion_s: float
    periods: int
    rows: int  # equations the regression will keep, over all periods
    margins: dict[str, dict[str, float]]  # joint -> limit -> 1 - peak / limit
    collisions: tuple[str, ...]
    geoms: int

    @property
    def relative_half_width(self) -> np.ndarray:
        """Predicted half-width over |the model's value| (inf where the model's value is 0)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.base_values != 0, self.half_width_95 / np.abs(self.base_values), np.inf)

    def min_margin(self) -> dict[str, float]:
        return {joint: min(m.values()) for joint, m in self.margins.items()}

    def summary(self) -> list[str]:
        """The plan as lines of text."""
        lines = [
            (
                f"tape {self.tape_name}: {self.motion_s:.2f} s of motion ({self.periods} period(s)), "
                f"{len(self.base_names)} base parameters, condition number {self.condition_number:.3g}"
            ),
            (
                f"predicted 95 % half-widths for {np.max(self.torque_noise_nm):.3g} N m torque noise at "
                f"{self.sample_rate_hz:g} Hz: median {np.median(self.half_width_95):.3g}, "
                f"median relative {np.median(self.relative_half_width):.3g}"
            ),
        ]
        for joint, m in self.margins.items():
            lines.append(f"  {joint}: margins " + ", ".join(f"{k} {v:.0%}" for k, v in m.items()))
        lines.append(f"self-collision ({self.geoms} geoms): " + ("; ".join(self.collisions) or "clear"))
        return lines


def plan(
    tape: Tape,
    envelopes: Mapping[str, Envelope],
    model: str | Path,
    *,
    torque_noise_nm: float | np.ndarray = 0.1,
    sample_rate_hz: float | None = None,
    selection: RowSelection = KEPT_ROWS,
    clearance_m: float = 0.01,
    am: ArmModel | None = None,
) -> ExcitationPlan:
    """The tape's `ExcitationPlan` for `model` (a position tape over every joint of the arm)."""
    if tape.interface != "position":
        raise ConfigError("a plan is for position tapes: an effort tape's motion depends on the plant", tape=tape.name)
    rate = float(sample_rate_hz or tape.command_rate_hz)
    if not (math.isfinite(rate) and rate > 0):
        raise ConfigError(f"sample_rate_hz must be positive, got {sample_rate_hz}", tape=tape.name)
    am = am or arm_model(model, tape.joints)
    sigma = np.broadcast_to(np.asarray(torque_noise_nm, dtype=float), (len(tape.joints),))
    if not (np.all(np.isfinite(sigma)) and np.all(sigma > 0)):
        raise ConfigError(f"torque_noise_nm must be positive, got {torque_noise_nm}", tape=tape.name)
    start, period, periods = periods_of(tape)
    t = start + np.arange(max(round(period * rate), 2)) / rate
    got = sample(tape, t)
    w, torque = am.rows(got.position, got.velocity, got.acceleration)
    keep = np.abs(got.velocity) >= max(selection.slow_speed_rad_s, selection.moving_speed_rad_s)
    rows, weights = w[keep], np.broadcast_to(sigma, keep.shape)[keep]
    gram = periods * rows.T @ rows
    middle = periods * (rows * weights[:, None] ** 2).T @ rows
    try:
        inv = np.linalg.inv(gram)
        half = Z95 * np.sqrt(np.clip(np.diag(inv @ middle @ inv), 0.0, None))
    except np.linalg.LinAlgError:
        half = np.full(am.base.rank, np.inf)
    margins = {}
    for j, joint in enumerate(tape.joints):
        env = envelopes[joint]
        accel = env.max_accel_rad_s2 or env.design_accel_rad_s2
        margins[joint] = {
            "travel": 1 - np.max(np.abs(got.position[:, j] - env.origin_rad)) / env.travel_rad,
            "speed": 1 - np.max(np.abs(got.velocity[:, j])) / env.max_speed_rad_s,
            "acceleration": 1 - np.max(np.abs(got.acceleration[:, j])) / accel,
            "torque": 1 - np.max(np.abs(torque[:, j])) / env.max_torque_nm,
        }
        margins[joint] = {k: float(v) for k, v in margins[joint].items()}
    q_model = np.zeros((len(t), am.model.nq))
    q_model[:, am.dof_of_joint] = got.position
    every = max(1, len(t) // 400)
    return ExcitationPlan(
        tape.name,
        am.base.base_names,
        am.base.values(am.theta),
        half,
        condition_number(rows) if len(rows) else math.inf,
        np.array(sigma),
        rate,
        periods * period if periods > 1 or isinstance(tape.curves[0], FourierCurve) else duration_s(tape),
        periods,
        int(periods * len(rows)),
        margins,
        self_collisions(am.model, q_model[::every], clearance_m),
        int(am.model.ngeom),
    )
