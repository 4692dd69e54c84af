"""The run's last stage, `parameter_results`: each parameter's value, 95 % half-width, bounds and whether the
data identifies it (a body_inertia's in physical terms; masses seen only as their sum flagged), and the
warnings of parameters resting on a bound or far from their warm start."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import mujoco
import numpy as np
from mujoco import sysid

from ...errors import SysidRosError
from ..checks.suspect import bound_warnings, warm_start_warnings
from ..problem.arm_models import mass_sum_groups
from ..problem.file import ParameterSpec
from ..problem.inertia import COORDINATES, physical_vector, propagate_half_widths
from ..problem.spec_values import model_value
from ..results import ParameterResult, RunLog
from .intervals import Spread, free_slices
from .load import Loaded
from .optimize import Fit
from .torque_fit import FITTED_KINDS, half_widths_of
from .warm_start import Start


def parameter_results(
    run: Loaded, start: Start, fit: Fit, spread: Spread, metrics: dict[str, Any], log: RunLog
) -> list[ParameterResult]:
    """Each parameter's value, half-width (inf in a null direction of the data), bounds and identifiability."""
    results = []
    widened: dict[str, list[float]] = {}
    slices = free_slices(run.problem.parameters, fit.opt_params)
    for p in run.problem.parameters:
        prm = fit.opt_params[p.name]
        in_null, half, k = False, (0.0,) * prm.size, slices.get(p.name)
        if k is not None:
            # a component in a null direction of J^T J is not determined by the data: no finite interval
            # (with a prior the posterior's interval stays finite; the parameter is still not identifiable)
            half = tuple(
                math.inf if n and start.prior is None else float(v) for v, n in zip(spread.intervals[k], spread.null[k])
            )
            in_null = bool(np.any(spread.null[k]))
            widened[p.name] = [float(w) for w in spread.widening[k]]
            if np.any(spread.residual_widening[k] > 1):
                metrics.setdefault("residual_widening", {})[p.name] = [
                    round(float(w), 4) for w in spread.residual_widening[k]
                ]
        results.append(_parameter_result(run, start, p, prm, half, in_null, spread.cov, k, log))
    if not run.problem.estimate_initial_state:
        metrics["start_state_widening"] = widened  # half-width / the library's (white residuals only)
    results = flag_mass_sums(run.model, results, log.notes)
    log.warnings += bound_warnings(results) + warm_start_warnings(results, start.regression)
    return results


def _parameter_result(
    run: Loaded,
    start: Start,
    p: ParameterSpec,
    prm: sysid.Parameter,
    half: tuple[float, ...],
    in_null: bool,
    cov: np.ndarray,
    k: slice | None,
    log: RunLog,
) -> ParameterResult:
    """One parameter's result (`k`: its slice of the fit's vector, None when frozen); a body_inertia's in physical
    terms (mass, centre of mass, tensor)."""
    value = tuple(float(v) for v in prm.value)
    lo, hi, coordinates = tuple(map(float, prm.min_value)), tuple(map(float, prm.max_value)), None
    if p.kind == "body_inertia":
        block = cov[k, k] if k is not None and np.shape(cov)[0] >= k.stop else np.eye(prm.size)
        coordinates, value, half, lo, hi = inertia_result(prm.value, half, block, lo, hi)
    ok = p.frozen or (not in_null and identifiable(p.kind, value, half, lo, hi, run.problem.unidentifiable_relative))
    if not ok:
        log.notes.append(f"{p.name} is not identifiable from this data (95 % half-width {half})")
    return ParameterResult(
        p.name,
        p.kind,
        p.target,
        value,
        half,
        run.starts[p.name],
        lo,
        hi,
        p.frozen,
        bool(ok),
        (start.warm[p.name],) if p.name in start.warm else None,
        coordinates,
    )


def identifiable(
    kind: str, value: Sequence[float], half: Sequence[float], lo: Sequence[float], hi: Sequence[float], relative: float
) -> bool:
    """Whether every half-width is finite and at most `relative` x the value, or x a floor for a value near zero:
    1 % of the bound range (a centre of mass on an axis), for a body_inertia's tensor entries 1 % of its trace.
    Judged in physical terms (a body_inertia's log-Cholesky coordinates sit near 0 whatever the body)."""
    floors = [0.01 * (b - a) for a, b in zip(lo, hi)]
    if kind == "body_inertia":
        floors[4:] = [0.01 * sum(value[4:7])] * 6
    return all(
        math.isfinite(h) and h <= relative * max(abs(v), floor, 1e-12) for h, v, floor in zip(half, value, floors)
    )


