"""Run an identification problem on `mujoco.sysid`: load and check data, warm start, optimise, intervals,
held-out validation. Entry points: `identify(problem, progress)` and `write_results(result, out_dir)`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import mujoco
import numpy as np
import yaml
from mujoco import sysid

from ..errors import SysidRosError
from ..report.identification import Trace
from . import sysid_data as sd
from .data import build_segments, load_source, segment_sources
from .model_cache import compiled_model
from .parameters import CachedBuild, build_parameters, identified_xml, signal_transform
from .plausibility import Prior, make_prior, physical_bounds, with_prior
from .problem import Problem, check_problem
from .quiet import quiet_output
from .residual import InitialStateRollout, ScaledResidual, batched_residual_fn, null_directions
from .residual_stats import SignalFit, block_sandwich, signal_fits, time_blocks
from .start_error import (ShiftedStartRollout, start_state_covariance, start_state_noise, start_state_row_variance,
                          start_state_sensitivity, weighted_step)
from .time_offset import OffsetScan, residual_builder, scan_command_offset
from .verdict import bound_warnings, offset_warnings, residual_warnings, verdict, warm_start_warnings
from .warm_start import apply_warm_start, arm_warm_start, pendulum_warm_start

Progress = Callable[[str, float, str], None]
"""progress(stage, fraction 0..1 of the whole run, message)."""


@dataclass(frozen=True)
class ParameterResult:
    """One identified parameter: value, 95 % half-width (inf when not identifiable), start and bounds."""

    name: str
    kind: str
    target: str
    value: tuple[float, ...]
    half_width_95: tuple[float, ...]
    start: tuple[float, ...]
    min_value: tuple[float, ...]
    max_value: tuple[float, ...]
    frozen: bool
    identifiable: bool
    warm_start: tuple[float, ...] | None = None
    coordinates: dict[str, tuple] | None = None
    """`body_inertia`: the optimiser's log-Cholesky coordinates (`names`, `value`, `half_width_95`, `min`,
    `max`); `value` etc. above are then mass, com and tensor (`inertia.PHYSICAL`), half-widths propagated."""


@dataclass(eq=False)
class IdentificationResult:
    problem: Problem
    parameters: tuple[ParameterResult, ...]
    metrics: dict[str, Any]
    identified_spec: mujoco.MjSpec
    initial_params: sysid.ParameterDict
    opt_params: sysid.ParameterDict
    opt_result: Any
    residual_fn: Callable[..., Any]
    model_sequences: sysid.ModelSequences
    covariance: np.ndarray
    traces: tuple[Trace, ...]
    objective: tuple[float, ...]
    notes: tuple[str, ...] = ()
    timings_s: dict[str, float] = field(default_factory=dict)
    verdict: str = "ok"  # "ok" | "suspect": suspect when there is any warning
    warnings: tuple[str, ...] = ()  # one line each, naming the signal/parameter/file and the number that tripped
    friction: dict[str, Any] = field(default_factory=dict)  # per joint: the regression's friction and offset

    def value(self, name: str) -> float:
        """The first component of a parameter's identified value."""
        return next(p.value[0] for p in self.parameters if p.name == name)


# --- the run ------------------------------------------------------------------------------------------

def _report(progress: Progress | None, stage: str, fraction: float, message: str) -> None:
    if progress is not None:
        progress(stage, fraction, message)

def _traces(split: str, preds: Sequence, records: Sequence, maps: Sequence[sd.JointMap],
            names: Sequence[str], limit: int = 4) -> tuple[list[Trace], np.ndarray, int]:
    """Position traces of the first segments, and the sum of squared position errors per joint."""
    keys = [f"{m.mjcf_joint}_qpos" for m in maps]
    flat = lambda xs: [y for x in xs for y in (x if isinstance(x, list) else [x])]  # noqa: E731
    preds, records = flat(preds), flat(records)
    sq, count, traces = np.zeros(len(maps)), 0, []
    for k, (pred, meas) in enumerate(zip(preds, records)):
        idx = [meas.signal_mapping[key][1][0] for key in keys]
        err = meas.data[:, idx] - pred.data[:, idx]
        sq += np.sum(err ** 2, axis=0)
        count += len(err)
        if k < limit:
            traces.append(Trace(split, names[k], tuple(m.ros_joint for m in maps), np.asarray(meas.times),
                                meas.data[:, idx].copy(), pred.data[:, idx].copy()))
    return traces, sq, count


