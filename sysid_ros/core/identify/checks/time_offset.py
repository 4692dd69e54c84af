"""Is there a time offset between the commands and the joint states? A scan over command shifts.

Each candidate shift moves every command stamp (or, with the measured effort as the control, every effort
stamp) by `delta`, holds them on the same segments' grids, replays them at the identified parameters and refits the
parameters linearly: cost(delta) = ||(I - J J+) r(delta)||^2, with J the Jacobian at the optimum. The
rows of every shift line up with J because only the control moves. Candidates: 0 and +-2 ms ... +-500 ms
(`COARSE_MS`), then, if one fits clearly better, a finer grid (simulation steps, at most 12) between its
neighbours. An offset is
reported when the best shift is not 0 and lowers the cost by more than `MIN_COST_DROP` (measured on clean
data in `bench/bench_verdict.py`: the best shift stays 0 there; a 2 ms shift raises the cost by far more).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
from mujoco import sysid

from ...errors import SysidRosError
from ...signals import JointCommands, JointSamples
from ..rollout import sequences as sd
from .start_noise import segment_rows

COARSE_MS = (2, 5, 10, 20, 40, 80, 150, 300, 500)
MIN_COST_DROP = 0.05
"""Relative cost reduction a non-zero shift must reach to count as a detected offset."""


@dataclass(frozen=True)
class OffsetScan:
    """`offset_ms`: the shift of the command stamps that fits best (positive: the commands act that much after
    their stamps); `cost_ratio`: the cost at that shift over the cost at 0 (after a linear refit)."""

    offset_ms: float
    cost_ratio: float
    shifts_ms: tuple[float, ...]
    costs: tuple[float, ...]

    @property
    def detected(self) -> bool:
        return self.offset_ms != 0.0 and self.cost_ratio < 1.0 - MIN_COST_DROP


def shifted_commands(samples: JointSamples, commands: JointCommands | None, shift_ns: int) -> JointCommands:
    """The control moved `shift_ns` later; the first command is also in force from the first sample on."""
    commands = commands if commands is not None else sd.measured_effort_commands(samples)
    times = commands.time_ns + np.int64(shift_ns)
    values = commands.values
    if times[0] > samples.time_ns[0]:
        times = np.concatenate([samples.time_ns[:1], times])
        values = np.concatenate([values[:1], values])
    return JointCommands(commands.joint_names, times, values, commands.interface, source=commands.source)


def _projector(jac: np.ndarray) -> np.ndarray:
    """Orthonormal basis of J's column space (columns scaled to unit norm, tiny singular values dropped)."""
    jac = np.asarray(jac, dtype=float)
    norms = np.linalg.norm(jac, axis=0)
    u, s, _ = np.linalg.svd(jac / np.where(norms > 0, norms, 1.0), full_matrices=False)
    return u[:, s > 1e-10 * max(float(s.max()) if s.size else 0.0, 1e-300)]


def scan_command_offset(
    timestep_s: float, jac: np.ndarray, residuals_at: Callable[[Sequence[int]], list[np.ndarray | None]]
) -> OffsetScan | None:
    """Scan command shifts; `residuals_at(shifts_ns)` gives the stacked residual at the optimum for each shift,
    with the control moved that much later (None where it cannot be built). None: no scan possible."""
    basis = _projector(jac)
    costs: dict[float, float] = {}

    def evaluate(shifts_ms: Sequence[float]) -> None:
        todo = [s for s in dict.fromkeys(shifts_ms) if s not in costs]
        for s, r in zip(todo, residuals_at([int(round(s * 1e6)) for s in todo]) if todo else ()):
            costs[s] = (
                float(r @ r - np.sum((basis.T @ r) ** 2)) if r is not None and len(r) == basis.shape[0] else np.nan
            )

    coarse = [0.0] + [s * sign for s in COARSE_MS for sign in (1.0, -1.0)]
    evaluate(coarse)  # all at once: one batched rollout
    base = costs[0.0]
    if not np.isfinite(base) or base <= 0:
        return None
    best = min((s for s in coarse if np.isfinite(costs[s])), key=costs.get)
    if best != 0.0 and costs[best] < (1.0 - MIN_COST_DROP) * base:  # refine between the neighbours
        ladder = sorted(coarse)
        i = ladder.index(best)
        lo, hi = ladder[max(i - 1, 0)], ladder[min(i + 1, len(ladder) - 1)]
        step = max(timestep_s * 1e3, (hi - lo) / 12)
        evaluate([round(float(s), 6) for s in np.arange(lo + step, hi, step)])
        best = min((s for s in costs if np.isfinite(costs[s])), key=costs.get)
    shifts = sorted(costs)
    return OffsetScan(float(best), costs[best] / base, tuple(shifts), tuple(costs[s] for s in shifts))


BATCH_STEPS = 2_000_000
"""Simulation steps rolled out together in the scan (shifts x segments): bounds the predictions held at once."""


def residual_builder(
    ms: sysid.ModelSequences,
    sources: Sequence[tuple[sd.Segment, JointSamples]],
    commands: Mapping[int, JointCommands | None],
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    residual_fn_for: Callable[[sysid.ModelSequences], Any],
    x_hat: np.ndarray,
    params: sysid.ParameterDict,
) -> Callable[[Sequence[int]], list[np.ndarray | None]]:
    """`residuals_at` for `scan_command_offset`: `ms`'s segments (cut from `sources`, whose commands are
    `commands[id(samples)]`, None for the measured effort) with only the control moved, replayed at `x_hat`
    through `residual_fn_for(model sequences)`, several shifts in one batched rollout (up to `BATCH_STEPS`).
    The trajectories keep their start-state arrays, so an `InitialStateRollout` still finds its estimated
    start states. Each residual's rows are in the order of `residual_fn_for(ms)`, the Jacobian's."""
    order = residual_fn_for(ms).segment_names
    steps = sum(len(traj.control) for traj in ms.measured_rollout)

    def moved(shift_ns: int) -> list | None:
        out = []
        try:
            for traj, (seg, samples) in zip(ms.measured_rollout, sources):
                control = sd.held_control(
                    model,
                    maps,
                    shifted_commands(samples, commands[id(samples)], shift_ns),
                    seg.start_ns,
                    len(traj.control),
                )
                traj = copy.copy(traj)
                object.__setattr__(traj, "control", control)
                out.append(traj)
        except SysidRosError:
            return None
        return out

    def run(batch: list[tuple[int, list]]) -> dict[int, np.ndarray]:
        both = copy.copy(ms)
        both.measured_rollout = [traj for _, trajs in batch for traj in trajs]
        both.sequence_name = [f"{name}@{k}" for k, _ in batch for name in ms.sequence_name]
        fn = residual_fn_for(both)
        residuals = fn(x_hat, params)[0]
        rows = segment_rows(residuals, fn.segment_names, fn.group_sizes)
        stacked = np.concatenate(residuals)
        return {k: np.concatenate([stacked[rows[f"{name}@{k}"]] for name in order]) for k, _ in batch}

    def residuals_at(shifts_ns: Sequence[int]) -> list[np.ndarray | None]:
        built = [(k, moved(shift)) for k, shift in enumerate(shifts_ns)]
        ready = [(k, trajs) for k, trajs in built if trajs is not None]
        per_batch = max(1, BATCH_STEPS // max(steps, 1))
        out: dict[int, np.ndarray] = {}
        for i in range(0, len(ready), per_batch):
            out.update(run(ready[i : i + per_batch]))
        return [out.get(k) for k in range(len(shifts_ns))]

    return residuals_at
