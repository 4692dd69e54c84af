"""Run an identification problem on `mujoco.sysid`, stage by stage: load and check the data, warm start,
optimise, intervals, residual checks, held-out validation, parameter results. Entry point: `identify`.

Each stage is a function of what the stages before it returned (`Loaded`, `Start`, `Fit`, `Spread`); notes,
warnings, metrics and timings gather in one `RunLog`. Results are written by `write.write_results`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import mujoco
import numpy as np
from mujoco import sysid
from threadpoolctl import threadpool_limits

from ..errors import SysidRosError
from ..report.identification import Trace
from . import sysid_data as sd
from .data import build_segments, load_source, segment_sources
from .intervals import (condition_number, fits_of, flag_mass_sums, identifiable, inertia_result, misfit_intervals,
                        prior_metrics, with_start_state_noise)
from .model_cache import compiled_model
from .optimize import counted, optimize
from .parameters import CachedBuild, build_parameters, signal_transform
from .plausibility import Prior, make_prior, physical_bounds, with_prior
from .problem import ParameterSpec, Problem
from .problem_model import check_problem
from .quiet import quiet_output
from .residual import InitialStateRollout, ScaledResidual, batched_residual_fn, null_directions
from .residual_stats import SignalFit
from .results import IdentificationResult, ParameterResult, Progress
from .start_states import choose_start_states
from .time_offset import OffsetScan, residual_builder, scan_command_offset
from .validation import held_out_torque, position_traces, replay_held_out
from .verdict import bound_warnings, offset_warnings, residual_warnings, verdict, warm_start_warnings
from .warm_start import apply_warm_start, arm_warm_start_if_better, pendulum_warm_start


@dataclass
class RunLog:
    """What a run gathers on its way: notes, warnings (each makes the verdict suspect), metrics and timings."""

    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)  # the warm start's and the prior's, among the fit's
    timings: dict[str, float] = field(default_factory=dict)
    progress: Progress | None = None

    def report(self, stage: str, fraction: float, message: str) -> None:
        if self.progress is not None:
            self.progress(stage, fraction, message)


@dataclass(frozen=True)
class Loaded:
    """The problem (bounds from physics, start states chosen), its model and its data cut into segments."""

    problem: Problem
    spec: mujoco.MjSpec
    model: mujoco.MjModel
    maps: list[sd.JointMap]
    starts: dict[str, tuple[float, ...]]
    train_data: list
    val_data: list
    train_sources: list
    train: list
    val: list


@dataclass(frozen=True)
class Start:
    """The parameters at their start values (warm-started where the regression helps) and the prior."""

    params: sysid.ParameterDict
    prior: Prior | None
    warm: dict[str, float]
    regression: dict[str, tuple[float, float]]  # the warm start's estimates and half-widths, unclipped


@dataclass(frozen=True)
class Fit:
    """The optimiser's result and the residual it minimised."""

    ms: sysid.ModelSequences
    build: CachedBuild
    modify: ScaledResidual
    rollout: InitialStateRollout | None
    residual_fn: Any
    opt_params: sysid.ParameterDict
    opt_result: Any
    evals: list[int]  # residual calls, parameter points (each a rollout of every segment)


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