def _validate(problem: Problem, identified: mujoco.MjSpec, model: mujoco.MjModel, maps: Sequence[sd.JointMap],
              segments: Sequence[sd.Segment], opt_params: sysid.ParameterDict, modify: ScaledResidual
              ) -> tuple[list[Trace], dict[str, float]]:
    """Replay held-out segments on the identified model (only their start states are estimated)."""
    val_ms = sd.model_sequences(problem.name + "_validation", identified.copy(), segments)
    params = opt_params.copy()
    for name in params.keys():
        params[name].frozen = True  # the identified spec already holds the values
    rollout = InitialStateRollout(val_ms, model, maps, params) if problem.estimate_initial_state else None
    fn = batched_residual_fn([val_ms], build_model=CachedBuild(), modify_residual=modify, custom_rollout=rollout,
                             resample_true=False)
    if rollout is not None:
        with quiet_output(problem.optimizer.quiet):  # start states enter almost linearly: 2 Gauss-Newton steps
            params, _ = sysid.optimize(params, fn, optimizer="mujoco", verbose=False, max_iters=2)
    _, preds, records = fn(params.as_vector(), params, return_pred_all=True)
    traces, sq, count = _traces("validation", preds, records, maps, fn.segment_names)
    return traces, {m.ros_joint: float(np.sqrt(s / count)) for m, s in zip(maps, sq)}


