"""Segments that start from measured states: the start state's noise, weighted or propagated.

A segment replayed from a measured start state carries that state's error through its whole rollout;
the optimizer then bends the parameters to absorb it. The library's intervals, s^2 (J'J)^-1, see only
white residual noise and were measured 6-8x too narrow on the pendulum (30-38 % coverage). To first order
a start-state error dx_w of segment w moves the estimate by -(J'J)^-1 J_w' S_w dx_w, with S_w = dr_w/dx0
the residual's sensitivity to that segment's start state. Start-state errors of different segments are
independent (the segments start far apart compared with the smoothing window), so

    Cov = s^2 (J'J)^-1 + (J'J)^-1 [sum_w J_w' S_w Sigma0_w S_w' J_w] (J'J)^-1

where Sigma0_w is the covariance of segment w's start state: the measured noise (estimated from the
data, not the residual scales of the problem) through the same smoothing that made the start state
(`sysid_data.initial_states`, found by feeding it impulses). S is taken by finite differences, shifting
every segment's start state at once (a segment's residual depends only on its own start), one shifted
state component per parameter point of a single batched rollout. A cluster-robust sandwich over segments
would need many segments and is degenerate for one; this needs none.

The same pieces give segment w's residual covariance, I + S_w Sigma0_w S_w' (residuals are scaled by
the noise), and with it generalized least squares (`weighted_step`, `start_noise: weight`): one
Gauss-Newton step from the plain optimum. Measured: pendulum half-widths 4-6x tighter than propagated
and honest (95 % coverage, 20 seeds); iiwa damping errors 0.55 % -> 0.20 % (5 seeds x 10 s).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import mujoco
import numpy as np
from mujoco import sysid

from ...errors import DataError
from ...signals import JointSamples, estimate_position_noise
from ..rollout import sequences as sd


@dataclass(frozen=True, eq=False)
class StartStateNoise:
    """Per segment: the full-state indices of the mapped joints' start values and their covariance."""

    indices: np.ndarray
    covariance: dict[str, np.ndarray]  # segment name -> (m, m)
    position_noise: np.ndarray  # estimated white noise per mapped joint
    velocity_noise: np.ndarray


def _noise(signal: np.ndarray) -> float:
    try:
        return float(np.nan_to_num(estimate_position_noise(signal), nan=0.0))
    except DataError:
        return 0.0


def _impulse_response(
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    samples: JointSamples,
    starts: np.ndarray,
    smoothing: int,
    field: str,
    reach: int,
    velocity: str = "smoothed",
) -> np.ndarray:
    """(len(starts), joints, 2, offsets): d(q0, v0) of each mapped joint / d(field sample at start + offset)."""
    n = len(samples)
    out = np.zeros((len(starts), len(maps), 2, 2 * reach + 1))
    idx = [
        (model.jnt_qposadr[model.joint(m.mjcf_joint).id], model.jnt_dofadr[model.joint(m.mjcf_joint).id]) for m in maps
    ]
    cols = [samples.joint_names.index(m.ros_joint) for m in maps]
    zero = np.zeros((n, len(samples.joint_names)))
    base = replace(samples, position=zero, velocity=None if samples.velocity is None else zero)
    for k, off in enumerate(range(-reach, reach + 1)):
        at = starts + off
        ok = (at >= 0) & (at < n)
        if not ok.any():
            continue
        pulse = zero.copy()
        pulse[np.ix_(at[ok], cols)] = 1.0
        probe = replace(base, **{field: pulse})
        qpos, qvel = sd.start_positions_velocities(model, maps, probe, starts, smoothing, velocity)
        for j, (iq, iv) in enumerate(idx):
            out[:, j, 0, k], out[:, j, 1, k] = qpos[:, iq], qvel[:, iv]
    return out