def identify(problem: Problem, progress: Progress | None = None) -> IdentificationResult:
    """Identify the problem's parameters; every input is checked before the first rollout.

    BLAS runs on one thread meanwhile: the matrices here are small (residual rows x parameters), extra BLAS
    threads only wait for each other, and on busy shared cores they spin (a 420 x 90 pivoted QR: 2 ms on
    one thread, 16 ms CPU at the median and up to 280 ms with two). MuJoCo's rollout threads are its own.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _identify(problem, RunLog(progress=progress))


def _identify(problem: Problem, log: RunLog) -> IdentificationResult:
    t_start = time.perf_counter()
    run = _load(problem, log)
    log.timings["load_s"] = time.perf_counter() - t_start
    log.report("validate", 0.1, f"{len(run.train)} training and {len(run.val)} validation segments")
    start = _warm_start(run, log)
    fit = _fit(run, start, log)
    spread = _misfit(run, fit, _intervals(run, start, fit, log), log)
    metrics, traces = _metrics(run, fit, spread, log)
    identified = run.spec.copy()
    sysid.apply_param_modifiers_spec(fit.opt_params, identified)
    traces += _validation(run, fit, identified, metrics, log)
    t0 = time.perf_counter()
    log.report("validation", 0.94, "held-out joint torque")
    friction = held_out_torque(run.problem, run.model, identified, run.maps, run.train_data, run.val_data, metrics,
                               log.notes)
    log.timings["torque_check_s"] = time.perf_counter() - t0
    results = _parameter_results(run, start, fit, spread, metrics, log)
    log.warnings += bound_warnings(results) + warm_start_warnings(results, start.regression)
    objective = tuple(float(v) for v in (getattr(fit.opt_result, "extras", None) or {}).get("objective", ()))
    log.timings["total_s"] = time.perf_counter() - t_start
    log.report("done", 1.0, f"identified {len(results)} parameters in {log.timings['total_s']:.2f} s")
    return IdentificationResult(run.problem, tuple(results), metrics, identified, start.params, fit.opt_params,
                                fit.opt_result, fit.residual_fn, fit.ms, spread.cov, tuple(traces), objective,
                                tuple(log.notes), log.timings, verdict(log.warnings), tuple(log.warnings), friction)


def _load(problem: Problem, log: RunLog) -> Loaded:
    """The model (compiled once per process and model file), bounds from physics, the checked problem, the data."""
    log.report("load", 0.0, f"loading model {problem.model}")
    spec, model = compiled_model(problem)
    maps = sd.joint_maps(model, problem.joints, problem.mapping)
    signals = [f"{m.mjcf_joint}_{sd.STATE_FIELDS[f]}" for f in problem.observe for m in maps]
    problem, bound_notes = physical_bounds(problem, spec, model)  # missing min/max from physics, one note each
    log.notes += bound_notes
    starts = check_problem(problem, spec, model, signals)
    train_data = [(f"train{k}_{src.path.stem}", load_source(src, problem.joints, log.warnings, log.notes))
                  for k, src in enumerate(problem.training)]
    val_data = [(f"val{k}_{src.path.stem}", load_source(src, problem.joints, log.warnings, log.notes))
                for k, src in enumerate(problem.validation)]
    if problem.start_velocity == "auto":  # measured start states: from the measured velocity or positions
        choice = choose_start_states([s for _, parts in train_data for s, _ in parts], problem.joints)
        problem = replace(problem, start_velocity=choice.velocity, smoothing_samples=choice.smoothing_samples)
        if not problem.estimate_initial_state:
            log.notes.append(f"start states: {choice.reason}")
    train_sources = segment_sources(problem, model, maps, train_data)
    val = build_segments(problem, model, maps, val_data) if val_data else []
    return Loaded(problem, spec, model, maps, starts, train_data, val_data, train_sources,
                  [seg for seg, _ in train_sources], val)


def _warm_start(run: Loaded, log: RunLog) -> Start:
    """Start values: the regression's estimate where it overlaps the problem (a pendulum, or a whole arm when it
    predicts held-out torque better), else the given ones; and the prior toward them when asked for."""
    problem = run.problem
    params = build_parameters(run.spec, problem.parameters, run.starts)
    prior = make_prior(problem.regularization_weight, params, [p.name for p in problem.parameters])
    warm: dict[str, float] = {}
    regression: dict[str, tuple[float, float]] = {}
    if problem.warm_start:
        try:
            regression = pendulum_warm_start(problem, run.model, run.maps, run.train_data)
            warm = apply_warm_start(params, {name: v for name, (v, _) in regression.items()})
        except SysidRosError as exc:
            log.notes.append(f"regression warm start failed: {exc}")
        if not warm and len(run.maps) > 1:
            warm = arm_warm_start_if_better(problem, run.model, run.maps, run.train_data, run.val_data, params,
                                            log.notes, log.metrics)
        if not warm:
            log.notes.append("no regression warm start for this problem (one-joint pendulums, or every joint of an "
                             "arm with body_mass / joint_damping / joint_frictionloss / joint_armature parameters)")
    log.report("warm_start", 0.15, f"warm start {warm}" if warm else "starting from the given values")
    return Start(params, prior, warm, regression)


def _fit(run: Loaded, start: Start, log: RunLog) -> Fit:
    """The residual of every training segment (scaled by the declared noise) minimised by the optimiser."""
    problem = run.problem
    ms = sd.model_sequences(problem.name, run.spec, [s for s in run.train])
    build = CachedBuild()
    modify = ScaledResidual(signal_transform(problem.parameters, start.params), problem.position_noise_rad,
                            problem.velocity_noise_rad_s)
    rollout = InitialStateRollout(ms, run.model, run.maps, start.params) if problem.estimate_initial_state else None
    # resample_true=False: the control is already held on the simulation grid (no linear resampling)
    residual_fn = batched_residual_fn([ms], build_model=build, modify_residual=modify, custom_rollout=rollout,
                                      resample_true=False)
    evals = [0, 0]
    fit_fn = counted(with_prior(residual_fn, start.prior), problem.optimizer.max_iters, log.progress, evals)
    t0 = time.perf_counter()
    with quiet_output(problem.optimizer.quiet):
        opt_params, opt_result = optimize(problem, start.params, fit_fn, log.notes)
    log.timings["optimize_s"] = time.perf_counter() - t0
    return Fit(ms, build, modify, rollout, residual_fn, opt_params, opt_result, evals)


def _intervals(run: Loaded, start: Start, fit: Fit, log: RunLog) -> Spread:
    """The library's intervals at the optimum and the data's null directions; then the start states' noise."""
    log.report("intervals", 0.87, "confidence intervals")
    prior, x_hat = start.prior, np.asarray(fit.opt_result.x, dtype=float)
    res_star, preds, records = fit.residual_fn(x_hat, fit.opt_params, return_pred_all=True)
    jac_full = None if fit.opt_result.jac is None else np.asarray(fit.opt_result.jac, dtype=float)
    jac = jac_full if prior is None or jac_full is None else jac_full[:-len(prior.index)]  # the data's rows
    cov, intervals = sysid.calculate_intervals(res_star if prior is None else [*res_star, prior.rows(x_hat)],
                                               jac_full)
    intervals = np.asarray(intervals, dtype=float)
    lower, upper = fit.opt_params.get_bounds()
    null = null_directions(jac, x_hat, lower, upper)  # the data's own null directions (a prior hides them)
    if prior is not None:
        log.metrics["regularization"] = prior_metrics(prior, x_hat, res_star, jac, intervals, log.notes)
    spread = Spread(x_hat, res_star, preds, records, jac, cov, intervals, null, np.ones(len(intervals)),
                    np.ones(len(intervals)), None, [], None)
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
    lower, upper = fit.opt_params.get_bounds()
    cov, intervals, widening, noise, x_new, extra_variance = with_start_state_noise(
        problem, run.model, run.maps, run.train_sources, fit.ms, fit.build, fit.modify, fit.opt_params, spread.x_hat,
        spread.jac, spread.res_star, np.asarray(spread.cov, dtype=float), spread.intervals, weight, lower, upper,
        start.prior)
    spread = replace(spread, cov=cov, intervals=intervals, widening=widening, extra_variance=extra_variance)
    if weight:
        fit.opt_params.update_from_vector(x_new)
        res_star, preds, records = fit.residual_fn(x_new, fit.opt_params, return_pred_all=True)
        spread = replace(spread, x_hat=x_new, res_star=res_star, preds=preds, records=records)
    log.timings["start_state_s"] = time.perf_counter() - t0
    noise_text = f"{_fmt(noise.position_noise)} rad, {_fmt(noise.velocity_noise)} rad/s"
    log.notes.append(("segments start from measured states: one generalized least-squares step weights each "
                      f"segment by its start state's noise ({noise_text}); intervals from that weighting"
                      if weight else "segments start from measured states: intervals include that state's noise "
                      f"carried through each segment ({noise_text}; half-widths x{np.nanmin(widening):.2g}-"
                      f"{np.nanmax(widening):.2g} of the white-residual ones)"))
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
        intervals, residual_widening = misfit_intervals(spread.res_star, fit.residual_fn.group_sizes, signals,
                                                        spread.jac, intervals, fits)
    t0 = time.perf_counter()
    log.report("intervals", 0.9, "scanning for a command/feedback time offset")
    scan = _offset_scan(run, fit, spread)
    log.timings["offset_scan_s"] = time.perf_counter() - t0
    log.warnings += offset_warnings(scan)
    return replace(spread, intervals=intervals, residual_widening=residual_widening, fits=fits, scan=scan)