def identify(problem: Problem, progress: Progress | None = None) -> IdentificationResult:
    """Identify the problem's parameters; every input is checked before the first rollout.

    BLAS runs on one thread meanwhile: the matrices here are small (residual rows x parameters), extra BLAS
    threads only wait for each other, and on busy shared cores they spin (a 420 x 90 pivoted QR: 2 ms on
    one thread, 16 ms CPU at the median and up to 280 ms with two). MuJoCo's rollout threads are its own.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _identify(problem, progress)


def _identify(problem: Problem, progress: Progress | None) -> IdentificationResult:
    timings: dict[str, float] = {}
    t_start = time.perf_counter()
    _report(progress, "load", 0.0, f"loading model {problem.model}")
    spec, model = compiled_model(problem)  # compiled once per process and model file
    maps = sd.joint_maps(model, problem.joints, problem.mapping)
    signals = [f"{m.mjcf_joint}_{sd.STATE_FIELDS[f]}" for f in problem.observe for m in maps]
    problem, notes = physical_bounds(problem, spec, model)  # missing min/max from physics, one note each
    starts = check_problem(problem, spec, model, signals)
    warnings: list[str] = []  # each one makes the verdict suspect
    train_data = [(f"train{k}_{src.path.stem}", load_source(src, problem.joints, warnings, notes))
                  for k, src in enumerate(problem.training)]
    val_data = [(f"val{k}_{src.path.stem}", load_source(src, problem.joints, warnings, notes))
                for k, src in enumerate(problem.validation)]
    metrics_extra: dict[str, Any] = {}
    if problem.start_velocity == "auto":  # measured start states: from the measured velocity or positions
        from .start_states import choose_start_states

        choice = choose_start_states([s for _, parts in train_data for s, _ in parts], problem.joints)
        problem = replace(problem, start_velocity=choice.velocity, smoothing_samples=choice.smoothing_samples)
        if not problem.estimate_initial_state:
            notes.append(f"start states: {choice.reason}")
    train_sources = segment_sources(problem, model, maps, train_data)
    train = [seg for seg, _ in train_sources]
    val = build_segments(problem, model, maps, val_data) if val_data else []
    timings["load_s"] = time.perf_counter() - t_start
    _report(progress, "validate", 0.1, f"{len(train)} training and {len(val)} validation segments")

    params = build_parameters(spec, problem.parameters, starts)
    prior = make_prior(problem.regularization_weight, params, [p.name for p in problem.parameters])
    warm: dict[str, float] = {}
    regression: dict[str, tuple[float, float]] = {}  # the warm start's estimates and half-widths, unclipped
    if problem.warm_start:
        try:
            regression = pendulum_warm_start(problem, model, maps, train_data)
            warm = apply_warm_start(params, {name: v for name, (v, _) in regression.items()})
        except SysidRosError as exc:
            notes.append(f"regression warm start failed: {exc}")
        if not warm and len(maps) > 1:
            warm = _arm_warm_start(problem, model, maps, train_data, val_data, params, notes, metrics_extra)
        if not warm:
            notes.append("no regression warm start for this problem (one-joint pendulums, or every joint of an "
                         "arm with body_mass / joint_damping / joint_frictionloss / joint_armature parameters)")
    _report(progress, "warm_start", 0.15, f"warm start {warm}" if warm else "starting from the given values")

    ms = sd.model_sequences(problem.name, spec, [s for s in train])
    build = CachedBuild()
    transform = signal_transform(problem.parameters, params)
    modify = ScaledResidual(transform, problem.position_noise_rad, problem.velocity_noise_rad_s)
    rollout = InitialStateRollout(ms, model, maps, params) if problem.estimate_initial_state else None
    # resample_true=False: the control is already held on the simulation grid (no linear resampling)
    residual_fn = batched_residual_fn([ms], build_model=build, modify_residual=modify, custom_rollout=rollout,
                                      resample_true=False)

    fit_fn = with_prior(residual_fn, prior)  # what the optimiser sees: the data's rows (+ the prior's)
    evals = [0, 0]  # residual calls, parameter points (each a rollout of every segment)
    max_iters = problem.optimizer.max_iters

    def counted(x: np.ndarray, p: sysid.ParameterDict, **kw: Any) -> Any:
        out = fit_fn(x, p, **kw)
        evals[0] += 1
        evals[1] += 1 if x.ndim == 1 else x.shape[1]
        if x.ndim == 1 or x.shape[1] == 1:  # a function evaluation, not a finite-difference Jacobian
            cost = 0.5 * float(sum(np.sum(r ** 2) for r in out[0]))
            _report(progress, "optimize", min(0.15 + 0.7 * evals[0] / (2 * max_iters + 2), 0.85),
                    f"evaluation {evals[0]}: cost {cost:.6g}")
        return out

    t0 = time.perf_counter()
    with quiet_output(problem.optimizer.quiet):
        opt_params, opt_result = _optimize(problem, params, counted, notes)
    timings["optimize_s"] = time.perf_counter() - t0
    x_hat = np.asarray(opt_result.x, dtype=float)
    _report(progress, "intervals", 0.87, "confidence intervals")
    res_star, preds, records = residual_fn(x_hat, opt_params, return_pred_all=True)
    jac_full = None if opt_result.jac is None else np.asarray(opt_result.jac, dtype=float)
    jac = jac_full if prior is None or jac_full is None else jac_full[:-len(prior.index)]  # the data's rows
    cov, intervals = sysid.calculate_intervals(res_star if prior is None else [*res_star, prior.rows(x_hat)],
                                               jac_full)
    intervals = np.asarray(intervals, dtype=float)
    lower, upper = opt_params.get_bounds()
    null = null_directions(jac, x_hat, lower, upper)  # the data's own null directions (a prior hides them)
    if prior is not None:
        metrics_extra["regularization"] = _prior_metrics(prior, x_hat, res_star, jac, intervals, notes)
    widening = np.ones(len(intervals))
    extra_variance = None  # each residual row's variance from its measured start state (noise units)
    if not problem.estimate_initial_state and np.size(intervals):
        t0 = time.perf_counter()
        _report(progress, "intervals", 0.88, "propagating the measured start states' noise")
        weight = problem.start_noise == "weight" and not null.any()
        cov, intervals, widening, noise, x_new, extra_variance = _with_start_state_noise(
            problem, model, maps, train_sources, ms, build, modify, opt_params, x_hat, jac, res_star,
            np.asarray(cov, dtype=float), intervals, weight, lower, upper, prior)
        if weight:
            x_hat = x_new
            opt_params.update_from_vector(x_hat)
            res_star, preds, records = residual_fn(x_hat, opt_params, return_pred_all=True)
        timings["start_state_s"] = time.perf_counter() - t0
        noise_text = f"{_fmt(noise.position_noise)} rad, {_fmt(noise.velocity_noise)} rad/s"
        notes.append(("segments start from measured states: one generalized least-squares step weights each "
                      f"segment by its start state's noise ({noise_text}); intervals from that weighting"
                      if weight else "segments start from measured states: intervals include that state's noise "
                      f"carried through each segment ({noise_text}; half-widths x{np.nanmin(widening):.2g}-"
                      f"{np.nanmax(widening):.2g} of the white-residual ones)"))
        if problem.start_noise == "weight" and not weight:
            notes.append("start_noise: weight skipped (a null direction); intervals propagate it instead")

    fits = _signal_fits(problem, res_star, residual_fn.group_sizes, records, extra_variance)
    warnings += residual_warnings(fits, {m.mjcf_joint: m.ros_joint for m in maps})
    residual_widening = np.ones(len(intervals))
    if any(f.too_large for f in fits) and np.size(intervals) and jac is not None:
        intervals, residual_widening = _residual_intervals(res_star, residual_fn.group_sizes, len(records[0][0]
                                                           .signal_mapping), jac,
                                                           intervals, fits)
    t0 = time.perf_counter()
    _report(progress, "intervals", 0.9, "scanning for a command/feedback time offset")
    scan = _offset_scan(model, maps, ms, train_sources, train_data, lambda m: batched_residual_fn(
        [m], build_model=build, modify_residual=modify, custom_rollout=rollout, resample_true=False),
        opt_params, x_hat, jac)
    timings["offset_scan_s"] = time.perf_counter() - t0
    warnings += offset_warnings(scan)

    traces, sq, count = _traces("training", preds, records, maps, residual_fn.segment_names)
    metrics: dict[str, Any] = {
        "training_position_rms_rad": {m.ros_joint: float(np.sqrt(s / count)) for m, s in zip(maps, sq)},
        "training_segments": len(train), "residual_evaluations": evals[0], "parameter_points": evals[1],
        "model_compiles": build.compiles,
        "final_cost": 0.5 * float(sum(np.sum(r ** 2) for r in res_star)),
        "jacobian_condition_number": _condition_number(jac), **metrics_extra,
        "training_residual_ratio": {_signal_name(f.signal, maps): round(f.ratio, 4) for f in fits},
    }
    if scan is not None:
        metrics["command_offset_ms"] = scan.offset_ms
        metrics["command_offset_cost_ratio"] = round(scan.cost_ratio, 4)
    identified = spec.copy()
    sysid.apply_param_modifiers_spec(opt_params, identified)
    if val:
        _report(progress, "validation", 0.92, f"replaying {len(val)} held-out segments")
        vtraces, vrms = _validate(problem, identified, model, maps, val, opt_params, modify)
        traces += vtraces
        metrics["validation_position_rms_rad"] = vrms
        metrics["validation_segments"] = len(val)
        nominal = spec.copy()  # the same held-out replay on the start values (the nominal model)
        nominal_params = build_parameters(nominal, problem.parameters, starts)
        sysid.apply_param_modifiers_spec(nominal_params, nominal)
        _, nrms = _validate(problem, nominal, model, maps, val, nominal_params, modify)
        metrics["validation_position_rms_rad_start"] = nrms
        worse = [f"{j} {vrms[j] * 1e3:.3g} mrad against {nrms[j] * 1e3:.3g}" for j in vrms if vrms[j] > nrms[j]]
        if worse:
            notes.append(f"held-out position RMS worse than with the start values: {', '.join(worse)}")

    t0 = time.perf_counter()
    _report(progress, "validation", 0.94, "held-out joint torque")
    friction = _torque_check(problem, model, identified, maps, train_data, val_data, metrics, notes)
    timings["torque_check_s"] = time.perf_counter() - t0

    results, k = [], 0
    widened: dict[str, list[float]] = {}
    for p in problem.parameters:
        prm = opt_params[p.name]
        width = prm.size
        in_null = False
        if p.frozen:
            half = (0.0,) * width
        else:
            # a component in a null direction of J^T J is not determined by the data: no finite interval
            # (with a prior the posterior's interval stays finite; the parameter is still not identifiable)
            half = tuple(math.inf if n and prior is None else float(v)
                         for v, n in zip(intervals[k:k + width], null[k:k + width]))
            in_null = bool(np.any(null[k:k + width]))
            widened[p.name] = [float(w) for w in widening[k:k + width]]
            if np.any(residual_widening[k:k + width] > 1):
                metrics.setdefault("residual_widening", {})[p.name] = [
                    round(float(w), 4) for w in residual_widening[k:k + width]]
            k += width
        value = tuple(float(v) for v in prm.value)
        lo, hi, coordinates = tuple(map(float, prm.min_value)), tuple(map(float, prm.max_value)), None
        if p.kind == "body_inertia":
            block = cov[k - width:k, k - width:k] if not p.frozen and np.shape(cov)[0] >= k else np.eye(width)
            coordinates, value, half, lo, hi = _inertia_result(prm.value, half, block, lo, hi)
        ok = p.frozen or (not in_null and identifiable(p.kind, value, half, lo, hi, problem.unidentifiable_relative))
        results.append(ParameterResult(p.name, p.kind, p.target, value, half, starts[p.name], lo, hi,
                                       p.frozen, bool(ok), (warm[p.name],) if p.name in warm else None,
                                       coordinates))
        if not ok:
            notes.append(f"{p.name} is not identifiable from this data (95 % half-width {half})")

    if not problem.estimate_initial_state:
        metrics["start_state_widening"] = widened  # half-width / the library's (white residuals only)
    results = _flag_mass_sums(model, results, notes)
    warnings += bound_warnings(results) + warm_start_warnings(results, regression)
    objective = tuple(float(v) for v in (getattr(opt_result, "extras", None) or {}).get("objective", ()))
    timings["total_s"] = time.perf_counter() - t_start
    _report(progress, "done", 1.0, f"identified {len(results)} parameters in {timings['total_s']:.2f} s")
    return IdentificationResult(problem, tuple(results), metrics, identified, params, opt_params, opt_result,
                                residual_fn, ms, cov, tuple(traces), objective, tuple(notes), timings,
                                verdict(warnings), tuple(warnings), friction)


def _prior_metrics(prior: Prior, x_hat: np.ndarray, res_star: Sequence, jac: np.ndarray | None,
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


def _inertia_result(theta: np.ndarray, half: tuple[float, ...], cov: np.ndarray, lo: tuple[float, ...],
                    hi: tuple[float, ...]) -> tuple[dict[str, tuple], tuple[float, ...], tuple[float, ...],
                                                     tuple[float, ...], tuple[float, ...]]:
    """A body_inertia result in physical terms: (coordinates, value, half-widths, min, max). The mass and com
    bounds are the coordinates' images; the tensor entries have no box of their own (-inf..inf)."""
    from .inertia import COORDINATES, physical_vector, propagate_half_widths

    theta = np.asarray(theta, dtype=float)
    value = tuple(float(v) for v in physical_vector(theta))
    phys_half = tuple(float(v) for v in propagate_half_widths(theta, cov, np.asarray(half, dtype=float)))
    p_lo = (math.exp(2 * lo[0]), *lo[7:10], *[-math.inf] * 6)
    p_hi = (math.exp(2 * hi[0]), *hi[7:10], *[math.inf] * 6)
    coordinates = {"names": COORDINATES, "value": tuple(float(v) for v in theta), "half_width_95": tuple(half),
                   "min": lo, "max": hi}
    return coordinates, value, phys_half, p_lo, p_hi


