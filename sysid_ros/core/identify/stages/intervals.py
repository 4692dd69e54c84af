"""The run's fourth stage, `estimate_spread`: the library's intervals at the optimum and the data's null directions,
then what they leave out: the measured start states' noise, a misfit's correlated residuals (block sandwich), the
prior's share; and a scan for a time offset between command and feedback."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from mujoco import sysid
from scipy.special import stdtrit

from ..checks.misfit import SignalFit, block_sandwich, signal_fits, time_blocks
from ..checks.start_noise import (
    ShiftedStartRollout,
    StartStateNoise,
    start_state_covariance,
    start_state_noise,
    start_state_row_variance,
    start_state_sensitivity,
    weighted_step,
)
from ..checks.suspect import offset_warnings, residual_warnings
from ..checks.time_offset import OffsetScan, residual_builder, scan_command_offset
from ..problem.file import ParameterSpec, Problem
from ..problem.plausibility import Prior
from ..results import RunLog
from ..rollout.residual import batched_residual_fn, null_directions
from .load import Loaded
from .optimize import Fit
from .warm_start import Start


@dataclass(frozen=True)
class Spread:
    """The fit's residuals, Jacobian and intervals (after the start states' noise and any misfit widening)."""

    x_hat: np.ndarray
    res_star: Sequence
    preds: Sequence
    records: Sequence
    jac: np.ndarray | None
    cov: np.ndarray
    intervals: np.ndarray
    null: np.ndarray
    widening: np.ndarray
    residual_widening: np.ndarray
    extra_variance: np.ndarray | None  # each residual row's variance from its measured start state (noise units)
    fits: list[SignalFit]
    scan: OffsetScan | None


def free_slices(parameters: Sequence[ParameterSpec], opt_params: Mapping[str, Any]) -> dict[str, slice]:
    """Each free parameter's slice of the fit's vector (its intervals, null directions, widening, covariance), in
    the problem's order; frozen parameters have none."""
    out, k = {}, 0
    for p in parameters:
        if not p.frozen:
            width = opt_params[p.name].size
            out[p.name] = slice(k, k + width)
            k += width
    return out


def spread_at_start(fit: Fit) -> Spread:
    """The training residuals and predictions at the values of an unoptimized `fit` (the window fit not run), with
    no intervals (inf: nothing was fitted) and no misfit or time-offset checks (they judge a window fit)."""
    x = np.asarray(fit.opt_result.x, dtype=float)
    res_star, preds, records = fit.residual_fn(x, fit.opt_params, return_pred_all=True)
    n = len(x)
    ones = np.ones(n)
    return Spread(
        x,
        res_star,
        preds,
        records,
        None,
        np.full((n, n), np.nan),
        np.full(n, np.inf),
        np.ones(n, dtype=bool),
        ones,
        ones.copy(),
        None,
        [],
        None,
    )


def estimate_spread(run: Loaded, start: Start, fit: Fit, log: RunLog) -> Spread:
    """The intervals (after the start states' noise and any misfit widening) and the offset scan."""
    return _misfit(run, fit, _intervals(run, start, fit, log), log)


def _intervals(run: Loaded, start: Start, fit: Fit, log: RunLog) -> Spread:
    """The library's intervals at the optimum and the data's null directions; then the start states' noise."""
    log.report("intervals", 0.87, "confidence intervals")
    prior, x_hat = start.prior, np.asarray(fit.opt_result.x, dtype=float)
    res_star, preds, records = fit.residual_fn(x_hat, fit.opt_params, return_pred_all=True)
    jac_full = None if fit.opt_result.jac is None else np.asarray(fit.opt_result.jac, dtype=float)
    jac = jac_full if prior is None or jac_full is None else jac_full[: -len(prior.index)]  # the data's rows
    cov, intervals = sysid.calculate_intervals(res_star if prior is None else [*res_star, prior.rows(x_hat)], jac_full)
    intervals = np.asarray(intervals, dtype=float)
    lower, upper = fit.opt_params.get_bounds()
    null = null_directions(jac, x_hat, lower, upper)  # the data's own null directions (a prior hides them)
    if prior is not None:
        log.metrics["regularization"] = prior_metrics(prior, x_hat, res_star, jac, intervals, log.notes)
    spread = Spread(
        x_hat,
        res_star,
        preds,
        records,
        jac,
        cov,
        intervals,
        null,
        np.ones(len(intervals)),
        np.ones(len(intervals)),
        None,
        [],
        None,
    )
    if not run.problem.estimate_initial_state and np.size(intervals):
        return _start_state_noise(run, start, fit, spread, log)
    return spread


