"""What the servo tuner works on: a servo, its gains, a controller (gains + host feed-forward), the goal.

The tuner searches in bandwidth and damping (wn, zeta), not raw gains: kp = J wn^2, kd = 2 zeta wn J - b.
One search and one ringing rule then serve a 6.6e-5 kg m^2 direct drive and a 3.6 kg m^2 shoulder alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..errors import ConfigError, GainsError
from ..gains import PidGains, gain_refusal
from ..linear import ALL_TERMS, JointModel
from ..tapes import Envelope

FEEDFORWARD_TERMS = ALL_TERMS  # a host feed-forward is a JointModel evaluated on the reference


@dataclass(frozen=True)
class DriveGains:
    """Drive gains in the drive's units: torque = kp e + kd de + clamp(ki integral e, i_clamp_nm)."""

    kp: float
    kd: float
    ki: float = 0.0
    i_clamp_nm: float = 0.0

    def __post_init__(self) -> None:
        for name in ("kp", "kd", "ki", "i_clamp_nm"):
            reason = gain_refusal(name, getattr(self, name))
            if reason:
                raise GainsError(reason)
            object.__setattr__(self, name, float(getattr(self, name)))

    def scaled(self, factor: float) -> DriveGains:
        return DriveGains(self.kp * factor, self.kd * factor, self.ki * factor, self.i_clamp_nm)


@dataclass(frozen=True)
class Controller:
    """Drive gains plus an optional host feed-forward (a joint model evaluated on the reference)."""

    gains: DriveGains
    feedforward: JointModel | None = None
    label: str = ""

    def with_label(self, label: str) -> Controller:
        return replace(self, label=label)


@dataclass(frozen=True)
class Servo:
    """One joint to tune: as-found gains, torque cap, envelope, guard, priors and an optional seed controller.

    `kp_max_nm_rad` / `kd_max_nm_s_rad` bound every gain the tuner may set; `kp_min_nm_rad` is the softest
    it may go. `priors` is the model to fall back on when identification is refused. `seed` (a controller,
    e.g. the analytic start) sets where the sweep starts, joins the search and is the incumbent at verify.
    """

    name: str
    gains: DriveGains
    torque_limit_nm: float
    envelope: Envelope
    priors: JointModel | None = None
    seed: Controller | None = None
    kp_max_nm_rad: float = 1e5
    kd_max_nm_s_rad: float = 1e4
    kp_min_nm_rad: float = 0.0
    encoder_noise_rad: float = 0.0
    delay_s: float = 0.0
    as_found_feedforward: JointModel | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("a servo needs a name")
        for attr in ("torque_limit_nm", "kp_max_nm_rad", "kd_max_nm_s_rad"):
            value = getattr(self, attr)
            if not (math.isfinite(value) and value > 0.0):
                raise ConfigError(f"{attr} must be positive and finite, got {value}", joint=self.name)
        if not (0.0 <= self.kp_min_nm_rad < self.kp_max_nm_rad):
            raise ConfigError("kp_min_nm_rad must be in [0, kp_max_nm_rad)", joint=self.name)

    @property
    def as_found(self) -> Controller:
        return Controller(self.gains, self.as_found_feedforward, "as found")

    def envelopes(self) -> dict[str, Envelope]:
        return {self.name: self.envelope}

    def clip_gains(self, gains: DriveGains) -> DriveGains:
        """The gains pulled inside the guard."""
        return DriveGains(
            min(max(gains.kp, self.kp_min_nm_rad), self.kp_max_nm_rad),
            min(gains.kd, self.kd_max_nm_s_rad),
            gains.ki,
            gains.i_clamp_nm,
        )

    def wn_ceiling_rad_s(self, inertia_kg_m2: float) -> float:
        """The guard's bandwidth ceiling sqrt(kp_max / J)."""
        return math.sqrt(self.kp_max_nm_rad / inertia_kg_m2)