def inertia_result(
    theta: np.ndarray, half: tuple[float, ...], cov: np.ndarray, lo: tuple[float, ...], hi: tuple[float, ...]
) -> tuple[dict[str, tuple], tuple[float, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """A body_inertia result in physical terms: (coordinates, value, half-widths, min, max). The mass and com
    bounds are the coordinates' images; the tensor entries have no box of their own (-inf..inf)."""
    theta = np.asarray(theta, dtype=float)
    value = tuple(float(v) for v in physical_vector(theta))
    phys_half = tuple(float(v) for v in propagate_half_widths(theta, cov, np.asarray(half, dtype=float)))
    p_lo = (math.exp(2 * lo[0]), *lo[7:10], *[-math.inf] * 6)
    p_hi = (math.exp(2 * hi[0]), *hi[7:10], *[math.inf] * 6)
    coordinates = {
        "names": COORDINATES,
        "value": tuple(float(v) for v in theta),
        "half_width_95": tuple(half),
        "min": lo,
        "max": hi,
    }
    return coordinates, value, phys_half, p_lo, p_hi


def carried_parameters(
    parameters: Sequence[ParameterSpec],
    results: Sequence[ParameterResult],
    spec: mujoco.MjSpec,
    half_widths: dict[str, Sequence[float]],
    log: RunLog,
) -> list[ParameterResult]:
    """The results as the torque-space model (`spec`, which the MJCF carries) holds them: each parameter of a
    kind that fit writes takes the model's value and, when free, the fit's block-bootstrap half-widths
    (`half_widths` by body and by "joint.term"; inf, and not identifiable, where the data alone do not set the
    value: a note, as for the window fit); the others stay the window fit's."""
    specs = {p.name: p for p in parameters}
    out, unresolved = [], []
    for r in results:
        if r.kind not in FITTED_KINDS:
            out.append(r)
            continue
        value = tuple(model_value(spec, specs[r.name]))
        half = r.half_width_95 if r.frozen else half_widths_of(half_widths, r.kind, r.target, len(value))
        resolved = r.frozen or all(math.isfinite(h) for h in half)
        if not resolved:
            unresolved.append(r.name)
        out.append(replace(r, value=value, half_width_95=half, identifiable=resolved, coordinates=None))
    if unresolved:
        log.notes.append(
            f"{', '.join(unresolved)}: not identifiable from this data alone in the torque-space fit the MJCF "
            "carries (half_width_95 inf: the joint torques see each only in a sum with others, the base "
            "parameters, and the fit's small prior toward the model file holds the rest; or a welded body's "
            "value is fitted on its group's jointed body); the window fit's values are under `window_fit_parameters`"
        )
    return out


def flag_mass_sums(model: mujoco.MjModel, results: list[ParameterResult], notes: list[str]) -> list[ParameterResult]:
    """Masses that joint data sees only as their sum (bodies fixed to one link) are not identifiable apart.

    A mass-only fit still splits them, but only through the centres of mass the model assumes (1 cm off on
    the iiwa's flange payload moved the split by 19 % / 52 % with sub-0.1 % intervals): report the sum.
    """
    masses = [r for r in results if r.kind == "body_mass" and not r.frozen]
    if len(masses) < 2:
        return results
    try:
        groups = [g for g in mass_sum_groups(model, [r.target for r in masses]) if len(g) > 1]
    except SysidRosError:
        return results
    split = {body for group in groups for body in group}
    for group in groups:
        members = [r for r in masses if r.target in group]
        total = sum(r.value[0] for r in members)
        bound = math.sqrt(sum(r.half_width_95[0] ** 2 for r in members if math.isfinite(r.half_width_95[0])))
        notes.append(
            f"masses {', '.join(r.name for r in members)} enter the joint dynamics only as their sum "
            f"{total:.6g} kg (about +- {bound:.2g}); apart they rest on the assumed centres of mass"
        )
    return [
        replace(r, identifiable=False, half_width_95=(math.inf,)) if r in masses and r.target in split else r
        for r in results
    ]
