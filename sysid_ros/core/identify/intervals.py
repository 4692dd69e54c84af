"""Confidence intervals of the identified parameters beyond the library's white-residual ones: the measured
start states' noise, a misfit's correlated residuals (block sandwich), the prior's share, the judgement
whether a parameter is identifiable, and a body_inertia's intervals in physical terms."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

import mujoco
import numpy as np
from mujoco import sysid
from scipy.special import stdtrit

from ..errors import SysidRosError
from . import sysid_data as sd
from .arm_models import mass_sum_groups
from .inertia import COORDINATES, physical_vector, propagate_half_widths
from .parameters import CachedBuild
from .plausibility import Prior
from .problem import Problem
from .residual import ScaledResidual, batched_residual_fn
from .results import ParameterResult
from .residual_stats import SignalFit, block_sandwich, signal_fits, time_blocks
from .start_error import (ShiftedStartRollout, start_state_covariance, start_state_noise, start_state_row_variance,
                          start_state_sensitivity, weighted_step)


def condition_number(jac: Any) -> float:
    """Condition number of the Jacobian with unit-norm columns: how well the motion separates the parameters."""
    jac = np.asarray(jac, dtype=float)
    norms = np.linalg.norm(jac, axis=0) if jac.ndim == 2 else np.zeros(0)
    return float(np.linalg.cond(jac / norms)) if norms.size and np.all(norms > 0) else math.inf


def prior_metrics(prior: Prior, x_hat: np.ndarray, res_star: Sequence, jac: np.ndarray | None,
                   intervals: np.ndarray, notes: list[str]) -> dict[str, Any]:
    """What the prior did: its weight and standard deviations, its share of the cost, and each coordinate's
    95 % half-width with the prior over the data's alone (the library's white-residual ones, before widening)."""
    rows = prior.rows(x_hat)
    data_cost = 0.5 * float(sum(np.sum(r ** 2) for r in res_star))
    _, alone = sysid.calculate_intervals(res_star, jac) if jac is not None else (None, np.full(len(x_hat), np.inf))
    alone = np.asarray(alone, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = {name: round(float(intervals[i] / alone[i]), 4) if alone[i] > 0 else None
                 for name, i in zip(prior.names, prior.index)}
    finite = [v for v in ratio.values() if v is not None and math.isfinite(v)]
    notes.append(f"regularization toward the nominal model (weight {prior.weight:g}, prior sd = bound range / "
                 f"4): prior cost {0.5 * float(rows @ rows):.4g} against the data's {data_cost:.4g}; half-widths are "
                 f"the posterior's" + (f", x{min(finite):.3g}-{max(finite):.3g} of the data's alone" if finite else ""))
    return {"weight": prior.weight, "prior_sd": {n: float(v) for n, v in zip(prior.names, prior.scale)},
            "prior_cost": 0.5 * float(rows @ rows), "data_cost": data_cost, "half_width_ratio": ratio}


def identifiable(kind: str, value: Sequence[float], half: Sequence[float], lo: Sequence[float],
                 hi: Sequence[float], relative: float) -> bool:
    """Whether every half-width is finite and at most `relative` x the value, or x a floor for a value near zero:
    1 % of the bound range (a centre of mass on an axis), for a body_inertia's tensor entries 1 % of its trace.
    Judged in physical terms (a body_inertia's log-Cholesky coordinates sit near 0 whatever the body)."""
    floors = [0.01 * (b - a) for a, b in zip(lo, hi)]
    if kind == "body_inertia":
        floors[4:] = [0.01 * sum(value[4:7])] * 6
    return all(math.isfinite(h) and h <= relative * max(abs(v), floor, 1e-12)
               for h, v, floor in zip(half, value, floors))


def inertia_result(theta: np.ndarray, half: tuple[float, ...], cov: np.ndarray, lo: tuple[float, ...],
                    hi: tuple[float, ...]) -> tuple[dict[str, tuple], tuple[float, ...], tuple[float, ...],
                                                     tuple[float, ...], tuple[float, ...]]:
    """A body_inertia result in physical terms: (coordinates, value, half-widths, min, max). The mass and com
    bounds are the coordinates' images; the tensor entries have no box of their own (-inf..inf)."""
    theta = np.asarray(theta, dtype=float)
    value = tuple(float(v) for v in physical_vector(theta))
    phys_half = tuple(float(v) for v in propagate_half_widths(theta, cov, np.asarray(half, dtype=float)))
    p_lo = (math.exp(2 * lo[0]), *lo[7:10], *[-math.inf] * 6)
    p_hi = (math.exp(2 * hi[0]), *hi[7:10], *[math.inf] * 6)
    coordinates = {"names": COORDINATES, "value": tuple(float(v) for v in theta), "half_width_95": tuple(half),
                   "min": lo, "max": hi}
    return coordinates, value, phys_half, p_lo, p_hi


def fits_of(problem: Problem, res_star: Sequence, group_sizes: Sequence[int], records: Sequence,
                 extra_variance: np.ndarray | None = None) -> list[SignalFit]:
    """Per observed signal, the training residual against the declared noise (`residual_stats`)."""
    mapping = records[0][0].signal_mapping
    signals = sorted(mapping, key=lambda name: int(mapping[name][1][0]))
    scales = [problem.velocity_noise_rad_s if name.endswith("_qvel") else problem.position_noise_rad
              for name in signals]
    return signal_fits(res_star, group_sizes, signals, scales, extra_variance)


def misfit_intervals(res_star: Sequence, group_sizes: Sequence[int], signals: int, jac: np.ndarray,
                        intervals: np.ndarray, fits: Sequence[SignalFit]) -> tuple[np.ndarray, np.ndarray]:
    """Half-widths of a misfit: the larger of the given ones and a block sandwich whose blocks (3
    autocorrelation times, at most one segment) are nearly independent. Returns (half-widths, widening)."""
    tau = max(f.samples / max(f.effective_samples, 1e-300) for f in fits)
    blocks = time_blocks(res_star, group_sizes, signals, int(math.ceil(3 * tau)))
    cov, count = block_sandwich(jac, np.concatenate(res_star), blocks)
    sandwich = float(stdtrit(max(count - 1, 1), 0.975)) * np.sqrt(np.clip(np.diag(cov), 0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        widening = np.where(intervals > 0, np.maximum(sandwich / intervals, 1.0), 1.0)
    return np.maximum(intervals, sandwich), widening


def with_start_state_noise(problem: Problem, model: mujoco.MjModel, maps: Sequence[sd.JointMap],
                            sources: Sequence, ms: sysid.ModelSequences, build: CachedBuild, modify: ScaledResidual,
                            params: sysid.ParameterDict, x_hat: np.ndarray, jac: np.ndarray, res_star: Sequence,
                            cov: np.ndarray, intervals: np.ndarray, weight: bool, lower: np.ndarray,
                            upper: np.ndarray, prior: Prior | None = None
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any, np.ndarray, np.ndarray]:
    """The measured start states' noise (`start_error`): (covariance, half-widths, their widening over the
    library's, the noise, x, each residual row's start-state variance). Propagated into the covariance; with
    `weight` also a GLS step that moves x."""
    noise = start_state_noise(model, maps, sources, problem.smoothing_samples or 0, problem.start_velocity)
    shifter = ShiftedStartRollout()
    fn = batched_residual_fn([ms], build_model=build, modify_residual=modify, custom_rollout=shifter,
                             resample_true=False)
    jac = np.asarray(jac, dtype=float)
    r0, sens, seg_rows = start_state_sensitivity(x_hat, params, fn, shifter, len(ms.measured_rollout[0].initial_state),
                                                 noise, base=res_star)
    t = float(stdtrit(max(len(r0) - len(x_hat), 1), 0.975))
    if weight:
        prior_rows = None if prior is None else (prior.jacobian(len(x_hat)), prior.rows(x_hat))
        step, new_cov, _ = weighted_step(jac, r0, sens, seg_rows, noise, prior_rows)
        x_new = np.clip(x_hat + step, lower, upper)
        widened = t * np.sqrt(np.clip(np.diag(new_cov), 0, None))
    else:
        x_new = x_hat
        new_cov = cov + start_state_covariance(jac, sens, seg_rows, noise,
                                               None if prior is None else prior.jacobian(len(x_hat)))
        widened = np.sqrt(intervals ** 2 + t ** 2 * np.clip(np.diag(new_cov - cov), 0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        widening = np.where(intervals > 0, widened / intervals, np.nan)
    return new_cov, widened, widening, noise, x_new, start_state_row_variance(sens, seg_rows, noise)


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
        notes.append(f"masses {', '.join(r.name for r in members)} enter the joint dynamics only as their sum "
                     f"{total:.6g} kg (about +- {bound:.2g}); apart they rest on the assumed centres of mass")
    return [replace(r, identifiable=False, half_width_95=(math.inf,)) if r in masses and r.target in split else r
            for r in results]