@dataclass(frozen=True)
class Goal:
    """What the tuner aims for and the knobs its rules name.

    `ringing_mrad` overrides the measured ringing threshold; `ringing_cap_mrad` caps it. `stop_allocation_mrad`
    is the stop error the application allows (stop p90 gate). `gain_margin` divides kp at the deploy
    ceiling: wn_max = wn_quiet / sqrt(gain_margin). `sweep_stride_headroom`: a sweep rung whose ringing and
    chatter are both under this fraction of their limits (and crosses the target at most once) lets the sweep
    skip the next rung (0: every rung played). `refine_seed` is the evaluation seed refine plays; `verify_seed`
    must differ (held out).
    """

    ringing_mrad: float | None = None
    ringing_cap_mrad: float = 2.0
    stop_allocation_mrad: float = 1.0
    repeats: int = 1
    gain_margin: float = 2.0
    zeta: float = 0.8
    rung_ratio: float = 1.2
    max_rungs: int = 14
    sweep_stride_headroom: float = 0.25
    refine_seed: int = 0
    verify_seed: int = 7
    twin_screening: bool = False
    twin_keep_per_pass: int = 1
    twin_sweep_margin_rungs: int = 2

    def __post_init__(self) -> None:
        if self.verify_seed == self.refine_seed:
            raise ConfigError("verify_seed must differ from refine_seed: verify plays held-out tapes")
        if self.repeats < 1 or self.max_rungs < 1 or self.gain_margin < 1.0 or self.rung_ratio <= 1.0:
            raise ConfigError("repeats and max_rungs must be >= 1, gain_margin >= 1, rung_ratio > 1")
        if not 0.0 <= self.sweep_stride_headroom < 1.0:
            raise ConfigError(f"sweep_stride_headroom must be in [0, 1), got {self.sweep_stride_headroom}")


@dataclass(frozen=True)
class Loop:
    """A controller's bandwidth and damping on a model: wn = sqrt(kp / J), zeta = (kd + b) / (2 wn J)."""

    wn_rad_s: float
    zeta: float
    notes: tuple[str, ...] = field(default=())


def loop_of(gains: DriveGains, model: JointModel) -> Loop:
    """(wn, zeta) of `gains` on `model`."""
    inertia = max(model.inertia_kg_m2, 1e-12)
    wn = math.sqrt(max(gains.kp, 0.0) / inertia)
    zeta = (gains.kd + model.viscous_nm_s_rad) / (2.0 * wn * inertia) if wn > 0 else math.inf
    return Loop(wn, zeta)


def gains_for(
    wn_rad_s: float, zeta: float, model: JointModel, servo: Servo, base: DriveGains | None = None
) -> tuple[DriveGains, tuple[str, ...]]:
    """kp = J wn^2, kd = max(0, 2 zeta wn J - b), clipped into the guard; a note when clipping lowers zeta."""
    inertia = model.inertia_kg_m2
    kp = inertia * wn_rad_s**2
    kd = max(0.0, 2.0 * zeta * wn_rad_s * inertia - model.viscous_nm_s_rad)
    ki = base.ki if base else 0.0
    clamp = base.i_clamp_nm if base else 0.0
    gains = servo.clip_gains(DriveGains(kp, kd, ki, clamp))
    notes = []
    if gains.kd < kd:
        eff = (gains.kd + model.viscous_nm_s_rad) / (2.0 * wn_rad_s * inertia)
        notes.append(f"kd {kd:.4g} hits the guard {servo.kd_max_nm_s_rad:.4g}: zeta falls to {eff:.2f}")
    if gains.kp != kp:
        notes.append(f"kp {kp:.4g} clipped to the guard ({gains.kp:.4g})")
    return gains, tuple(notes)


def to_pid_gains(gains: DriveGains, ff_velocity_scale: float = 0.0) -> PidGains:
    """Drive gains as ros2_control's PID parameters (p, i, d, i_clamp, ff_velocity_scale): the one mapping."""
    return PidGains(p=gains.kp, i=gains.ki, d=gains.kd, i_clamp=gains.i_clamp_nm, ff_velocity_scale=ff_velocity_scale)


def feedforward_from(
    model: JointModel, coulomb_scale: float = 1.0, terms: tuple[str, ...] = FEEDFORWARD_TERMS
) -> JointModel:
    """The model's feed-forward with Coulomb scaled, cut to the `terms` the plant can send."""
    values = {t: (getattr(model, t) if t in terms else 0.0) for t in ALL_TERMS}
    values["coulomb_nm"] *= coulomb_scale
    return model.replace_terms(values)
