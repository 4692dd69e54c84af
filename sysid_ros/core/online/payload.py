"""A whole arm's payload as an online window model: tau - tau_model(q, qd, qdd) = W_body(q, qd, qdd) theta.

The arm (every link, its damping, friction and armature) comes from a MuJoCo model — the nominal or the
identified one; what it does not know is a rigid payload on `body` (the flange). The payload's inertial
parameters add to that body's in the arm regressor (`arm_regressor.ArmRegressor`, 10 standard parameters
per body in its own frame), so the window model's columns are the body's columns for the payload terms
and the known torque is the full regressor times the model's parameters. With the rest of the arm known,
the flange body's 10 columns are independent (checked at construction from random states: the mass and
the first moments are identifiable on their own even where the whole-arm base parameters lump the last
links together); by default the mass and the first moments (mass times the centre of mass, in the
flange frame) are estimated, the inertia optionally.

Each row's regressor is computed once (about 80 us for a 7-joint arm) and cached by sample time: the
window fits and the detector's checks share the rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import mujoco
import numpy as np

from ..errors import ConfigError, ModelError
from ..files import load_spec, model_path
from ..identify import prepare_urdf_spec
from ..linear import ArmRegressor, RowSelection, base_parameters
from .config import OnlineConfig

NS = 1_000_000_000
PAYLOAD_NAMES = {
    "m": "mass_kg",
    "mx": "mx_kg_m",
    "my": "my_kg_m",
    "mz": "mz_kg_m",
    "Ixx": "ixx_kg_m2",
    "Ixy": "ixy_kg_m2",
    "Iyy": "iyy_kg_m2",
    "Ixz": "ixz_kg_m2",
    "Iyz": "iyz_kg_m2",
    "Izz": "izz_kg_m2",
}
FIRST_MOMENTS = ("mass_kg", "mx_kg_m", "my_kg_m", "mz_kg_m")
WITH_INERTIA = tuple(PAYLOAD_NAMES.values())
_FLOORS = {"mass_kg": 1.0, "mx_kg_m": 0.05, "my_kg_m": 0.05, "mz_kg_m": 0.05}  # inertia: 0.01 kg m^2
# the smallest change that is an event (`OnlineConfig.change_floor`): 50 g, 0.02 kg m (1 kg moving 2 cm), 0.005 kg m^2
CHANGE_FLOORS = {"mass_kg": 0.05, "mx_kg_m": 0.02, "my_kg_m": 0.02, "mz_kg_m": 0.02}
INERTIA_CHANGE_FLOOR = 0.005
SCALE_LENGTH_M = 0.1  # a payload's first moments are judged against mass x this, its inertia against mass x this^2
CACHE_S = 6.0  # seconds of regressor rows kept
STATE_TOLERANCE = 1e-6  # rad, rad/s, rad/s^2: a cached row is reused for a state this close


def load_model(path: str | Path) -> mujoco.MjModel:
    """An embedded model name or an MJCF/URDF file as a compiled model (a URDF made ready as `identify` makes
    it: no fusing, contacts off); ModelError naming the file if it does not load."""
    try:
        spec = load_spec(path)
        if model_path(str(path)).suffix == ".urdf":
            prepare_urdf_spec(spec, source=str(path))
        return spec.compile()
    except ModelError:
        raise
    except Exception as exc:  # mujoco raises ValueError with the parser's message
        raise ModelError(
            f"cannot load the model: {str(exc).splitlines()[0] if str(exc) else exc}", model=str(path)
        ) from exc


class PayloadWindowModel:
    """The window model of a payload on `body` of an arm (see the module docstring).

    `names` are the payload's parameters (`FIRST_MOMENTS` or `WITH_INERTIA`): mass, first moments
    m*c (kg m) and inertia about the body's origin (kg m^2), all in the body's frame. `joints` are the
    model's joints in its degree-of-freedom order: the samples must carry all of them.
    """

    kind = "payload"

    def __init__(
        self,
        model: mujoco.MjModel,
        body: str,
        names: Sequence[str] = FIRST_MOMENTS,
        scale_floor: Mapping[str, float] | None = None,
        coulomb_band_rad_s: float = 0.01,
    ) -> None:
        by_name = {v: k for k, v in PAYLOAD_NAMES.items()}
        unknown = [n for n in names if n not in by_name]
        if unknown or not names:
            raise ConfigError(f"unknown payload parameters {unknown}; known: {tuple(PAYLOAD_NAMES.values())}")
        if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body) <= 0:
            raise ModelError("the payload's body is not a moving body of the model", body=body)
        self.arm = ArmRegressor(model, coulomb_band_rad_s=coulomb_band_rad_s)
        self.body = body
        self.names = tuple(names)
        index = {n: i for i, n in enumerate(self.arm.names)}
        self._cols = np.array([index[f"{body}.{by_name[n]}"] for n in self.names])
        theta = self.arm.true_parameters()
        self._known_theta = theta.copy()  # the payload adds to the body: the body's own values stay known
        self.scale_floor = {n: float((scale_floor or {}).get(n, _FLOORS.get(n, 0.01))) for n in self.names}
        self._check_identifiable()
        self._cache_t = np.zeros(0, dtype=np.int64)
        self._cache_phi = np.zeros((0, self.arm.nv, len(self.names)))
        self._cache_known = np.zeros((0, self.arm.nv))
        self._cache_state = np.zeros((0, 3 * self.arm.nv))

    @property
    def joints(self) -> tuple[str, ...]:
        return self.arm.joint_names

    def floors(self) -> np.ndarray:
        return np.array([self.scale_floor[n] for n in self.names])

    def _check_identifiable(self) -> None:
        base = base_parameters(_random_columns(self.arm, self._cols), self.names)
        if base.rank < len(self.names):
            raise ModelError(
                f"the payload parameters on {self.body} are not identifiable from joint torques: "
                f"{base.combined_only or base.unidentifiable}",
                body=self.body,
            )

    def change_scale(self, values: np.ndarray) -> np.ndarray:
        """Per parameter, the scale a change is judged against: the payload's own. The mass: max(|m|, floor);
        a first moment: max(|h_i|, |m| `SCALE_LENGTH_M`, floor); an inertia term: max(|I_ij|, |m|
        `SCALE_LENGTH_M`^2, floor). (A 1.5 kg payload's centre moving 1.5 mm is no change.)"""
        v = np.nan_to_num(np.asarray(values, dtype=float))
        m = abs(v[self.names.index("mass_kg")]) if "mass_kg" in self.names else 0.0
        own = np.array(
            [
                m if n == "mass_kg" else m * SCALE_LENGTH_M if n in FIRST_MOMENTS else m * SCALE_LENGTH_M**2
                for n in self.names
            ]
        )
        return np.maximum(np.maximum(np.abs(v), own), self.floors())

    def alarmable(self, moved: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """Which of the `moved` parameters may raise a change: all of them if the mass moved or the payload has
        a mass (`NO_PAYLOAD_KG` or more, before or after); else none: the centre of a payload without mass is
        not defined by the data, and first moments or inertia moving on their own there are the arm model's
        error (a chained identification's), not a payload."""
        if "mass_kg" not in self.names:
            return moved
        i = self.names.index("mass_kg")
        if moved[i] or max(abs(float(np.nan_to_num(before[i]))), abs(float(np.nan_to_num(after[i])))) >= NO_PAYLOAD_KG:
            return moved
        return np.zeros_like(moved)

    def physical(self, values: np.ndarray, names: Sequence[str] | None = None) -> np.ndarray:
        """The nearest physically consistent payload to `values` (in `names` order, default all): `physical_payload`."""
        return physical_payload(self.names if names is None else names, values)

    def regressor(
        self, time_ns: np.ndarray, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, valid: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The payload's columns (N, J, P) and the model's torque (N, J) on the valid rows (NaN elsewhere),
        each row computed once and cached by its sample time and state (reused only for the same time *and*
        filtered state: another record with equal stamps, or a resampled window whose state moved, is
        computed afresh)."""
        n, nv, p = len(time_ns), self.arm.nv, len(self.names)
        phi, known = np.full((n, nv, p), np.nan), np.full((n, nv), np.nan)
        state = np.concatenate([q, qd, qdd], axis=1)
        hit = np.zeros(n, dtype=bool)
        if len(self._cache_t):
            pos = np.clip(np.searchsorted(self._cache_t, time_ns), 0, len(self._cache_t) - 1)
            same = np.all(np.abs(self._cache_state[pos] - state) <= STATE_TOLERANCE, axis=1)
            hit = valid & (self._cache_t[pos] == time_ns) & same
            phi[hit], known[hit] = self._cache_phi[pos[hit]], self._cache_known[pos[hit]]
        todo = valid & ~hit
        if todo.any():
            w = self.arm.compute(q[todo], qd[todo], qdd[todo])
            phi[todo], known[todo] = w[..., self._cols], w @ self._known_theta
            old = ~np.isin(self._cache_t, time_ns[todo])  # a recomputed time replaces its cached row
            t_all = np.concatenate([self._cache_t[old], time_ns[todo]])
            order = np.argsort(t_all, kind="stable")
            keep = order[t_all[order] >= t_all.max() - int(CACHE_S * NS)]
            self._cache_t = t_all[keep]
            self._cache_phi = np.concatenate([self._cache_phi[old], phi[todo]])[keep]
            self._cache_known = np.concatenate([self._cache_known[old], known[todo]])[keep]
            self._cache_state = np.concatenate([self._cache_state[old], state[todo]])[keep]
        return phi, known


def _random_columns(arm: ArmRegressor, cols: np.ndarray) -> np.ndarray:
    """The payload's columns (40, nv, P) at random states inside the joint ranges (seeded: reproducible)."""
    rng = np.random.default_rng(0)
    m = arm.model
    lo = np.where(m.jnt_limited[m.dof_jntid], m.jnt_range[m.dof_jntid, 0], -np.pi)
    hi = np.where(m.jnt_limited[m.dof_jntid], m.jnt_range[m.dof_jntid, 1], np.pi)
    q = rng.uniform(lo, hi, (40, arm.nv))
    return arm.compute(q, rng.normal(0.0, 1.0, q.shape), rng.normal(0.0, 3.0, q.shape))[..., cols]


def unidentifiable_payload(model: mujoco.MjModel, body: str, names: Sequence[str]) -> tuple[str, ...]:
    """The payload parameters the model's joint torques say nothing about (their columns are zero at every
    state): on a pendulum its mass and the first moment along the axis (one hinge feels only the mass moment
    about it and the inertia about its axis), on a planar arm the out-of-plane terms."""
    arm = ArmRegressor(model)
    index = {n: i for i, n in enumerate(arm.names)}
    by_name = {v: k for k, v in PAYLOAD_NAMES.items()}
    cols = np.array([index[f"{body}.{by_name[n]}"] for n in names])
    return base_parameters(_random_columns(arm, cols), names).unidentifiable


def payload_config(
    model: mujoco.MjModel | str | Path, body: str, *, inertia: bool = True, **settings: object
) -> OnlineConfig:
    """Settings for a payload on `body` of an arm: the residual detector on (0.5 s look-back, 0.05 s
    checks), a 0.15 s derivative window, the mass judged to 1 % and changes of 5 %, the first moments to 5 %
    and changes of 10 %, inertia (if estimated) to 25 % and changes of 50 %; excitation requested for the mass;
    the windows' standard errors calibrated by the record's scatter; a change smaller than `CHANGE_FLOORS`
    (inertia: `INERTIA_CHANGE_FLOOR`) is none. Parameters the joint torques cannot see
    (`unidentifiable_payload`: a pendulum's mass) are left out; `ModelError` if nothing is left."""
    compiled = model if isinstance(model, mujoco.MjModel) else load_model(model)
    if mujoco.mj_name2id(compiled, mujoco.mjtObj.mjOBJ_BODY, body) <= 0:
        raise ModelError("the payload's body is not a moving body of the model", body=body)
    wanted = WITH_INERTIA if inertia else FIRST_MOMENTS
    blind = unidentifiable_payload(compiled, body, wanted)
    names = tuple(n for n in wanted if n not in blind)
    if not names:
        raise ModelError("the joint torques say nothing about a payload on this body", body=body)
    window = PayloadWindowModel(compiled, body, names)
    precision = {n: 0.01 if n == "mass_kg" else (0.05 if n in FIRST_MOMENTS else 0.25) for n in names}
    threshold = {n: 0.05 if n == "mass_kg" else (0.1 if n in FIRST_MOMENTS else 0.5) for n in names}
    # the arm's friction is known: a joint's equation stays usable while it reverses (no "moving across the
    # derivative window" rule, which would also cost the detector a derivative window at the newest end)
    # a 0.15 s derivative window (not the pendulum's 0.2 s): the arm's columns are nonlinear in (q, qd, qdd), so
    # filtering q before them and the torque after is not the same filter; over DDS (an iiwa tracking a
    # trajectory with velocities) 0.2 s left m cz 2.0-2.8 % low and the inertia 20 % high, 0.15 s 0.1-0.35 %
    moments = tuple(n for n in FIRST_MOMENTS if n in names) or names
    floor = {n: CHANGE_FLOORS.get(n, INERTIA_CHANGE_FLOOR) for n in names}
    defaults: dict[str, object] = {
        "precision": precision,
        "change_threshold": threshold,
        "change_floor": floor,
        "request_for": ("mass_kg",) if "mass_kg" in names else moments,
        "detect_window_s": 0.5,
        "detect_for": moments,
        "selection": RowSelection(moving_speed_rad_s=0.0),
        "derivative_window_s": 0.15,
        "calibrate_scatter": True,
    }
    defaults.update(settings)
    return OnlineConfig(body, window, **defaults)  # type: ignore[arg-type]


NO_PAYLOAD_KG = 0.05  # below this, the centre of mass is not defined by the data: reported as the origin


def payload_inertia(values: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """(centre of mass (3,), inertia about it (3, 3)) of a payload estimate in the body frame.

    The centre is the first moments over the mass (the origin below `NO_PAYLOAD_KG`); the inertia is the
    estimated one about the body origin moved to the centre (parallel axes), or zero (a point mass) when
    the inertia was not estimated.
    """
    m = float(values["mass_kg"])
    h = np.array([values["mx_kg_m"], values["my_kg_m"], values["mz_kg_m"]], dtype=float)
    com = h / m if m >= NO_PAYLOAD_KG else np.zeros(3)
    if "ixx_kg_m2" not in values or m < NO_PAYLOAD_KG:
        return com, np.zeros((3, 3))
    ixy, ixz, iyz = values["ixy_kg_m2"], values["ixz_kg_m2"], values["iyz_kg_m2"]
    i_o = np.array([[values["ixx_kg_m2"], ixy, ixz], [ixy, values["iyy_kg_m2"], iyz], [ixz, iyz, values["izz_kg_m2"]]])
    return com, i_o - m * (com @ com * np.eye(3) - np.outer(com, com))


PROJECTION_LENGTH_M = 0.1  # the pseudo-inertia is projected in units of this length (kg, kg dm, kg dm^2)


def physical_payload(names: Sequence[str], values: np.ndarray) -> np.ndarray:
    """`values` made physically consistent: with all 10 parameters, the pseudo-inertia
    J = [[S, h], [h', m]] (S = tr(I)/2 1 - I, the second moment of the mass about the body origin) projected
    onto the positive semidefinite matrices (negative eigenvalues set to 0, in units of `PROJECTION_LENGTH_M`),
    which is exactly the set of real bodies: m >= 0, inertia about the centre PSD and meeting the triangle
    inequalities; with fewer parameters, the mass and the diagonal inertia entries clipped at 0. Terms that are
    NaN (not yet fitted) are taken as 0 for the projection and stay NaN."""
    out = np.array(values, dtype=float)
    index = {n: i for i, n in enumerate(names)}
    unknown = ~np.isfinite(out)
    if set(WITH_INERTIA) <= set(index) and unknown.any() and not unknown.all():
        # no window has fitted some terms yet: projected with them at 0, reported NaN (still unknown)
        return np.where(unknown, np.nan, physical_payload(names, np.where(unknown, 0.0, out)))
    if set(WITH_INERTIA) <= set(index) and np.all(np.isfinite(out)):
        v = {n: out[index[n]] for n in WITH_INERTIA}
        inertia = np.array(
            [
                [v["ixx_kg_m2"], v["ixy_kg_m2"], v["ixz_kg_m2"]],
                [v["ixy_kg_m2"], v["iyy_kg_m2"], v["iyz_kg_m2"]],
                [v["ixz_kg_m2"], v["iyz_kg_m2"], v["izz_kg_m2"]],
            ]
        )
        h = np.array([v["mx_kg_m"], v["my_kg_m"], v["mz_kg_m"]])
        scale = np.r_[np.full(3, 1.0 / PROJECTION_LENGTH_M), 1.0]
        pseudo = np.zeros((4, 4))
        pseudo[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
        pseudo[:3, 3] = pseudo[3, :3] = h
        pseudo[3, 3] = v["mass_kg"]
        lam, vec = np.linalg.eigh(pseudo * np.outer(scale, scale))
        pseudo = (vec * np.maximum(lam, 0.0)) @ vec.T / np.outer(scale, scale)
        second = pseudo[:3, :3]
        inertia = np.trace(second) * np.eye(3) - second
        new = {
            "mass_kg": pseudo[3, 3],
            "mx_kg_m": pseudo[0, 3],
            "my_kg_m": pseudo[1, 3],
            "mz_kg_m": pseudo[2, 3],
            "ixx_kg_m2": inertia[0, 0],
            "ixy_kg_m2": inertia[0, 1],
            "iyy_kg_m2": inertia[1, 1],
            "ixz_kg_m2": inertia[0, 2],
            "iyz_kg_m2": inertia[1, 2],
            "izz_kg_m2": inertia[2, 2],
        }
        for n, x in new.items():
            out[index[n]] = x
        return out
    for n in ("mass_kg", "ixx_kg_m2", "iyy_kg_m2", "izz_kg_m2"):
        if n in index:
            out[index[n]] = max(out[index[n]], 0.0)
    return out
