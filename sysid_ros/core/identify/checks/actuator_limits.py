"""Efforts the model's actuators cannot deliver: a replayed effort beyond the motor's ctrlrange, its forcerange
or the joint's actuatorfrcrange is clamped by MuJoCo in every rollout without a word, so the fit explains
the measured motion with less torque than was applied. Counted per joint here, with the largest excess."""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

from ...signals import JointCommands, JointSamples
from ..rollout import sequences as sd


def effort_range(model: mujoco.MjModel, actuator: str, joint: str) -> tuple[float, float]:
    """The joint effort (N m or N, as replayed: ctrl = effort / gear / gain) the actuator passes unclamped."""
    a = model.actuator(actuator).id
    gear, gain = float(model.actuator_gear[a, 0]), float(model.actuator_gainprm[a, 0])
    bias = float(model.actuator_biasprm[a, 0]) if model.actuator_biastype[a] != mujoco.mjtBias.mjBIAS_NONE else 0.0
    lo, hi = -np.inf, np.inf
    if model.actuator_ctrllimited[a]:
        ends = sorted(float(c) * gear * gain for c in model.actuator_ctrlrange[a])
        lo, hi = max(lo, ends[0]), min(hi, ends[1])
    if model.actuator_forcelimited[a]:  # force = effort / gear + bias
        ends = sorted((float(f) - bias) * gear for f in model.actuator_forcerange[a])
        lo, hi = max(lo, ends[0]), min(hi, ends[1])
    j = model.joint(joint).id
    if model.jnt_actfrclimited[j]:  # the joint's actuator torque: gear x force = effort + gear x bias
        ends = [float(f) - gear * bias for f in model.jnt_actfrcrange[j]]
        lo, hi = max(lo, min(ends)), min(hi, max(ends))
    return lo, hi


def clamp_warnings(
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    data: Sequence[tuple[str, list[tuple[JointSamples, JointCommands | None]]]],
) -> list[str]:
    """One line per joint whose replayed efforts (the commands, else the measured effort) leave the range its
    actuator passes: how many of how many, the limit, and by how much at most."""
    out = []
    for m in maps:
        lo, hi = effort_range(model, m.actuator, m.mjcf_joint)
        if not (np.isfinite(lo) or np.isfinite(hi)):
            continue
        total, beyond, worst, sources = 0, 0, 0.0, set()
        for name, parts in data:
            for samples, commands in parts:
                if commands is not None:
                    if m.ros_joint not in commands.joint_names:
                        continue
                    u = commands.values[:, commands.joint_names.index(m.ros_joint)]
                elif samples.effort is not None and m.ros_joint in samples.joint_names:
                    u = samples.column("effort", m.ros_joint)
                else:
                    continue
                u = u[np.isfinite(u)]
                excess = np.maximum(u - hi, lo - u)
                total += len(u)
                if np.any(excess > 0):
                    beyond += int(np.sum(excess > 0))
                    worst = max(worst, float(excess.max()))
                    sources.add(name)
        if beyond:
            limit = f"+-{hi:.4g}" if np.isclose(lo, -hi) else f"[{lo:.4g}, {hi:.4g}]"
            scale = max(abs(lo) if np.isfinite(lo) else 0.0, abs(hi) if np.isfinite(hi) else 0.0)
            out.append(
                f"{m.ros_joint}: {beyond} of {total} replayed efforts are beyond the model's actuator limit "
                f"{limit} (by up to {worst:.4g}, {100 * worst / max(scale, 1e-12):.1f} % of the limit; in "
                f"{', '.join(sorted(sources))}): MuJoCo clamps them in every rollout; raise the motor's "
                "ctrlrange / forcerange (or the joint's actuatorfrcrange) if the robot delivers them"
            )
    return out