def _offset_scan(run: Loaded, fit: Fit, spread: Spread) -> OffsetScan | None:
    if spread.jac is None or not np.size(spread.jac):
        return None
    make_fn = lambda m: batched_residual_fn([m], build_model=fit.build, modify_residual=fit.modify,  # noqa: E731
                                            custom_rollout=fit.rollout, resample_true=False)
    commands = {id(samples): cmd for _, parts in run.train_data for samples, cmd in parts}
    residuals_at = residual_builder(fit.ms, run.train_sources, commands, run.model, run.maps, make_fn, spread.x_hat,
                                    fit.opt_params)
    return scan_command_offset(float(run.model.opt.timestep), np.asarray(spread.jac, dtype=float), residuals_at)


def _metrics(run: Loaded, fit: Fit, spread: Spread, log: RunLog) -> tuple[dict[str, Any], list[Trace]]:
    """The fit's metrics (training RMS, evaluations, cost, conditioning, residual ratios, time offset) and the
    training traces."""
    traces, sq, count = position_traces("training", spread.preds, spread.records, run.maps,
                                        fit.residual_fn.segment_names)
    metrics: dict[str, Any] = {
        "training_position_rms_rad": {m.ros_joint: float(np.sqrt(s / count)) for m, s in zip(run.maps, sq)},
        "training_segments": len(run.train), "residual_evaluations": fit.evals[0], "parameter_points": fit.evals[1],
        "model_compiles": fit.build.compiles,
        "final_cost": 0.5 * float(sum(np.sum(r ** 2) for r in spread.res_star)),
        "jacobian_condition_number": condition_number(spread.jac), **log.metrics,
        "training_residual_ratio": {_signal_name(f.signal, run.maps): round(f.ratio, 4) for f in spread.fits},
    }
    if spread.scan is not None:
        metrics["command_offset_ms"] = spread.scan.offset_ms
        metrics["command_offset_cost_ratio"] = round(spread.scan.cost_ratio, 4)
    return metrics, traces