def _signal_name(signal: str, maps: Sequence[sd.JointMap]) -> str:
    """`<mjcf joint>_qpos` -> `<ros joint>_qpos`."""
    joint, _, kind = signal.rpartition("_")
    return f"{next((m.ros_joint for m in maps if m.mjcf_joint == joint), joint)}_{kind}"


def _signal_fits(problem: Problem, res_star: Sequence, group_sizes: Sequence[int], records: Sequence,
                 extra_variance: np.ndarray | None = None) -> list[SignalFit]:
    """Per observed signal, the training residual against the declared noise (`residual_stats`)."""
    mapping = records[0][0].signal_mapping
    signals = sorted(mapping, key=lambda name: int(mapping[name][1][0]))
    scales = [problem.velocity_noise_rad_s if name.endswith("_qvel") else problem.position_noise_rad
              for name in signals]
    return signal_fits(res_star, group_sizes, signals, scales, extra_variance)


def _residual_intervals(res_star: Sequence, group_sizes: Sequence[int], signals: int, jac: np.ndarray,
                        intervals: np.ndarray, fits: Sequence[SignalFit]) -> tuple[np.ndarray, np.ndarray]:
    """Half-widths of a misfit: the larger of the given ones and a block sandwich whose blocks (3
    autocorrelation times, at most one segment) are nearly independent. Returns (half-widths, widening)."""
    from scipy.special import stdtrit

    tau = max(f.samples / max(f.effective_samples, 1e-300) for f in fits)
    blocks = time_blocks(res_star, group_sizes, signals, int(math.ceil(3 * tau)))
    cov, count = block_sandwich(jac, np.concatenate(res_star), blocks)
    sandwich = float(stdtrit(max(count - 1, 1), 0.975)) * np.sqrt(np.clip(np.diag(cov), 0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        widening = np.where(intervals > 0, np.maximum(sandwich / intervals, 1.0), 1.0)
    return np.maximum(intervals, sandwich), widening


def _offset_scan(model: mujoco.MjModel, maps: Sequence[sd.JointMap], ms: sysid.ModelSequences, sources: Sequence,
                 data: Sequence, make_fn: Callable[[sysid.ModelSequences], Any], params: sysid.ParameterDict,
                 x_hat: np.ndarray, jac: Any) -> OffsetScan | None:
    if jac is None or not np.size(jac):
        return None
    commands = {id(samples): cmd for _, parts in data for samples, cmd in parts}
    residuals_at = residual_builder(ms, sources, commands, model, maps, make_fn, x_hat, params)
    return scan_command_offset(float(model.opt.timestep), np.asarray(jac, dtype=float), residuals_at)


def _condition_number(jac: Any) -> float:
    """Condition number of the Jacobian with unit-norm columns: how well the motion separates the parameters."""
    jac = np.asarray(jac, dtype=float)
    norms = np.linalg.norm(jac, axis=0) if jac.ndim == 2 else np.zeros(0)
    return float(np.linalg.cond(jac / norms)) if norms.size and np.all(norms > 0) else math.inf


MU_FACTOR = 10.0 ** 0.5
"""The mujoco backend's regularizer step (its default 10^0.1). At an optimum with a null direction (two
masses on one axis) no step passes Armijo's test, and the backend raises mu by this factor per trial up to
1e8: 140 rollouts of every window at the default (measured: the warm-started iiwa spent 145 of its 177
parameter points there), 28 at 10^0.5."""


def _optimize(problem: Problem, params: sysid.ParameterDict, residual_fn: Callable[..., Any],
              notes: list[str]) -> tuple[sysid.ParameterDict, Any]:
    """`sysid.optimize`; with the `mujoco` backend also the statistical stopping rule (`stopping`)."""
    backend, opt = problem.optimizer.backend, problem.optimizer
    if backend != "mujoco":
        return sysid.optimize(params, residual_fn, optimizer=backend, verbose=False, max_iters=opt.max_iters,
                              xtol=opt.xtol)
    from scipy.optimize import OptimizeResult

    from .stopping import NegligibleStep, StoppingJacobian

    own = params.copy()  # the backend evaluates on its own copy; the Jacobian's points go through this one
    lower, upper = params.get_bounds()
    jacobian = StoppingJacobian(lambda x: np.concatenate(residual_fn(x, own)[0]), lower, upper)
    trace: list[Any] = []
    try:
        return sysid.optimize(params, residual_fn, optimizer=backend, verbose=False, max_iters=opt.max_iters,
                              xtol=opt.xtol, mu_factor=MU_FACTOR, jacobian=jacobian,
                              iter_callback=lambda t: trace.__setitem__(slice(None), t))
    except NegligibleStep as stop:
        x = np.ravel(stop.x)
        opt_params = params.copy()
        opt_params.update_from_vector(x)
        notes.append(f"optimizer stopped after {len(trace)} iterations: {stop}")
        objective = [float(entry.objective) for entry in trace] + [0.5 * float(stop.r @ stop.r)]
        return opt_params, OptimizeResult(x=x, jac=stop.jac, grad=stop.jac.T @ stop.r,
                                          extras={"objective": objective})


def _arm_warm_start(problem: Problem, model: mujoco.MjModel, maps: Sequence[sd.JointMap], train_data: Sequence,
                    val_data: Sequence, params: sysid.ParameterDict, notes: list[str],
                    metrics: dict[str, Any]) -> dict[str, float]:
    """The whole-arm regression warm start, used only when it predicts held-out torque better than the start."""
    try:
        arm = arm_warm_start(problem, model, maps, train_data, val_data)
    except SysidRosError as exc:
        notes.append(f"whole-arm regression warm start failed: {exc}")
        return {}
    if arm is None:
        return {}
    metrics["warm_start_torque_check"] = {"held_out": arm.held_out, "start_rms_nm": arm.torque_rms_start_nm,
                                          "warm_start_rms_nm": arm.torque_rms_warm_nm, "used": arm.better}
    total = lambda rms: math.sqrt(sum(v ** 2 for v in rms.values()))  # noqa: E731
    text = (f"held-out torque RMS {total(arm.torque_rms_warm_nm):.3g} N m with the regression estimate, "
            f"{total(arm.torque_rms_start_nm):.3g} N m with the start values ({arm.held_out})")
    if not arm.better:
        notes.append(f"whole-arm regression warm start not used: {text}")
        return {}
    notes.append(f"whole-arm regression warm start: {text}")
    return apply_warm_start(params, arm.values)


def _torque_check(problem: Problem, model: mujoco.MjModel, identified: mujoco.MjSpec, maps: Sequence[sd.JointMap],
                  train_data: Sequence, val_data: Sequence, metrics: dict[str, Any], notes: list[str]
                  ) -> dict[str, Any]:
    """Held-out joint torque RMS per joint (`torque_check`) of the model file, the identified model and the
    regression with smooth friction, into the metrics; returns the per-joint friction document."""
    from .torque_check import torque_validation

    try:
        check = torque_validation(model, maps, train_data, val_data,
                                  {"nominal": model, "identified": identified.copy().compile()})
    except SysidRosError as exc:
        notes.append(f"torque-space validation failed: {exc}")
        return {}
    if check is None:
        return {}
    metrics["held_out_torque_rms_nm"] = check.metrics()
    worse = [j for j in check.joints if check.rms_nm["identified"][j] > check.rms_nm["nominal"][j]]
    if worse:
        notes.append(f"held-out joint torque ({check.held_out}) predicted worse by the identified model than by "
                     "the model file on " + ", ".join(f"{j} ({check.rms_nm['identified'][j]:.3g} vs "
                                                      f"{check.rms_nm['nominal'][j]:.3g} N m)" for j in worse))
    notes += check.friction_notes({m.ros_joint for m in maps for p in problem.parameters
                                   if p.kind == "joint_effort_offset" and p.target == m.mjcf_joint})
    return check.friction_document()


def _fmt(values: np.ndarray) -> str:
    return "/".join(f"{v:.2g}" for v in values)


def _with_start_state_noise(problem: Problem, model: mujoco.MjModel, maps: Sequence[sd.JointMap],
                            sources: Sequence, ms: sysid.ModelSequences, build: CachedBuild, modify: ScaledResidual,
                            params: sysid.ParameterDict, x_hat: np.ndarray, jac: np.ndarray, res_star: Sequence,
                            cov: np.ndarray, intervals: np.ndarray, weight: bool, lower: np.ndarray,
                            upper: np.ndarray, prior: Prior | None = None
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any, np.ndarray, np.ndarray]:
    """The measured start states' noise (`start_error`): (covariance, half-widths, their widening over the
    library's, the noise, x, each residual row's start-state variance). Propagated into the covariance; with
    `weight` also a GLS step that moves x."""
    from scipy.special import stdtrit

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


def _flag_mass_sums(model: mujoco.MjModel, results: list[ParameterResult], notes: list[str]) -> list[ParameterResult]:
    """Masses that joint data sees only as their sum (bodies fixed to one link) are not identifiable apart.

    A mass-only fit still splits them, but only through the centres of mass the model assumes (1 cm off on
    the iiwa's flange payload moved the split by 19 % / 52 % with sub-0.1 % intervals): report the sum.
    """
    masses = [r for r in results if r.kind == "body_mass" and not r.frozen]
    if len(masses) < 2:
        return results
    from .arm_models import mass_sum_groups

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


def results_document(result: IdentificationResult) -> dict[str, Any]:
    """The content of `identified.yaml`."""
    def scalar(v: tuple[float, ...]) -> float | list[float]:
        return v[0] if len(v) == 1 else list(v)

    return {
        "verdict": result.verdict,
        "warnings": list(result.warnings),
        "model": result.problem.model,
        "parameters": {p.name: {"kind": p.kind, "target": p.target, "value": scalar(p.value),
                                "half_width_95": scalar(tuple(x if math.isfinite(x) else float("inf")
                                                              for x in p.half_width_95)),
                                "start": scalar(p.start), "min": scalar(p.min_value), "max": scalar(p.max_value),
                                "frozen": p.frozen, "identifiable": p.identifiable,
                                **({"warm_start": scalar(p.warm_start)} if p.warm_start else {}),
                                **({"coordinates": {key: list(v) for key, v in p.coordinates.items()}}
                                   if p.coordinates else {})}
                       for p in result.parameters},
        "metrics": result.metrics,
        **({"friction": result.friction} if result.friction else {}),
        "notes": list(result.notes),
        "timings_s": result.timings_s,
    }


def result_names(problem: Problem) -> dict[str, str]:
    """The names `write_results` writes inside its folder (the problem's `name` is a plain file name)."""
    from ..files.paths import model_path
    from ..report.identification import DATA_FILE

    names = {"yaml": "identified.yaml", "mjcf": f"{problem.name}.xml", "values": "identified_values.yaml",
             "library": "mujoco_sysid", "report": "report.html", "report_data": DATA_FILE}
    if model_path(problem.model).suffix == ".urdf":
        names["urdf"] = f"{problem.name}.urdf"
    return names


def write_results(result: IdentificationResult, out_dir: str | Path, force: bool = False) -> dict[str, Path]:
    """Write identified.yaml, the identified MJCF at full precision, `identified_values.yaml` (the values
    by body/joint), the identified URDF when the model is one, the library's save_results output (in
    `mujoco_sysid/`) and an offline report.html (with its report_data.npz). Returns the paths written.

    Earlier results in `out_dir` are refused unless `force`; all outputs appear together or not at all
    (see `core.files.outputs`). Check the folder before a long run with `check_writable(out, result_names(..))`.
    """
    from ..files.outputs import staged
    from ..files.paths import model_path
    from .export import identified_urdf, identified_values
    from .report import write_report

    names = result_names(result.problem)
    document = results_document(result)
    source = model_path(result.problem.model)
    with staged(out_dir, list(names.values()), force) as tmp:
        paths = {key: tmp[name] for key, name in names.items()}
        if "urdf" in paths:
            urdf_text, urdf_notes = identified_urdf(source, result.identified_spec, result.problem.parameters)
            document["notes"] = document["notes"] + urdf_notes
            paths["urdf"].write_text(urdf_text)
        values = {p.name: p.value for p in result.parameters}
        paths["yaml"].write_text(yaml.safe_dump(document, sort_keys=False))
        paths["values"].write_text(yaml.safe_dump(identified_values(result.problem.parameters, values),
                                                   sort_keys=False))
        paths["mjcf"].write_text(identified_xml(result.identified_spec, result.problem.parameters,
                                                result.opt_params))
        ms = result.model_sequences
        sysid.apply_param_modifiers_spec(result.opt_params, ms.spec)  # the library writes ms.spec as it is
        with quiet_output(result.problem.optimizer.quiet):
            sysid.save_results(paths["library"], [ms], result.initial_params, result.opt_params, result.opt_result,
                               result.residual_fn)
        write_report(result, paths["report"])
    out = Path(out_dir).expanduser().resolve()
    return {key: out / name for key, name in names.items()}
