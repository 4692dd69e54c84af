"""Run an identification problem on `mujoco.sysid`: `identify` runs the stages in order, each in its own module
and each a function of what the stages before it returned:

1. `data.load_run` -> `Loaded`: the model, bounds from physics, the checked problem, the data cut into segments;
2. `warm_start.start_values` -> `Start`: the start values (warm-started by the regression) and the prior;
3. `optimize.fit_parameters` -> `Fit`: the residual of every training segment, minimised;
4. `intervals.estimate_spread` -> `Spread`: intervals (start states' noise, misfit widening) and the time-offset scan;
5. `validation.validate` -> `Validated`: metrics, the identified model (the window fit's, or an arm's
   torque-space fit when its held-out torque is clearly lower), held-out replays and torque;
6. `parameter_results.parameter_results`: each parameter's result and the warnings about it.

With `window_fit: auto`, on an arm with measured torque whose problem frees only what the torque-space fit writes
(`validation.torque_first`), stages 3-4 are first skipped: the torque-space fit is weighed against the start
values on time-blocked folds of the training rows and, when it predicts their torque below `TAKE_BELOW` x theirs,
the run ends there (on the real Panda log: 16-20 s instead of 75-84); otherwise the log is rewound and the run
goes on as above.

Notes, warnings, metrics and timings gather in one `results.RunLog`. Results are written by `write.write_results`.
"""

from __future__ import annotations

import time

from threadpoolctl import threadpool_limits

from .problem.file import Problem
from .results import IdentificationResult, ParameterResult, Progress, RunLog, verdict
from .stages.intervals import Spread, estimate_spread, spread_at_start
from .stages.load import Loaded, load_run
from .stages.optimize import Fit, fit_parameters, unoptimized
from .stages.summarize import carried_parameters, parameter_results
from .stages.validation import Validated, torque_first, validate, window_fit_reason
from .stages.warm_start import Start, start_values


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
    run = load_run(problem, log)
    log.timings["load_s"] = time.perf_counter() - t_start
    log.report("validate", 0.1, f"{len(run.train)} training and {len(run.val)} validation segments")
    start = start_values(run, log)
    if torque_first(run):
        done = _torque_first(run, start, log, t_start)
        if done is not None:
            return done
    data_warnings = len(log.warnings)  # the data's (and the warm start's); the later ones are the window fit's
    fit = fit_parameters(run, start, log)
    spread = estimate_spread(run, start, fit, log)
    checked = validate(run, fit, spread, log)
    fit_warnings = len(log.warnings)  # the window fit's values' warnings (bounds, warm start) follow
    results = parameter_results(run, start, fit, spread, checked.metrics, log)
    window_fit: list[ParameterResult] = []
    if checked.torque_space.get("taken"):
        # the window fit's misfit warnings stay (its residuals say the model's structure may be wrong), named as
        # its own; those about its values (on a bound, far from the warm start) become notes: the MJCF does not
        # hold those values (they are under `window_fit_parameters`)
        log.notes += [f"window fit: {w}" for w in log.warnings[fit_warnings:]]
        log.warnings[data_warnings:] = [f"window fit: {w}" for w in log.warnings[data_warnings:fit_warnings]]
        window_fit = results
        half_widths = checked.torque_space.get("half_width_95", {})
        results = carried_parameters(run.problem.parameters, results, checked.identified, half_widths, log)
    return _result(run, start, fit, spread, checked, results, window_fit, log, t_start)


def _torque_first(run: Loaded, start: Start, log: RunLog, t_start: float) -> IdentificationResult | None:
    """The run without the window fit: the torque-space fit weighed against the start values on time-blocked
    folds of the training rows, carried when below `TAKE_BELOW` x their torque; None (the log as it was, and a
    note) when it is not, and the window fit must run."""
    kept = (len(log.notes), len(log.warnings), dict(log.metrics), dict(log.timings))
    fit = unoptimized(run, start)
    spread = spread_at_start(fit)
    checked = validate(run, fit, spread, log, window_fit=False)
    space = checked.torque_space
    if not space.get("taken"):
        del log.notes[kept[0] :], log.warnings[kept[1] :]
        log.metrics, log.timings = kept[2], kept[3]
        log.notes.append(f"the window fit runs: {window_fit_reason(space)}")
        return None
    checked.metrics["window_fit"] = "not run: the torque-space fit stands alone (window_fit: always runs it)"
    values = parameter_results(run, start, fit, spread, {}, RunLog())  # the start values as results
    results = carried_parameters(run.problem.parameters, values, checked.identified, space["half_width_95"], log)
    return _result(run, start, fit, spread, checked, results, [], log, t_start)


def _result(
    run: Loaded,
    start: Start,
    fit: Fit,
    spread: Spread,
    checked: Validated,
    results: list[ParameterResult],
    window_fit: list[ParameterResult],
    log: RunLog,
    t_start: float,
) -> IdentificationResult:
    log.warnings += checked.torque_warnings
    objective = tuple(float(v) for v in (getattr(fit.opt_result, "extras", None) or {}).get("objective", ()))
    log.timings["total_s"] = time.perf_counter() - t_start
    log.report("done", 1.0, f"identified {len(results)} parameters in {log.timings['total_s']:.2f} s")
    return IdentificationResult(
        problem=run.problem,
        parameters=tuple(results),
        metrics=checked.metrics,
        identified_spec=checked.identified,
        initial_params=start.params,
        opt_params=fit.opt_params,
        opt_result=fit.opt_result,
        residual_fn=fit.residual_fn,
        model_sequences=fit.ms,
        covariance=spread.cov,
        traces=tuple(checked.traces),
        objective=objective,
        notes=tuple(log.notes),
        timings_s=log.timings,
        verdict=verdict(log.warnings),
        warnings=tuple(log.warnings),
        friction=checked.friction,
        torque_space=checked.torque_space,
        window_fit_parameters=tuple(window_fit),
    )