def _validation(run: Loaded, fit: Fit, identified: mujoco.MjSpec, metrics: dict[str, Any], log: RunLog
                ) -> list[Trace]:
    """Held-out segments replayed on the identified model and on the start values (position RMS of each)."""
    if not run.val:
        return []
    problem = run.problem
    log.report("validation", 0.92, f"replaying {len(run.val)} held-out segments")
    traces, rms = replay_held_out(problem, identified, run.model, run.maps, run.val, fit.opt_params, fit.modify)
    metrics["validation_position_rms_rad"] = rms
    metrics["validation_segments"] = len(run.val)
    nominal = run.spec.copy()  # the same held-out replay on the start values (the nominal model)
    nominal_params = build_parameters(nominal, problem.parameters, run.starts)
    sysid.apply_param_modifiers_spec(nominal_params, nominal)
    _, start_rms = replay_held_out(problem, nominal, run.model, run.maps, run.val, nominal_params, fit.modify)
    metrics["validation_position_rms_rad_start"] = start_rms
    worse = [f"{j} {rms[j] * 1e3:.3g} mrad against {start_rms[j] * 1e3:.3g}" for j in rms if rms[j] > start_rms[j]]
    if worse:
        log.notes.append(f"held-out position RMS worse than with the start values: {', '.join(worse)}")
    return traces


