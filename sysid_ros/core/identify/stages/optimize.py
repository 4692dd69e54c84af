"""The run's third stage, `fit_parameters`: the residual of every training segment minimised by `sysid.optimize` on the
problem's backend; with the `mujoco` backend also the statistical stopping rule (`stopping`), and the progress
of each residual evaluation."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from mujoco import sysid
from scipy.optimize import OptimizeResult

from ..problem.file import Problem
from ..problem.parameters import CachedBuild, signal_transform
from ..problem.plausibility import with_prior
from ..results import Progress, RunLog
from ..rollout import sequences as sd
from ..rollout.quiet import quiet_output
from ..rollout.residual import InitialStateRollout, ScaledResidual, batched_residual_fn
from ..rollout.stopping import NegligibleStep, StoppingJacobian
from .load import Loaded
from .warm_start import Start


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


def fit_parameters(run: Loaded, start: Start, log: RunLog) -> Fit:
    """The residual of every training segment (scaled by the declared noise) minimised by the optimiser."""
    fit = unoptimized(run, start)
    fit_fn = counted(with_prior(fit.residual_fn, start.prior), run.problem.optimizer.max_iters, log.progress, fit.evals)
    t0 = time.perf_counter()
    with quiet_output(run.problem.optimizer.quiet):
        opt_params, opt_result = optimize(run.problem, start.params, fit_fn, log.notes)
    log.timings["optimize_s"] = time.perf_counter() - t0
    return replace(fit, opt_params=opt_params, opt_result=opt_result)


def unoptimized(run: Loaded, start: Start) -> Fit:
    """The residual of every training segment (scaled by the declared noise) at the start values, not minimised
    (the window fit not run: `identify`'s torque-first path)."""
    problem = run.problem
    ms = sd.model_sequences(problem.name, run.spec, [s for s in run.train])
    build = CachedBuild()
    modify = ScaledResidual(
        signal_transform(problem.parameters, start.params), problem.position_noise_rad, problem.velocity_noise_rad_s
    )
    rollout = InitialStateRollout(ms, run.model, run.maps, start.params) if problem.estimate_initial_state else None
    # resample_true=False: the control is already held on the simulation grid (no linear resampling)
    residual_fn = batched_residual_fn(
        [ms], build_model=build, modify_residual=modify, custom_rollout=rollout, resample_true=False
    )
    params = start.params.copy()
    result = OptimizeResult(x=params.as_vector(), jac=None, extras={"objective": []})
    return Fit(ms, build, modify, rollout, residual_fn, params, result, [0, 0])


MU_FACTOR = 10.0**0.5
"""The mujoco backend's regularizer step (its default 10^0.1). At an optimum with a null direction (two
masses on one axis) no step passes Armijo's test, and the backend raises mu by this factor per trial up to
1e8: 140 rollouts of every window at the default (measured: the warm-started iiwa spent 145 of its 177
parameter points there), 28 at 10^0.5."""


def optimize(
    problem: Problem, params: sysid.ParameterDict, residual_fn: Callable[..., Any], notes: list[str]
) -> tuple[sysid.ParameterDict, Any]:
    """`sysid.optimize`; with the `mujoco` backend also the statistical stopping rule (`stopping`)."""
    backend, opt = problem.optimizer.backend, problem.optimizer
    if backend != "mujoco":
        return sysid.optimize(
            params, residual_fn, optimizer=backend, verbose=False, max_iters=opt.max_iters, xtol=opt.xtol
        )
    own = params.copy()  # the backend evaluates on its own copy; the Jacobian's points go through this one
    lower, upper = params.get_bounds()
    jacobian = StoppingJacobian(lambda x: np.concatenate(residual_fn(x, own)[0]), lower, upper)
    trace: list[Any] = []
    try:
        return sysid.optimize(
            params,
            residual_fn,
            optimizer=backend,
            verbose=False,
            max_iters=opt.max_iters,
            xtol=opt.xtol,
            mu_factor=MU_FACTOR,
            jacobian=jacobian,
            iter_callback=lambda t: trace.__setitem__(slice(None), t),
        )
    except NegligibleStep as stop:
        x = np.ravel(stop.x)
        opt_params = params.copy()
        opt_params.update_from_vector(x)
        notes.append(f"optimizer stopped after {len(trace)} iterations: {stop}")
        objective = [float(entry.objective) for entry in trace] + [0.5 * float(stop.r @ stop.r)]
        return opt_params, OptimizeResult(x=x, jac=stop.jac, grad=stop.jac.T @ stop.r, extras={"objective": objective})


def counted(
    fit_fn: Callable[..., Any], max_iters: int, progress: Progress | None, evals: list[int]
) -> Callable[..., Any]:
    """`fit_fn` counting residual calls and parameter points into `evals` and reporting each evaluation's cost."""

    def fn(x: np.ndarray, p: sysid.ParameterDict, **kw: Any) -> Any:
        out = fit_fn(x, p, **kw)
        evals[0] += 1
        evals[1] += 1 if x.ndim == 1 else x.shape[1]
        if progress is not None and (x.ndim == 1 or x.shape[1] == 1):  # an evaluation, not a finite-difference Jacobian
            cost = 0.5 * float(sum(np.sum(r**2) for r in out[0]))
            progress(
                "optimize",
                min(0.15 + 0.7 * evals[0] / (2 * max_iters + 2), 0.85),
                f"evaluation {evals[0]}: cost {cost:.6g}",
            )
        return out

    return fn
