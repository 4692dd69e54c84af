"""Values read out of a model's MjSpec for a problem's parameters: the model's value of a parameter (its
default start), a body's inertia tensor, a joint's parameters, and numbers at full precision."""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

from ...sim import effort_offset
from .file import ParameterSpec
from .inertia import tensor_entries


def has_full_inertia(body: mujoco.MjsBody) -> bool:
    """Whether the body's inertia is given as a full tensor (`fullinertia`) rather than diagonal + `iquat`."""
    return bool(np.isfinite(body.fullinertia[0]))


def inertia_tensor(body: mujoco.MjsBody) -> np.ndarray:
    """The body's 3x3 inertia about its centre of mass in the body frame, from `fullinertia` (ixx iyy izz
    ixy ixz iyz) or from the diagonal inertia rotated by `iquat` (R diag R^T)."""
    if has_full_inertia(body):
        xx, yy, zz, xy, xz, yz = (float(v) for v in body.fullinertia)
        return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    rot = np.zeros(9)
    quat = np.asarray(body.iquat, dtype=float)
    mujoco.mju_quat2Mat(rot, quat / np.linalg.norm(quat))
    rot = rot.reshape(3, 3)
    return rot @ np.diag(np.asarray(body.inertia, dtype=float)) @ rot.T


def full_precision(values: Sequence[float]) -> str:
    """Numbers as text at full precision (repr), space-separated."""
    return " ".join(repr(float(v)) for v in values)


def joint_value(spec: mujoco.MjSpec, p: ParameterSpec) -> float:
    """A joint parameter's value in `spec` (damping is MuJoCo 4's 3-vector: its linear term)."""
    joint = spec.joint(p.target)
    field = p.kind.split("_", 1)[1]
    return float(joint.damping[0] if field == "damping" else getattr(joint, field))


def model_value(spec: mujoco.MjSpec, p: ParameterSpec) -> tuple[float, ...]:
    """The model's current value of a parameter (the default start)."""
    if p.kind == "body_mass":
        return (float(spec.body(p.target).mass),)
    if p.kind == "body_mass_com":
        body = spec.body(p.target)
        return (float(body.mass), *map(float, body.ipos))
    if p.kind == "body_inertia":
        body = spec.body(p.target)
        return (float(body.mass), *map(float, body.ipos), *map(float, tensor_entries(inertia_tensor(body))))
    if p.kind == "joint_damping":
        return (float(spec.joint(p.target).damping[0]),)
    if p.kind == "joint_effort_offset":  # measured minus applied: the joint motor's constant bias, negated
        return (effort_offset(spec, p.target),)
    if p.kind in ("joint_frictionloss", "joint_armature"):
        return (float(getattr(spec.joint(p.target), p.kind.split("_", 1)[1])),)
    if p.kind == "actuator_gain":
        return (1.0,)  # a scale on the actuator's nominal gain
    return {"signal_delay": (0.0,), "signal_gain": (1.0,), "signal_bias": (0.0,)}[p.kind]
