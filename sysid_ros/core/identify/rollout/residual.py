"""The residual pieces handed to mujoco.sysid: name-matched state signals with fixed scales, estimated
start states through `custom_rollout`, segments batched into one rollout, and null-direction detection."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mujoco
import numpy as np
from mujoco import sysid
from mujoco.sysid._src.residual import construct_ts_from_defaults

from . import sequences as sd


class ScaledResidual:
    """`modify_residual`: predicted joint-state signals matched to the measured ones by name, the
    SignalTransform's delays/gains/biases, and a fixed scale per signal (its noise level).

    The library's default divides each column by the norm of the measured window, which blows up for a
    joint that stays near zero in a short window; a fixed scale keeps windows comparable.
    """

    def __init__(self, transform: sysid.SignalTransform, position_scale: float, velocity_scale: float) -> None:
        self.transform = transform
        self.scales = {sysid.SignalType.MjStateQPos: position_scale, sysid.SignalType.MjStateQVel: velocity_scale}
        self._state_maps: dict[int, dict] = {}
        self._layouts: dict[tuple, tuple] = {}
        # nothing for the transform to do (mujoco 4.0.0's SignalTransform, pinned): `_plain` gives its result
        self.plain = not (
            transform.normalize
            or transform._delays
            or transform._gains
            or transform._biases
            or transform._sensor_weights
            or transform._enabled_sensors is not None
        )

    def _state_mapping(self, model: mujoco.MjModel) -> dict:
        key = id(model)
        if key not in self._state_maps:
            qpos, qvel, act, _ = sysid.TimeSeries.compute_all_state_mappings(model)
            self._state_maps = {key: qpos | qvel | act}
        return self._state_maps[key]

    def __call__(
        self,
        params: sysid.ParameterDict,
        predicted: sysid.TimeSeries,
        measured: sysid.TimeSeries,
        model: mujoco.MjModel,
        return_pred_all: bool,
        state: np.ndarray | None = None,
        **_: Any,
    ) -> tuple[np.ndarray, sysid.TimeSeries, sysid.TimeSeries]:
        layout = self._layout(model, measured) if self.plain else None
        if layout is not None:  # the library's steps below, on arrays, with the column matching done once
            keep, source, mapping, scale = layout
            res, predicted, measured = _plain(
                predicted.times, state[:, 1:][:, source], measured.times, measured.data[:, keep], mapping
            )
            return res / scale, predicted, measured
        state_ts = sysid.TimeSeries(state[:, 0], state[:, 1:], self._state_mapping(model))
        measured, predicted = construct_ts_from_defaults(state_ts, predicted, measured)
        res, predicted, measured = self.transform.apply(params, predicted, measured, model, return_pred_all)
        return res / self._scale(measured.signal_mapping, res.shape[-1]), predicted, measured

    def _scale(self, mapping: dict | None, columns: int) -> np.ndarray:
        scale = np.ones(columns)
        for kind, idx in (mapping or {}).values():
            scale[idx] = self.scales.get(kind, 1.0)
        return scale

    def _layout(self, model: mujoco.MjModel, measured: sysid.TimeSeries) -> tuple | None:
        """(measured columns kept, state columns predicting them, their mapping, scales) as
        `construct_ts_from_defaults` matches them; None unless every measured signal is a state signal."""
        mapping = measured.signal_mapping
        key = (id(mapping), model.nq, model.nv, model.na)
        hit = self._layouts.get(key)
        if hit is not None and hit[0] is mapping:  # the mapping is kept alive here: its id is not reused
            return hit[1]
        layout = None
        if mapping and all(kind in STATE_SIGNALS for kind, _ in mapping.values()):
            state_map = self._state_mapping(model)
            if all(name in state_map for name in mapping):
                order = [i for name in mapping for i in mapping[name][1]]
                selected = sysid.TimeSeries.slice_by_name(measured, list(mapping)).signal_mapping
                source = np.zeros(len(order), dtype=int)
                for name, (_, target) in selected.items():
                    source[target] = state_map[name][1]
                layout = (np.asarray(order), source, selected, self._scale(selected, len(order)))
        self._layouts[key] = (mapping, layout)
        return layout


STATE_SIGNALS = (sysid.SignalType.MjStateQPos, sysid.SignalType.MjStateQVel, sysid.SignalType.MjStateAct)


def _plain(
    pred_times: np.ndarray, pred_data: np.ndarray, times: np.ndarray, values: np.ndarray, mapping: dict
) -> tuple[np.ndarray, sysid.TimeSeries, sysid.TimeSeries]:
    """`SignalTransform.apply` without delays, gains, biases, weights or normalisation: the measured samples
    (`times`, `values`, columns as `mapping` says) inside the predicted span, the prediction (`pred_data`, the
    same columns) linearly interpolated at their times, measured - predicted. The library builds a scipy
    interpolator per window for this."""
    t = np.asarray(pred_times)
    lo = int(np.searchsorted(times, t[0], side="left"))
    hi = int(np.searchsorted(times, t[-1], side="right"))
    times, values = times[lo:hi], values[lo:hi]
    if len(t) > 1:  # scipy's interp1d(kind="linear") step by step, for the same numbers
        k = np.clip(np.searchsorted(t, times), 1, len(t) - 1)
        slope = (pred_data[k] - pred_data[k - 1]) / (t[k] - t[k - 1])[:, None]
        at = slope * (times - t[k - 1])[:, None] + pred_data[k - 1]
    else:
        at = np.repeat(pred_data[:1], len(times), axis=0)
    return values - at, sysid.TimeSeries(times, at, mapping), sysid.TimeSeries(times, values, mapping)


class InitialStateRollout:
    """`custom_rollout` that starts each segment from estimated initial joint positions and velocities.

    A measured start state carries the sensor noise into the whole rollout (0.005 rad/s of velocity noise
    moved a pendulum's friction loss by 1.6 %); estimating it with the physics removes that bias. The
    start values are nuisance parameters `x0/<segment>/<joint>_qpos|qvel` (no modifier, no recompile).
    """

    PREFIX = "x0/"

    def __init__(
        self,
        ms: sysid.ModelSequences,
        model: mujoco.MjModel,
        maps: Sequence[sd.JointMap],
        params: sysid.ParameterDict,
        position_range_rad: float = 0.05,
        velocity_range_rad_s: float = 0.5,
    ):
        self.slots: dict[int, list[tuple[str, int]]] = {}
        for name, traj in zip(ms.sequence_name, ms.measured_rollout):
            slots = []
            for m in maps:
                jid = model.joint(m.mjcf_joint).id
                for kind, index, half in (
                    ("qpos", 1 + model.jnt_qposadr[jid], position_range_rad),
                    ("qvel", 1 + model.nq + model.jnt_dofadr[jid], velocity_range_rad_s),
                ):
                    value = float(traj.initial_state[index])
                    pname = f"{self.PREFIX}{name}/{m.mjcf_joint}_{kind}"
                    params.add(sysid.Parameter(pname, value, value - half, value + half))
                    slots.append((pname, int(index)))
            self.slots[id(traj.initial_state)] = slots

    def __call__(
        self,
        models: Sequence[mujoco.MjModel],
        datas: Sequence[mujoco.MjData],
        control_signal: Sequence,
        initial_states: Sequence[np.ndarray],
        param_dicts: Sequence[sysid.ParameterDict],
        **mappings: Any,
    ) -> Sequence[sysid.SystemTrajectory]:
        n_chunks = len(initial_states) // len(param_dicts)
        states = []
        for i, st in enumerate(initial_states):
            slots = self.slots.get(id(st))
            if slots is None:
                states.append(st)
                continue
            params = param_dicts[i // n_chunks]
            st = np.array(st, copy=True)
            for pname, index in slots:
                st[index] = params[pname].value[0]
            states.append(st)
        return sysid.sysid_rollout(models, datas, control_signal, states, **mappings)


_THREADS: int | None = None  # None: the library's default, one rollout thread per core of the machine


def set_rollout_threads(threads: int | None) -> None:
    """How many threads each batched rollout of this process may use (None: every core, the library's
    default). A worker sharing the machine with other workers takes only its share of the cores: more
    threads than cores only make them wait for each other."""
    global _THREADS
    _THREADS = None if threads is None else max(int(threads), 1)


def batched_residual_fn(models_sequences: Sequence[sysid.ModelSequences], **kwargs: Any) -> Callable[..., Any]:
    """Like `build_residual_fn`, but segments of equal length go through `model_residual` together.

    The library's `residual` calls `model_residual` (and one rollout) per segment; with many short
    windows the per-call overhead dominates. `model_residual` accepts several trajectories and rolls them
    out in one batched call; its 2-D (finite-difference) output has one column per (point, segment) and
    is regrouped here to one column per point, segment-major rows, as `residual` would stack them.
    """
    groups: list[tuple[mujoco.MjSpec, list]] = []
    names: list[str] = []
    for ms in models_sequences:
        by_shape: dict[tuple, list] = {}
        dt = ms.spec.option.timestep
        for name, traj in zip(ms.sequence_name, ms.measured_rollout):
            # the library drops measured samples before the first predicted one (t = dt): on a jittered time
            # base windows of equal length can keep different numbers of rows, which it cannot stack
            early = int(np.count_nonzero(np.asarray(traj.sensordata.times) < dt * (1 - 1e-9)))
            by_shape.setdefault((len(traj.control), len(traj.sensordata), early), []).append((name, traj))
        for members in by_shape.values():
            groups.append((ms.spec, [traj for _, traj in members]))
            names += [name for name, _ in members]
    build_model = kwargs.pop("build_model", sysid.apply_param_modifiers)

    def residual_fn(x: np.ndarray, params: sysid.ParameterDict, **overrides: Any) -> Any:
        residuals, preds, records = [], [], []
        for spec, trajs in groups:
            threads = {} if _THREADS is None else {"n_threads": _THREADS}
            res, pred, rec = sysid.model_residual(
                x, params, lambda p, _s=spec: build_model(p, _s), trajs, **{**threads, **kwargs, **overrides}
            )
            if x.ndim > 1:  # (rows, n_fd * n_chunks), point-major columns -> (n_chunks * rows, n_fd)
                n_fd, n_chunks = x.shape[1], len(trajs)
                res = res.reshape(res.shape[0], n_fd, n_chunks).transpose(2, 0, 1).reshape(-1, n_fd)
            residuals.append(res)
            preds.append(pred)
            records.append(rec)
        return residuals, preds, records

    residual_fn.segment_names = tuple(names)  # type: ignore[attr-defined]  # order of preds/records
    residual_fn.group_sizes = tuple(len(trajs) for _, trajs in groups)  # type: ignore[attr-defined]
    return residual_fn


def null_directions(
    jac: np.ndarray,
    x: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    relative_eigenvalue: float = 1e-10,
    component: float = 0.1,
) -> np.ndarray:
    """Which parameters take part in a (near) null direction of J^T J, columns scaled to unit-free.

    Independent of the residual level, so it also works on noise-free data where every interval is ~0.
    """
    if jac is None or np.size(jac) == 0:
        return np.zeros(len(x), dtype=bool)
    scale = np.maximum(np.abs(x), 1e-3 * (upper - lower))
    h = (jac * scale).T @ (jac * scale)
    lam, vec = np.linalg.eigh(h)
    weak = lam <= relative_eigenvalue * max(float(lam.max()), 1e-300)
    return np.any(np.abs(vec[:, weak]) > component, axis=1) if weak.any() else np.zeros(len(x), dtype=bool)
