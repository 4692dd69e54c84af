"""The online estimator's settings: the model a window is fitted with and the estimator's hyper-parameters."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError
from ..linear import PENDULUM_TERMS, REVOLUTE_TERMS, RowSelection, joint_columns, pendulum_columns

NS = 1_000_000_000
PerParameter = float | Mapping[str, float]
DEFAULT_PRECISION = 0.01
DEFAULT_CHANGE_THRESHOLD = 0.05


@dataclass(frozen=True)
class WindowModel:
    """What a window is fitted with: tau - known = columns(q, qd, qdd) theta, for one joint.

    `kind` is `pendulum` (theta = mass, damping, friction of a point-mass pendulum on a massless rod; a known
    rotor inertia moves to the left) or `joint` (the servo model's terms, `joint_model.joint_columns`).
    `scale_floor` gives each parameter the smallest scale its confidence and change threshold are
    relative to (a friction near zero is judged against this, not against its own value).
    """

    kind: str = "pendulum"
    names: tuple[str, ...] = PENDULUM_TERMS
    length_m: float = 0.5
    rotor_inertia_kg_m2: float = 0.0
    gravity_m_s2: float = 9.81
    coulomb_band_rad_s: float = 0.01
    scale_floor: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(self.names))
        if self.kind == "pendulum":
            if self.names != PENDULUM_TERMS:
                raise ConfigError(f"a pendulum window model estimates {PENDULUM_TERMS}, not {self.names}")
            if not (self.length_m > 0 and math.isfinite(self.length_m)):
                raise ConfigError("pendulum length must be > 0", length_m=self.length_m)
        elif self.kind == "joint":
            joint_columns(np.zeros(1), np.zeros(1), np.zeros(1), self.names)  # raises ConfigError on unknown terms
        else:
            raise ConfigError(f"unknown window model kind {self.kind!r}; expected 'pendulum' or 'joint'")
        unknown = set(self.scale_floor) - set(self.names)
        if unknown:
            raise ConfigError(f"scale_floor names unknown parameters {sorted(unknown)}")

    def columns(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        if self.kind == "pendulum":
            return pendulum_columns(q, qd, qdd, self.length_m, self.gravity_m_s2)
        return joint_columns(q, qd, qdd, self.names, self.coulomb_band_rad_s)

    def known_torque(self, qdd: np.ndarray) -> np.ndarray:
        return self.rotor_inertia_kg_m2 * np.nan_to_num(qdd)

    @property
    def joints(self) -> tuple[str, ...]:
        return ()  # one joint: the config's

    def regressor(
        self, time_ns: np.ndarray, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, valid: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The window model's interface for (N, 1) samples: columns (N, 1, P) and known torque (N, 1)."""
        return self.columns(q[:, 0], qd[:, 0], qdd[:, 0])[:, None, :], self.known_torque(qdd)

    def floors(self) -> np.ndarray:
        return np.array([float(self.scale_floor.get(n, 1e-3)) for n in self.names])


def pendulum_window_model(
    length_m: float,
    rotor_inertia_kg_m2: float = 0.0,
    *,
    damping_floor_nm_s_rad: float = 0.02,
    friction_floor_nm: float = 0.02,
) -> WindowModel:
    """Lesson 18.1's pendulum (mass, damping, friction) with scale floors for the two friction terms."""
    return WindowModel(
        "pendulum",
        PENDULUM_TERMS,
        length_m,
        rotor_inertia_kg_m2,
        scale_floor={"mass_kg": 0.01, "damping_nm_s_rad": damping_floor_nm_s_rad, "friction_nm": friction_floor_nm},
    )


def joint_window_model(
    terms: Sequence[str] = REVOLUTE_TERMS,
    scale_floor: Mapping[str, float] | None = None,
    coulomb_band_rad_s: float = 0.01,
) -> WindowModel:
    """Seed 004's joint model with the given terms."""
    return WindowModel(
        "joint", tuple(terms), coulomb_band_rad_s=coulomb_band_rad_s, scale_floor=dict(scale_floor or {})
    )


@dataclass(frozen=True)
class OnlineConfig:
    """The estimator's settings (the horizon H = `horizon_s`, eps1 = `change_threshold`, eps2 =
    `confidence_threshold`, N_his = `request_after_s` / `hop_s`).

    `precision`: the relative standard error (of a parameter's scale) at which a window's confidence is 0.5.
    `precision` and `change_threshold` take one number for all parameters or a mapping by name (names
    left out get `DEFAULT_PRECISION` / `DEFAULT_CHANGE_THRESHOLD`): damping and friction are seldom
    pinned to 1 % by a few seconds of motion, a mass is.
    `detect_confidence`: a window below eps2 but above this may still reveal a change (a 40 % jump is
    plain in a window that pins the parameter only to 3 %), and while settling such a window replaces the
    value too (it is fresher); it never enters the blend.
    `blend_memory_windows`: the accumulated confidence weight is capped at this many full-confidence
    windows, so the blended estimate keeps a bounded memory and follows slow drift.
    `halves_z_max`: a window whose two halves, fitted alone, disagree by more than this many standard
    errors on any parameter straddles a change and is discarded whole (0 turns the check off).
    `initial`: a prior estimate (e.g. from offline identification); without it the first confident
    window sets each parameter.
    `min_torque_rms_nm`: a window whose applied torque (on its moving rows) is weaker than this is discarded:
    free motion fits every parameter at zero.
    `detect_window_s` > 0 turns on the residual change detector (see `detector.py`): every `detect_hop_s`
    the newest `detect_window_s` of data is tested for a step in the parameters away from the current
    estimate (a GLR scan over the change time, each joint's residual measured against the long-run noise
    of the latest accepted window); a step beyond eps1 and `detect_sigma` standard errors in
    `detect_confirm` checks in a row raises the change at once, the window restarts at the estimated
    change time, and windows of `min_window_s` or more of post-change data settle the new value.
    `detect_for`: the parameters whose change raises an alarm, from the detector or the window refit
    (default all); the others follow confirmed far windows silently.
    `calibrate_scatter`: the windows' standard errors are scaled by the record's own scatter between windows
    that share no sample (`calibration.ScatterCalibration`; on for whole-arm payloads).
    `change_floor`: a change (from the window refit or the detector) must also move the parameter by at least
    this much (absolute, in its unit; one number or `{name: value}`, default 0): below it a change does not
    matter, however many standard errors it is.
    `stale_effort_s`, `max_jump_speed_rad_s`: the input guard (`guard.py`): a joint's effort bit-identical this
    long, or a position moving faster than this between two rows (a wrap or a glitch), pauses estimation.
    """

    joint: str
    model: WindowModel = field(default_factory=WindowModel)
    horizon_s: float = 2.0
    hop_s: float = 0.25
    derivative_window_s: float = 0.2
    derivative_polyorder: int = 4
    change_threshold: PerParameter = 0.05
    confidence_threshold: float = 0.5
    detect_confidence: float = 0.1
    precision: PerParameter = 0.01
    change_sigma: float = 5.0
    confirm_windows: int = 2
    blend_memory_windows: float = 20.0
    request_after_s: float = 5.0
    request_for: tuple[str, ...] | None = None
    initial: Mapping[str, float] | None = None
    selection: RowSelection = field(default_factory=RowSelection)
    min_rows: int = 100
    filter_torque: bool = True
    halves_z_max: float = 4.0
    min_torque_rms_nm: float = 0.05
    detect_window_s: float = 0.0
    detect_hop_s: float = 0.05
    detect_sigma: float = 8.0
    detect_confirm: int = 2
    detect_for: tuple[str, ...] | None = None
    min_window_s: float = 0.5
    calibrate_scatter: bool = False
    change_floor: PerParameter = 0.0
    stale_effort_s: float = 0.05
    max_jump_speed_rad_s: float = 20.0

    def __post_init__(self) -> None:
        checks = {
            "horizon_s": self.horizon_s > 0,
            "hop_s": 0 < self.hop_s <= self.horizon_s,
            "derivative_window_s": 0 < self.derivative_window_s < self.horizon_s / 2,
            "confidence_threshold": 0 < self.confidence_threshold < 1,
            "detect_confidence": 0 < self.detect_confidence <= self.confidence_threshold,
            "change_sigma": self.change_sigma >= 0,
            "confirm_windows": self.confirm_windows >= 1,
            "blend_memory_windows": self.blend_memory_windows >= 1,
            "request_after_s": self.request_after_s >= self.hop_s,
            "min_rows": self.min_rows >= 10,
            "detect_window_s": self.detect_window_s == 0
            or (2 * self.derivative_window_s < self.detect_window_s <= self.horizon_s),
            "detect_hop_s": 0 < self.detect_hop_s <= self.hop_s,
            "detect_sigma": self.detect_sigma > 0,
            "detect_confirm": self.detect_confirm >= 1,
            "min_window_s": 2 * self.derivative_window_s < self.min_window_s <= self.horizon_s,
            "stale_effort_s": 0 < self.stale_effort_s < math.inf,
            "max_jump_speed_rad_s": self.max_jump_speed_rad_s > 0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ConfigError(
                    f"online estimator setting {name} is out of range ({getattr(self, name)})", joint=self.joint
                )
        names = self.model.names
        for what in ("precision", "change_threshold", "change_floor"):
            value = getattr(self, what)
            given = value if isinstance(value, Mapping) else {}
            floor = what == "change_floor"  # a floor may be 0
            if any(not (math.isfinite(v) and (v >= 0 if floor else v > 0)) for v in self.per_parameter(what)) or set(
                given
            ) - set(names):
                raise ConfigError(
                    f"online estimator {what} must be {'>=' if floor else '>'} 0 and name known parameters {names}",
                    joint=self.joint,
                    value=value,
                )
        for what, given in (
            ("request_for", self.request_for or ()),
            ("initial", tuple(self.initial or ())),
            ("detect_for", self.detect_for or ()),
        ):
            unknown = set(given) - set(names)
            if unknown:
                raise ConfigError(
                    f"{what} names unknown parameters {sorted(unknown)}; known: {names}", joint=self.joint
                )

    def per_parameter(self, what: str) -> np.ndarray:
        """`precision`, `change_threshold` or `change_floor` as one number per parameter, in `model.names` order."""
        value = getattr(self, what)
        default = {"precision": DEFAULT_PRECISION, "change_threshold": DEFAULT_CHANGE_THRESHOLD, "change_floor": 0.0}[
            what
        ]
        if isinstance(value, Mapping):
            return np.array([float(value.get(n, default)) for n in self.model.names])
        return np.full(len(self.model.names), float(value))

    @property
    def joints(self) -> tuple[str, ...]:
        """The joints whose samples the model takes: its own (a whole arm) or `joint`."""
        return tuple(self.model.joints) or (self.joint,)

    @property
    def request_after_windows(self) -> int:
        return max(1, int(round(self.request_after_s / self.hop_s)))


def pendulum_config(joint: str, length_m: float, rotor_inertia_kg_m2: float = 0.0, **settings: object) -> OnlineConfig:
    """Settings for the point-mass pendulum: mass judged to 1 % and changes of 5 %; damping and friction,
    which a few seconds of motion pin only to tens of percent, to 25 % and changes of 50 %."""
    defaults: dict[str, object] = {
        "precision": {"mass_kg": 0.01, "damping_nm_s_rad": 0.25, "friction_nm": 0.25},
        "change_threshold": {"mass_kg": 0.05, "damping_nm_s_rad": 0.5, "friction_nm": 0.5},
        "request_for": ("mass_kg",),
    }
    defaults.update(settings)
    model = pendulum_window_model(length_m, rotor_inertia_kg_m2)
    return OnlineConfig(joint, model, **defaults)  # type: ignore[arg-type]
