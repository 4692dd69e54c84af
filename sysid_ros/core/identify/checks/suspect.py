"""The warnings that make an identification's verdict `suspect` (`results.verdict`), one line per reason.

Each rule names the signal, parameter or data file and the number that tripped it (thresholds and why in
docs/identification.md; false-alarm and detection rates in bench/bench_verdict.py):
- residual: a signal's training residual RMS is above what its declared noise explains (`residual_stats`);
- bound: a parameter rests on one of its bounds (within `BOUND_FRACTION` of the bound range; a `body_inertia`
  on a bound of its log-Cholesky coordinates);
- time offset: shifting the commands fits clearly better (`time_offset`);
- warm start: the regression estimate and the simulation fit differ beyond their joined 99.9 % intervals;
- data: the reader dropped duplicate stamps that carried different values (`data.load_source`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ..results import ParameterResult
from .misfit import SignalFit
from .time_offset import OffsetScan

BOUND_FRACTION = 1e-3
"""A value closer than this fraction of (max - min) to a bound rests on it (a warm start is kept 1e-3 inside)."""
WARM_START_Z = 3.29 / 1.96
"""Warm start and fit disagree when they differ by more than this many times their joined 95 % half-widths
(i.e. beyond the joined 99.9 % intervals, each parameter's false alarm about 1e-3 if both intervals hold)."""
UNITS = {"qpos": ("position", 1e3, "mrad"), "qvel": ("velocity", 1e3, "mrad/s")}


def _signal_text(signal: str, joints: Mapping[str, str]) -> tuple[str, float, str]:
    joint, _, kind = signal.rpartition("_")
    what, factor, unit = UNITS.get(kind, (kind, 1.0, ""))
    return f"{joints.get(joint, joint)} {what}", factor, unit


def residual_warnings(fits: Sequence[SignalFit], joints: Mapping[str, str]) -> list[str]:
    """`joints`: MJCF joint -> ROS joint, for the names in the text."""
    out = []
    for f in fits:
        if f.too_large:
            name, factor, unit = _signal_text(f.signal, joints)
            median = f" (median over {f.segments} segments)" if f.segments > 1 else ""
            out.append(
                f"{name}: training residual RMS {f.rms * factor:.3g} {unit} is {f.ratio:.3g}x{median} the "
                f"{f.expected_rms * factor:.3g} {unit} the declared noise explains (allowed "
                f"{f.allowed_ratio:.3g}x: chi-square p < 1e-3 with {f.effective_samples:.0f} effective "
                f"of {f.samples} samples)"
            )
    return out


def bound_warnings(parameters: Sequence[ParameterResult]) -> list[str]:
    out = []
    for p in parameters:
        if p.frozen:
            continue
        box = p.coordinates  # body_inertia: the optimiser's bounds are on its log-Cholesky coordinates
        values, lows, highs = (box["value"], box["min"], box["max"]) if box else (p.value, p.min_value, p.max_value)
        for k, (v, lo, hi) in enumerate(zip(values, lows, highs)):
            margin = BOUND_FRACTION * (hi - lo)
            side = "min" if v - lo <= margin else "max" if hi - v <= margin else None
            if side:
                which = f"[{box['names'][k]}]" if box else f"[{k}]" if len(values) > 1 else ""
                out.append(f"{p.name}{which} = {v:.6g} rests on its {side} bound {lo if side == 'min' else hi:.6g}")
    return out


def warm_start_warnings(
    parameters: Sequence[ParameterResult], regression: Mapping[str, tuple[float, float]]
) -> list[str]:
    """`regression`: parameter -> (regression estimate, its 95 % half-width), before clipping to the bounds."""
    out = []
    for p in parameters:
        if p.frozen or p.name not in regression:
            continue
        value, half = regression[p.name]
        joined = math.hypot(half, p.half_width_95[0]) if math.isfinite(p.half_width_95[0]) else math.inf
        gap = abs(value - p.value[0])
        if math.isfinite(value) and gap > WARM_START_Z * joined:
            out.append(
                f"{p.name}: regression warm start {value:.6g} +- {half:.2g} and simulation fit "
                f"{p.value[0]:.6g} +- {p.half_width_95[0]:.2g} differ by {gap:.3g} "
                f"({gap / joined * 1.96:.3g} joined standard errors)"
            )
    return out


def offset_warnings(scan: OffsetScan | None) -> list[str]:
    if scan is None or not scan.detected:
        return []
    span = max(abs(s) for s in scan.shifts_ms)
    return [
        f"command/feedback time offset: the commands fit best acting {scan.offset_ms:+.3g} ms after their "
        f"stamps (training cost x{scan.cost_ratio:.3g} of the unshifted one; scanned +-{span:.0f} ms)"
    ]
