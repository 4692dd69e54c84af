"""`sysid-ros tapes plot`: a tape's position, velocity, acceleration and torque per joint against the joint's
envelope, as an offline page. Torque is the tape's own for an effort tape; for a position tape, what the
robot's nominal rigid-body model needs to follow it (MuJoCo's inverse dynamics), when a model is named; with a model
of the whole arm the tape moves, its plan too (`tapes.plan`: condition number, predicted intervals, margins)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import SysidRosError
from ..tapes import Envelope, Tape, plan, probe_times, sample
from ..tuner import inverse_dynamics, nominal_model
from .page import Page, figure, line

LIMIT = dict(line_color="#d62728", line_dash="dash", line_width=1)


def _bounds(fig, lower: float | None, upper: float | None) -> None:
    for y in (lower, upper):
        if y is not None:
            fig.add_hline(y=y, **LIMIT)


def nominal_torque(model: str, tape: Tape, t: np.ndarray) -> np.ndarray:
    """Torque (N, J) the nominal model (no damping, no friction) needs along a position tape."""
    got = sample(tape, t)
    return inverse_dynamics(nominal_model(model), tape.joints, got.position, got.velocity, got.acceleration)


def tape_page(tape: Tape, envelopes: Mapping[str, Envelope], model: str | None = None) -> Page:
    """Per joint: position, velocity, acceleration and torque over the tape, the envelope's limits dashed."""
    t = probe_times(tape, 1.0 / tape.command_rate_hz)
    got = sample(tape, t)
    torque = got.effort if tape.interface == "effort" else (nominal_torque(model, tape, t) if model else None)
    page = Page(f"Tape {tape.name} ({tape.kind}, seed {tape.seed}, {tape.interface})")
    page.text(
        f"{t[-1]:.2f} s at {tape.command_rate_hz:g} Hz; joints {', '.join(tape.joints)}. Dashed red: the "
        "envelope's limits."
        + (
            ""
            if torque is not None or tape.interface == "effort"
            else " No model named: the torque a position tape needs is not shown."
        )
    )
    if model and tape.interface == "position":
        plan_section(page, tape, envelopes, model)
    for j, joint in enumerate(tape.joints):
        env = envelopes[joint]
        page.heading(
            f"{joint}: travel {env.lower_rad:.3g} .. {env.upper_rad:.3g} rad, speed {env.max_speed_rad_s:g}"
            f" rad/s, torque {env.max_torque_nm:g} N m",
            3,
        )
        rows = []
        if tape.interface == "position":
            accel = env.max_accel_rad_s2
            rows = [
                ("position", "rad", got.position[:, j], env.lower_rad, env.upper_rad),
                ("velocity", "rad/s", got.velocity[:, j], -env.max_speed_rad_s, env.max_speed_rad_s),
                ("acceleration", "rad/s^2", got.acceleration[:, j], -accel if accel else None, accel),
            ]
        if torque is not None:
            rows.append(
                (
                    "torque" if tape.interface == "effort" else "torque (nominal model)",
                    "N m",
                    torque[:, j],
                    -env.max_torque_nm,
                    env.max_torque_nm,
                )
            )
        for what, unit, values, lower, upper in rows:
            fig = figure(f"{joint}: {what}", "time [s]", f"{what.split()[0]} [{unit}]", height=230)
            line(fig, t, values, what)
            _bounds(fig, lower, upper)
            page.plot(fig)
    return page


def plan_section(
    page: Page, tape: Tape, envelopes: Mapping[str, Envelope], model: str, torque_noise_nm: float = 0.1
) -> None:
    """The tape's plan for the whole arm: its figures, each joint's margins, and the predicted relative intervals."""
    page.heading("Plan: what this tape tells the whole-arm identification", 3)
    try:
        got = plan(tape, envelopes, model, torque_noise_nm=torque_noise_nm)
    except SysidRosError as exc:
        page.text(f"No plan: {exc}")
        return
    page.items(got.summary()[:2] + [got.summary()[-1]])
    page.table(
        ["joint", "travel", "speed", "acceleration", "torque"],
        [[joint, *(f"{v:.0%}" for v in m.values())] for joint, m in got.margins.items()],
        [min(m.values()) < 0.05 for m in got.margins.values()],
    )
    fig = figure(
        "predicted 95 % half-width / |model value| per base parameter",
        "base parameter",
        "relative",
        height=300,
        log_y=True,
    )
    line(fig, np.arange(len(got.base_names)), np.minimum(got.relative_half_width, 1e6), "predicted")
    page.plot(fig)


def write_tape_page(tape: Tape, envelopes: Mapping[str, Envelope], out: str | Path, model: str | None = None) -> Path:
    return tape_page(tape, envelopes, model).write(out)
