"""Stage 0: a closed-form controller from the robot's description, at the highest bandwidth five bounds allow.

It measures and moves nothing. The bounds on wn (rad/s), each from the servo's description:
1. the kp guard: J wn^2 <= kp_max;
2. the kd guard: 2 zeta wn J - b <= kd_max;
3. the command rate: wn dt <= 0.5 (the rate Stage 1 can still see);
4. the delay: wn delay <= 0.25 (about 60 degrees of phase margin kept from a pure delay);
5. sensor noise: kd x the encoder's differentiated noise sqrt(2) sigma / dt <= 2 % of the torque cap.
The feed-forward is the prior model's (Coulomb at 1x).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import ConfigError
from ...linear import JointModel
from ..servo import Controller, Servo, feedforward_from, gains_for


@dataclass(frozen=True)
class AnalyticStart:
    """The controller, its bandwidth, every bound and which one binds."""

    controller: Controller
    wn_rad_s: float
    zeta: float
    bounds_rad_s: dict[str, float]
    binding: str


def analytic_start(
    servo: Servo,
    command_rate_hz: float,
    model: JointModel | None = None,
    zeta: float = 0.8,
    feedforward_terms: tuple[str, ...] | None = None,
) -> AnalyticStart:
    """Stage 0 from `model` (default: the servo's priors)."""
    model = model or servo.priors
    if model is None or model.inertia_kg_m2 <= 0:
        raise ConfigError("the analytic start needs a model with a positive inertia (servo.priors)", joint=servo.name)
    j, b, dt = model.inertia_kg_m2, max(model.viscous_nm_s_rad, 0.0), 1.0 / command_rate_hz
    bounds = {
        "kp guard": math.sqrt(servo.kp_max_nm_rad / j),
        "kd guard": (servo.kd_max_nm_s_rad + b) / (2 * zeta * j),
        "command rate": 0.5 / dt,
        "delay": 0.25 / servo.delay_s if servo.delay_s > 0 else math.inf,
        "sensor noise": (
            (0.02 * servo.torque_limit_nm * dt / (math.sqrt(2) * servo.encoder_noise_rad) + b) / (2 * zeta * j)
        )
        if servo.encoder_noise_rad > 0
        else math.inf,
    }
    binding = min(bounds, key=bounds.__getitem__)
    wn = bounds[binding]
    gains, _ = gains_for(wn, zeta, model, servo, servo.gains)
    ff = feedforward_from(model, 1.0, feedforward_terms) if feedforward_terms else feedforward_from(model, 1.0)
    return AnalyticStart(Controller(gains, ff, "analytic start"), wn, zeta, bounds, binding)
