"""Easing a tape a joint cannot follow: slower in time (`stretched`) or smaller about its start (`shrunk`).

Both only ever reduce speed, acceleration and excursion, so a tape inside its envelope stays inside.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..errors import ConfigError
from .tape import ChirpCurve, Curve, FourierCurve, KnotCurve, SineCurve, Tape


def _stretch_curve(curve: Curve, k: float) -> Curve:
    if isinstance(curve, KnotCurve):
        return KnotCurve(
            tuple(k * t for t in curve.time_s),
            curve.position,
            tuple(v / k for v in curve.velocity),
            tuple(a / k**2 for a in curve.acceleration),
        )
    if isinstance(curve, FourierCurve):
        return replace(curve, start_s=k * curve.start_s, period_s=k * curve.period_s, end_s=k * curve.end_s)
    times = {name: k * getattr(curve, name) for name in ("start_s", "duration_s", "taper_s", "end_s")}
    if isinstance(curve, SineCurve):
        return replace(curve, **times, freqs_hz=tuple(f / k for f in curve.freqs_hz))
    return replace(curve, **times, f0_hz=curve.f0_hz / k, f1_hz=curve.f1_hz / k)


def _shrink_curve(curve: Curve, f: float) -> Curve:
    if isinstance(curve, KnotCurve):
        start = curve.position[0]
        return KnotCurve(
            curve.time_s,
            tuple(start + f * (p - start) for p in curve.position),
            tuple(f * v for v in curve.velocity),
            tuple(f * a for a in curve.acceleration),
        )
    if isinstance(curve, SineCurve):
        return replace(curve, amplitudes=tuple(f * a for a in curve.amplitudes))
    if isinstance(curve, FourierCurve):  # about its rest position (offset + the cosines)
        start = curve.offset + sum(curve.cosines)
        return replace(
            curve,
            offset=start + f * (curve.offset - start),
            sines=tuple(f * s for s in curve.sines),
            cosines=tuple(f * c for c in curve.cosines),
        )
    assert isinstance(curve, ChirpCurve)
    return replace(curve, amplitude=f * curve.amplitude)


def stretched(tape: Tape, factor: float) -> Tape:
    """The tape played `factor` (>= 1) times slower: speeds / factor, accelerations / factor^2, frequencies too."""
    if not (math.isfinite(factor) and factor >= 1.0):
        raise ConfigError(f"a stretch factor must be finite and >= 1, got {factor}", tape=tape.name)
    return replace(tape, curves=tuple(_stretch_curve(c, factor) for c in tape.curves))


def shrunk(tape: Tape, factor: float) -> Tape:
    """The tape scaled by `factor` in (0, 1] about where it starts (position tapes) or about zero (torque)."""
    if not (math.isfinite(factor) and 0.0 < factor <= 1.0):
        raise ConfigError(f"a shrink factor must be in (0, 1], got {factor}", tape=tape.name)
    return replace(tape, curves=tuple(_shrink_curve(c, factor) for c in tape.curves))