def start_state_noise(
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    sources: Sequence[tuple[sd.Segment, JointSamples]],
    smoothing_samples: int,
    velocity: str = "smoothed",
) -> StartStateNoise:
    """Covariance of each segment's measured start state, from the data's own noise and the smoothing."""
    idx = []
    for m in maps:
        jid = model.joint(m.mjcf_joint).id
        idx.append((1 + model.jnt_qposadr[jid], 1 + model.nq + model.jnt_dofadr[jid]))
    indices = np.array([i for pair in idx for i in pair])
    reach = max(smoothing_samples, 7) // 2 + 1
    by_part: dict[int, tuple[JointSamples, list[tuple[str, int]]]] = {}
    for seg, samples in sources:
        a = int(np.searchsorted(samples.time_ns, seg.start_ns))
        by_part.setdefault(id(samples), (samples, []))[1].append((seg.name, a))
    cov: dict[str, np.ndarray] = {}
    sig_q = np.zeros(len(maps))
    sig_v = np.zeros(len(maps))
    for samples, segs in by_part.values():
        sq = np.array([_noise(samples.column("position", m.ros_joint)) for m in maps])
        sv = (
            np.array([_noise(samples.column("velocity", m.ros_joint)) for m in maps])
            if samples.velocity is not None
            else np.zeros(len(maps))
        )
        sig_q, sig_v = np.maximum(sig_q, sq), np.maximum(sig_v, sv)
        starts = np.array([a for _, a in segs])
        # impulses of neighbouring segments must not reach each other's start: otherwise one at a time
        groups = [starts] if len(starts) < 2 or np.diff(starts).min() > 2 * reach + 1 else [s[None] for s in starts]
        resp_q = np.concatenate(
            [_impulse_response(model, maps, samples, g, smoothing_samples, "position", reach, velocity) for g in groups]
        )
        resp_v = (
            np.concatenate(
                [
                    _impulse_response(model, maps, samples, g, smoothing_samples, "velocity", reach, velocity)
                    for g in groups
                ]
            )
            if samples.velocity is not None
            else np.zeros_like(resp_q)
        )
        for s, (name, _) in enumerate(segs):
            c = np.zeros((len(indices), len(indices)))
            for j in range(len(maps)):
                aq, av = resp_q[s, j], resp_v[s, j]
                c[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = sq[j] ** 2 * aq @ aq.T + sv[j] ** 2 * av @ av.T
            cov[name] = c
    return StartStateNoise(indices, cov, sig_q, sig_v)


class ShiftedStartRollout:
    """`custom_rollout` that adds `delta` to every segment's start state: a full-state vector, or one row per
    parameter point of a 2-D (batched) call, or None."""

    def __init__(self) -> None:
        self.delta: np.ndarray | None = None

    def __call__(
        self,
        models: Sequence[mujoco.MjModel],
        datas: Sequence[mujoco.MjData],
        control_signal: Sequence,
        initial_states: Sequence[np.ndarray],
        param_dicts: Sequence[sysid.ParameterDict],
        **mappings: Any,
    ) -> Sequence[sysid.SystemTrajectory]:
        if self.delta is None:
            states = list(initial_states)
        else:
            delta = np.atleast_2d(self.delta)
            per_point = len(initial_states) // len(delta)  # states are point-major: every segment of point 0, ...
            states = [np.asarray(st) + delta[i // per_point] for i, st in enumerate(initial_states)]
        return sysid.sysid_rollout(models, datas, control_signal, states, **mappings)


def segment_rows(residuals: Sequence[np.ndarray], names: Sequence[str], groups: Sequence[int]) -> dict[str, slice]:
    """Row range of each segment in the stacked residual (groups: segments per `model_residual` call)."""
    out, row, k = {}, 0, 0
    for res, count in zip(residuals, groups):
        per = len(res) // count
        for _ in range(count):
            out[names[k]] = slice(row, row + per)
            row += per
            k += 1
    return out


def start_state_sensitivity(
    x_hat: np.ndarray,
    params: sysid.ParameterDict,
    residual_fn: Callable[..., Any],
    shifter: ShiftedStartRollout,
    state_size: int,
    noise: StartStateNoise,
    base: Sequence[np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, dict[str, slice]]:
    """(r0, S, rows): residual at `x_hat`, d r / d x0 (one-sided, a step of one start std), segment rows.

    `residual_fn` is a `batched_residual_fn` built with `shifter` as its custom rollout; `base` its
    residuals at `x_hat` unshifted, if known (one batched rollout shifts every noisy state component, plus this).
    """
    shifter.delta = None
    base = residual_fn(x_hat, params)[0] if base is None else base
    rows = segment_rows(base, residual_fn.segment_names, residual_fn.group_sizes)
    r0 = np.concatenate(base)
    m = len(noise.indices)
    steps = np.sqrt(np.max([np.diag(c) for c in noise.covariance.values()], axis=0))
    sens = np.zeros((len(r0), m))
    moved = [i for i in range(m) if steps[i] > 0]  # an exact start component (a noise-free measured velocity)
    if moved:  # carries nothing; the others shifted one at a time, all in one batched rollout
        shifter.delta = np.zeros((len(moved), state_size))
        shifter.delta[np.arange(len(moved)), noise.indices[moved]] = steps[moved]
        shifted = np.concatenate(residual_fn(np.tile(np.reshape(x_hat, (-1, 1)), (1, len(moved))), params)[0])
        sens[:, moved] = (shifted - r0[:, None]) / steps[moved]
    shifter.delta = None
    return r0, sens, rows


def start_state_covariance(
    jac: np.ndarray,
    sens: np.ndarray,
    rows: dict[str, slice],
    noise: StartStateNoise,
    prior_jac: np.ndarray | None = None,
) -> np.ndarray:
    """(J'J)^-1 [sum_w J_w' S_w Sigma0_w S_w' J_w] (J'J)^-1: the start states' share of the covariance
    (with a prior's rows `prior_jac`, J'J + Jp'Jp in the bread)."""
    jac = np.asarray(jac, dtype=float)
    meat = np.zeros((jac.shape[1], jac.shape[1]))
    for name, rs in rows.items():
        g = jac[rs].T @ sens[rs]
        meat += g @ noise.covariance[name] @ g.T
    bread = np.linalg.pinv(jac.T @ jac + (0 if prior_jac is None else prior_jac.T @ prior_jac))
    return bread @ meat @ bread


def _root(cov: np.ndarray) -> np.ndarray:
    lam, vec = np.linalg.eigh(cov)
    return vec * np.sqrt(np.clip(lam, 0, None))


def weighted_step(
    jac: np.ndarray,
    r0: np.ndarray,
    sens: np.ndarray,
    rows: dict[str, slice],
    noise: StartStateNoise,
    prior: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """One Gauss-Newton step of generalized least squares: each segment's residual weighted by
    (I + S_w Sigma0_w S_w')^-1 (white noise plus its start state's), from the plain least-squares optimum.

    Returns (step, covariance s^2 (J' W J)^-1, s^2). Woodbury per segment: W = I - U (I + U'U)^-1 U' with
    U = S_w Sigma0_w^(1/2), so nothing larger than the state count is inverted. A one-step estimator from a
    consistent start is as efficient as the full GLS fit to first order. `prior`: a prior's (Jacobian, residual)
    rows, added to the normal equations.
    """
    jac = np.asarray(jac, dtype=float)
    p = jac.shape[1]
    h, g = np.zeros((p, p)), np.zeros(p)
    parts = []
    for name, rs in rows.items():
        u = sens[rs] @ _root(noise.covariance[name])
        inner = np.linalg.inv(np.eye(u.shape[1]) + u.T @ u)
        ju, ru = jac[rs].T @ u, u.T @ r0[rs]
        h += jac[rs].T @ jac[rs] - ju @ inner @ ju.T
        g += jac[rs].T @ r0[rs] - ju @ inner @ ru
        parts.append((rs, u, inner))
    if prior is not None:  # a prior's rows (Jacobian, residual): white, no start state
        h += prior[0].T @ prior[0]
        g += prior[0].T @ prior[1]
    scale = np.sqrt(np.clip(np.diag(h), 1e-300, None))
    step = -np.linalg.lstsq(h / np.outer(scale, scale), g / scale, rcond=1e-12)[0] / scale
    r1 = r0 + jac @ step
    quad = sum(float(r1[rs] @ r1[rs] - (u.T @ r1[rs]) @ inner @ (u.T @ r1[rs])) for rs, u, inner in parts)
    s2 = quad / max(len(r0) - p, 1)
    return step, s2 * np.linalg.pinv(h), s2


def start_state_row_variance(sens: np.ndarray, rows: dict[str, slice], noise: StartStateNoise) -> np.ndarray:
    """Each residual row's variance from its segment's start-state error, diag(S_w Sigma0_w S_w') (noise units)."""
    out = np.zeros(sens.shape[0])
    for name, rs in rows.items():
        u = sens[rs] @ _root(noise.covariance[name])
        out[rs] = np.sum(u**2, axis=1)
    return out
