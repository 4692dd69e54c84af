"""Checks on held-out data: the identified model replays the validation segments (position traces and RMS),
and held-out joint torque per joint against the model file's (`torque_check`); the training traces too."""

from __future__ import annotations

from typing import Any, Sequence

import mujoco
import numpy as np
from mujoco import sysid

from ..errors import SysidRosError
from ..report.identification import Trace
from . import sysid_data as sd
from .parameters import CachedBuild
from .problem import Problem
from .quiet import quiet_output
from .residual import InitialStateRollout, ScaledResidual, batched_residual_fn
from .torque_check import torque_validation


def position_traces(split: str, preds: Sequence, records: Sequence, maps: Sequence[sd.JointMap],
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


def replay_held_out(problem: Problem, identified: mujoco.MjSpec, model: mujoco.MjModel, maps: Sequence[sd.JointMap],
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
    traces, sq, count = position_traces("validation", preds, records, maps, fn.segment_names)
    return traces, {m.ros_joint: float(np.sqrt(s / count)) for m, s in zip(maps, sq)}


def held_out_torque(problem: Problem, model: mujoco.MjModel, identified: mujoco.MjSpec, maps: Sequence[sd.JointMap],
                  train_data: Sequence, val_data: Sequence, metrics: dict[str, Any], notes: list[str]
                  ) -> dict[str, Any]:
    """Held-out joint torque RMS per joint (`torque_check`) of the model file, the identified model and the
    regression with smooth friction, into the metrics; returns the per-joint friction document."""
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