def _start_state_noise(run: Loaded, start: Start, fit: Fit, spread: Spread, log: RunLog) -> Spread:
    """Segments that start from measured states: that state's noise carried into the intervals, or (with
    `start_noise: weight`) one generalized least-squares step that weights each segment by it."""
    t0 = time.perf_counter()
    problem = run.problem
    log.report("intervals", 0.88, "propagating the measured start states' noise")
    weight = problem.start_noise == "weight" and not spread.null.any()
    effect = start_noise_effect(run, start, fit, spread, weight)
    spread = replace(
        spread, cov=effect.cov, intervals=effect.intervals, widening=effect.widening, extra_variance=effect.row_variance
    )
    if weight:
        fit.opt_params.update_from_vector(effect.x)
        res_star, preds, records = fit.residual_fn(effect.x, fit.opt_params, return_pred_all=True)
        spread = replace(spread, x_hat=effect.x, res_star=res_star, preds=preds, records=records)
    log.timings["start_state_s"] = time.perf_counter() - t0
    noise_text = f"{_fmt(effect.noise.position_noise)} rad, {_fmt(effect.noise.velocity_noise)} rad/s"
    log.notes.append(
        "segments start from measured states: one generalized least-squares step weights each "
        f"segment by its start state's noise ({noise_text}); intervals from that weighting"
        if weight
        else "segments start from measured states: intervals include that state's noise "
        f"carried through each segment ({noise_text}; half-widths x{np.nanmin(effect.widening):.2g}-"
        f"{np.nanmax(effect.widening):.2g} of the white-residual ones)"
    )
    if problem.start_noise == "weight" and not weight:
        log.notes.append("start_noise: weight skipped (a null direction); intervals propagate it instead")
    return spread


def _misfit(run: Loaded, fit: Fit, spread: Spread, log: RunLog) -> Spread:
    """Training residuals against the declared noise (a misfit widens the intervals), and a scan for a time
    offset between command and feedback."""
    fits = fits_of(run.problem, spread.res_star, fit.residual_fn.group_sizes, spread.records, spread.extra_variance)
    log.warnings += residual_warnings(fits, {m.mjcf_joint: m.ros_joint for m in run.maps})
    intervals, residual_widening = spread.intervals, np.ones(len(spread.intervals))
    if any(f.too_large for f in fits) and np.size(intervals) and spread.jac is not None:
        signals = len(spread.records[0][0].signal_mapping)
        intervals, residual_widening = misfit_intervals(
            spread.res_star, fit.residual_fn.group_sizes, signals, spread.jac, intervals, fits
        )
    t0 = time.perf_counter()
    log.report("intervals", 0.9, "scanning for a command/feedback time offset")
    scan = _offset_scan(run, fit, spread)
    log.timings["offset_scan_s"] = time.perf_counter() - t0
    log.warnings += offset_warnings(scan)
    return replace(spread, intervals=intervals, residual_widening=residual_widening, fits=fits, scan=scan)


def _offset_scan(run: Loaded, fit: Fit, spread: Spread) -> OffsetScan | None:
    if spread.jac is None or not np.size(spread.jac):
        return None

    def make_fn(m):
        return batched_residual_fn(
            [m],
            build_model=fit.build,
            modify_residual=fit.modify,
            custom_rollout=fit.rollout,
            resample_true=False,
        )

    commands = {id(samples): cmd for _, parts in run.train_data for samples, cmd in parts}
    residuals_at = residual_builder(
        fit.ms, run.train_sources, commands, run.model, run.maps, make_fn, spread.x_hat, fit.opt_params
    )
    return scan_command_offset(float(run.model.opt.timestep), np.asarray(spread.jac, dtype=float), residuals_at)


def _fmt(values: np.ndarray) -> str:
    return "/".join(f"{v:.2g}" for v in values)