def _parameter_results(run: Loaded, start: Start, fit: Fit, spread: Spread, metrics: dict[str, Any],
                       log: RunLog) -> list[ParameterResult]:
    """Each parameter's value, half-width (inf in a null direction of the data), bounds and identifiability."""
    results, k = [], 0
    widened: dict[str, list[float]] = {}
    for p in run.problem.parameters:
        prm = fit.opt_params[p.name]
        width, in_null, half = prm.size, False, (0.0,) * prm.size
        if not p.frozen:
            # a component in a null direction of J^T J is not determined by the data: no finite interval
            # (with a prior the posterior's interval stays finite; the parameter is still not identifiable)
            half = tuple(math.inf if n and start.prior is None else float(v)
                         for v, n in zip(spread.intervals[k:k + width], spread.null[k:k + width]))
            in_null = bool(np.any(spread.null[k:k + width]))
            widened[p.name] = [float(w) for w in spread.widening[k:k + width]]
            if np.any(spread.residual_widening[k:k + width] > 1):
                metrics.setdefault("residual_widening", {})[p.name] = [
                    round(float(w), 4) for w in spread.residual_widening[k:k + width]]
            k += width
        results.append(_parameter_result(run, start, p, prm, half, in_null, spread.cov, k, log))
    if not run.problem.estimate_initial_state:
        metrics["start_state_widening"] = widened  # half-width / the library's (white residuals only)
    return flag_mass_sums(run.model, results, log.notes)


def _parameter_result(run: Loaded, start: Start, p: ParameterSpec, prm: sysid.Parameter, half: tuple[float, ...], in_null: bool,
                      cov: np.ndarray, k: int, log: RunLog) -> ParameterResult:
    """One parameter's result; a body_inertia's in physical terms (mass, centre of mass, tensor)."""
    width = prm.size
    value = tuple(float(v) for v in prm.value)
    lo, hi, coordinates = tuple(map(float, prm.min_value)), tuple(map(float, prm.max_value)), None
    if p.kind == "body_inertia":
        block = cov[k - width:k, k - width:k] if not p.frozen and np.shape(cov)[0] >= k else np.eye(width)
        coordinates, value, half, lo, hi = inertia_result(prm.value, half, block, lo, hi)
    ok = p.frozen or (not in_null and identifiable(p.kind, value, half, lo, hi, run.problem.unidentifiable_relative))
    if not ok:
        log.notes.append(f"{p.name} is not identifiable from this data (95 % half-width {half})")
    return ParameterResult(p.name, p.kind, p.target, value, half, run.starts[p.name], lo, hi, p.frozen, bool(ok),
                           (start.warm[p.name],) if p.name in start.warm else None, coordinates)


def _signal_name(signal: str, maps: Sequence[sd.JointMap]) -> str:
    """`<mjcf joint>_qpos` -> `<ros joint>_qpos`."""
    joint, _, kind = signal.rpartition("_")
    return f"{next((m.ros_joint for m in maps if m.mjcf_joint == joint), joint)}_{kind}"


def _fmt(values: np.ndarray) -> str:
    return "/".join(f"{v:.2g}" for v in values)