def prior_metrics(
    prior: Prior, x_hat: np.ndarray, res_star: Sequence, jac: np.ndarray | None, intervals: np.ndarray, notes: list[str]
) -> dict[str, Any]:
    """What the prior did: its weight and standard deviations, its share of the cost, and each coordinate's
    95 % half-width with the prior over the data's alone (the library's white-residual ones, before widening)."""
    rows = prior.rows(x_hat)
    data_cost = 0.5 * float(sum(np.sum(r**2) for r in res_star))
    _, alone = sysid.calculate_intervals(res_star, jac) if jac is not None else (None, np.full(len(x_hat), np.inf))
    alone = np.asarray(alone, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = {
            name: round(float(intervals[i] / alone[i]), 4) if alone[i] > 0 else None
            for name, i in zip(prior.names, prior.index)
        }
    finite = [v for v in ratio.values() if v is not None and math.isfinite(v)]
    notes.append(
        f"regularization toward the nominal model (weight {prior.weight:g}, prior sd = bound range / "
        f"4): prior cost {0.5 * float(rows @ rows):.4g} against the data's {data_cost:.4g}; half-widths are "
        f"the posterior's" + (f", x{min(finite):.3g}-{max(finite):.3g} of the data's alone" if finite else "")
    )
    return {
        "weight": prior.weight,
        "prior_sd": {n: float(v) for n, v in zip(prior.names, prior.scale)},
        "prior_cost": 0.5 * float(rows @ rows),
        "data_cost": data_cost,
        "half_width_ratio": ratio,
    }


def fits_of(
    problem: Problem,
    res_star: Sequence,
    group_sizes: Sequence[int],
    records: Sequence,
    extra_variance: np.ndarray | None = None,
) -> list[SignalFit]:
    """Per observed signal, the training residual against the declared noise (`residual_stats`)."""
    mapping = records[0][0].signal_mapping
    signals = sorted(mapping, key=lambda name: int(mapping[name][1][0]))
    scales = [
        problem.velocity_noise_rad_s if name.endswith("_qvel") else problem.position_noise_rad for name in signals
    ]
    return signal_fits(res_star, group_sizes, signals, scales, extra_variance)


def misfit_intervals(
    res_star: Sequence,
    group_sizes: Sequence[int],
    signals: int,
    jac: np.ndarray,
    intervals: np.ndarray,
    fits: Sequence[SignalFit],
) -> tuple[np.ndarray, np.ndarray]:
    """Half-widths of a misfit: the larger of the given ones and a block sandwich whose blocks (3
    autocorrelation times, at most one segment) are nearly independent. Returns (half-widths, widening)."""
    tau = max(f.samples / max(f.effective_samples, 1e-300) for f in fits)
    blocks = time_blocks(res_star, group_sizes, signals, int(math.ceil(3 * tau)))
    cov, count = block_sandwich(jac, np.concatenate(res_star), blocks)
    sandwich = float(stdtrit(max(count - 1, 1), 0.975)) * np.sqrt(np.clip(np.diag(cov), 0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        widening = np.where(intervals > 0, np.maximum(sandwich / intervals, 1.0), 1.0)
    return np.maximum(intervals, sandwich), widening


@dataclass(frozen=True)
class StartNoiseEffect:
    """What the measured start states' noise does to a fit: covariance, half-widths, their widening over the
    library's, the noise itself, x (moved by the GLS step when weighted), each residual row's start-state variance."""

    cov: np.ndarray
    intervals: np.ndarray
    widening: np.ndarray
    noise: StartStateNoise
    x: np.ndarray
    row_variance: np.ndarray


def start_noise_effect(run: Loaded, start: Start, fit: Fit, spread: Spread, weight: bool) -> StartNoiseEffect:
    """The measured start states' noise (`checks.start_noise`) propagated into the covariance; with `weight` also a
    GLS step that moves x."""
    problem, ms, prior, params = run.problem, fit.ms, start.prior, fit.opt_params
    x_hat, res_star, intervals = spread.x_hat, spread.res_star, spread.intervals
    cov = np.asarray(spread.cov, dtype=float)
    lower, upper = params.get_bounds()
    noise = start_state_noise(
        run.model, run.maps, run.train_sources, problem.smoothing_samples or 0, problem.start_velocity
    )
    shifter = ShiftedStartRollout()
    fn = batched_residual_fn(
        [ms], build_model=fit.build, modify_residual=fit.modify, custom_rollout=shifter, resample_true=False
    )
    jac = np.asarray(spread.jac, dtype=float)
    r0, sens, seg_rows = start_state_sensitivity(
        x_hat, params, fn, shifter, len(ms.measured_rollout[0].initial_state), noise, base=res_star
    )
    t = float(stdtrit(max(len(r0) - len(x_hat), 1), 0.975))
    if weight:
        prior_rows = None if prior is None else (prior.jacobian(len(x_hat)), prior.rows(x_hat))
        step, new_cov, _ = weighted_step(jac, r0, sens, seg_rows, noise, prior_rows)
        x_new = np.clip(x_hat + step, lower, upper)
        widened = t * np.sqrt(np.clip(np.diag(new_cov), 0, None))
    else:
        x_new = x_hat
        new_cov = cov + start_state_covariance(
            jac, sens, seg_rows, noise, None if prior is None else prior.jacobian(len(x_hat))
        )
        widened = np.sqrt(intervals**2 + t**2 * np.clip(np.diag(new_cov - cov), 0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        widening = np.where(intervals > 0, widened / intervals, np.nan)
    return StartNoiseEffect(new_cov, widened, widening, noise, x_new, start_state_row_variance(sens, seg_rows, noise))
