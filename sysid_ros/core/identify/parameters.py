"""ParameterSpecs -> a mujoco.sysid ParameterDict (modifiers that set absolute values on the spec),
a SignalTransform for measurement parameters, a model cache, and a full-precision identified MJCF.

Body mass uses its own modifier: `InertiaType.Mass` fails in mujoco 4.0.0 and the library's mass
modifiers compile the spec once per call. Mass scales the rotational inertia (the body keeps its shape):
the diagonal inertia, or the whole tensor of a body given by `fullinertia` (the principal axes stay).
`body_inertia` moves all 10 inertial parameters through log-Cholesky coordinates (`inertia.py`): every vector
the optimiser can reach is a physical body, written as mass, `ipos` and `fullinertia`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import OrderedDict
from typing import Callable, Sequence

import mujoco
import numpy as np
from mujoco import sysid

from ..errors import ConfigError
from . import inertia
from .problem import VALUE_WIDTH, ParameterSpec

SIGNAL_KINDS = ("signal_delay", "signal_gain", "signal_bias")


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


def _body_modifier(spec: mujoco.MjSpec, p: ParameterSpec) -> Callable[[mujoco.MjSpec, sysid.Parameter], None]:
    body = spec.body(p.target)
    full = has_full_inertia(body)
    m0 = float(body.mass)
    i0 = np.array(body.fullinertia if full else body.inertia, dtype=float)
    if m0 <= 0 or not body.explicitinertial and not np.any(i0):
        raise ConfigError("body has no mass to scale (0 kg in the compiled model)", parameter=p.name,
                          body=p.target)
    target, with_com = p.target, p.kind == "body_mass_com"

    def modify(s: mujoco.MjSpec, param: sysid.Parameter) -> None:
        b = s.body(target)
        mass = float(param.value[0])
        b.mass = mass
        if full:  # the whole tensor about the centre of mass scales; moving the centre of mass keeps it
            b.fullinertia = i0 * (mass / m0)
        else:
            b.inertia = i0 * (mass / m0)
        if with_com:
            b.ipos = np.asarray(param.value[1:4], dtype=float)

    return modify


def _inertia_modifier(p: ParameterSpec) -> Callable[[mujoco.MjSpec, sysid.Parameter], None]:
    """`body_inertia`: log-Cholesky coordinates -> mass, centre of mass and the full tensor about it."""
    target = p.target

    def modify(s: mujoco.MjSpec, param: sysid.Parameter) -> None:
        b = s.body(target)
        mass, com, tensor = inertia.from_coordinates(param.value)
        b.explicitinertial = True
        b.mass, b.ipos = mass, com
        b.inertia = np.zeros(3)  # MuJoCo refuses a diagonal and a full tensor together,
        b.iquat = np.array([1.0, 0, 0, 0])  # and rotates the full tensor by iquat (load_spec's principal frame)
        b.fullinertia = inertia.tensor_entries(tensor)

    return modify


def inertia_coordinates(p: ParameterSpec, start: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A `body_inertia` parameter's start and bounds in log-Cholesky coordinates (mass bounds from min/max)."""
    theta0 = inertia.from_physical(np.asarray(start, dtype=float))
    lo, hi = inertia.coordinate_box(theta0, float(p.min_value[0]), float(p.max_value[0]))
    return theta0, lo, hi


def _joint_modifier(p: ParameterSpec) -> Callable[[mujoco.MjSpec, sysid.Parameter], None]:
    target, field = p.target, p.kind.split("_", 1)[1]
    if field == "damping":  # a 3-vector on MjsJoint in MuJoCo 4.0; [0] is the linear damping
        return lambda s, param: s.joint(target).damping.__setitem__(0, float(param.value[0]))
    return lambda s, param: setattr(s.joint(target), field, float(param.value[0]))


def joint_motor(spec: mujoco.MjSpec, joint: str) -> mujoco.MjsActuator | None:
    """The first actuator that drives `joint` directly (the joint's motor), or None."""
    return next((a for a in spec.actuators if a.trntype == mujoco.mjtTrn.mjTRN_JOINT and a.target == joint), None)


def effort_offset_value(spec: mujoco.MjSpec, joint: str) -> float:
    """`joint_effort_offset` in `spec`: measured effort minus the torque the joint gets, i.e. minus the constant
    bias its motor adds (gear * biasprm[0] with an affine bias; 0 without a bias)."""
    motor = joint_motor(spec, joint)
    if motor is None or motor.biastype != mujoco.mjtBias.mjBIAS_AFFINE:
        return 0.0
    return -float(motor.gear[0]) * float(motor.biasprm[0])


def _offset_modifier(spec: mujoco.MjSpec, p: ParameterSpec) -> Callable[[mujoco.MjSpec, sysid.Parameter], None]:
    """A torque sensor's offset as the closest MuJoCo term: a constant bias on the joint's motor, so the
    effort replayed as its control reaches the joint less the offset (the motor's other bias terms stay 0)."""
    motor = joint_motor(spec, p.target)
    if motor is None:
        raise ConfigError("joint_effort_offset needs a motor on the joint", parameter=p.name, joint=p.target)
    if motor.biastype not in (mujoco.mjtBias.mjBIAS_NONE, mujoco.mjtBias.mjBIAS_AFFINE) or np.any(
            np.asarray(motor.biasprm[1:], dtype=float)):
        raise ConfigError("the joint's motor has a bias of its own (not a plain torque motor)", parameter=p.name,
                          actuator=motor.name)
    name, gear = motor.name, float(motor.gear[0])

    def modify(s: mujoco.MjSpec, param: sysid.Parameter) -> None:
        a = s.actuator(name)
        a.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        a.biasprm[0] = -float(param.value[0]) / gear

    return modify


def _actuator_modifier(spec: mujoco.MjSpec, p: ParameterSpec) -> Callable[[mujoco.MjSpec, sysid.Parameter], None]:
    target, gear0 = p.target, float(spec.actuator(p.target).gear[0])
    return lambda s, param: s.actuator(target).gear.__setitem__(0, gear0 * float(param.value[0]))


def build_parameters(spec: mujoco.MjSpec, specs: Sequence[ParameterSpec],
                     starts: dict[str, tuple[float, ...]]) -> sysid.ParameterDict:
    """One library Parameter per spec; frozen ones are written into `spec` at their start value."""
    params = sysid.ParameterDict()
    for p in specs:
        width = VALUE_WIDTH.get(p.kind, 1)
        start = np.asarray(starts[p.name], dtype=float)
        if p.kind == "body_inertia":
            start, lo, hi = inertia_coordinates(p, start)
        else:
            lo = np.broadcast_to(np.asarray(p.min_value, dtype=float), width).copy()
            hi = np.broadcast_to(np.asarray(p.max_value, dtype=float), width).copy()
        if p.kind == "body_inertia":
            modifier = _inertia_modifier(p)
        elif p.kind.startswith("body_"):
            modifier = _body_modifier(spec, p)
        elif p.kind == "joint_effort_offset":
            modifier = _offset_modifier(spec, p)
        elif p.kind.startswith("joint_"):
            modifier = _joint_modifier(p)
        elif p.kind == "actuator_gain":
            modifier = _actuator_modifier(spec, p)
        else:
            modifier = None
        param = sysid.Parameter(p.name, start, lo, hi, frozen=p.frozen, modifier=modifier)
        if p.frozen and modifier is not None:
            modifier(spec, param)
        params.add(param)
    return params


def signal_transform(specs: Sequence[ParameterSpec], params: sysid.ParameterDict) -> sysid.SignalTransform:
    """Sensor delay / gain / bias parameters as the library's SignalTransform (no normalisation)."""
    transform = sysid.SignalTransform(normalize=False)
    for p in specs:
        if p.kind == "signal_delay":
            transform.delay(p.target, params[p.name])
        elif p.kind == "signal_gain":
            transform.gain(p.target, params[p.name], target="predicted")
        elif p.kind == "signal_bias":
            transform.bias(p.target, params[p.name], target="predicted")
    return transform


class CachedBuild:
    """`build_model` for the residual that compiles each distinct parameter vector once per spec.

    The default residual recompiles for every window at every parameter point; with many short windows
    that dominates. The modifiers set absolute values, so a model depends only on (spec, vector).
    """

    def __init__(self, maxsize: int = 64) -> None:
        self._cache: OrderedDict[tuple[int, bytes], mujoco.MjModel] = OrderedDict()
        self._maxsize = maxsize
        self.compiles = 0

    def __call__(self, params: sysid.ParameterDict, spec: mujoco.MjSpec) -> mujoco.MjModel:
        values = [params[k].value for k in params.keys() if not params[k].frozen and params[k].modifier]
        key = (id(spec), np.concatenate(values).tobytes() if values else b"")
        model = self._cache.get(key)
        if model is None:
            model = sysid.apply_param_modifiers(params, spec)
            self.compiles += 1
            self._cache[key] = model
            if len(self._cache) > self._maxsize:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return model


def full_precision(values: Sequence[float]) -> str:
    """Numbers as text at full precision (repr), space-separated."""
    return " ".join(repr(float(v)) for v in values)


def joint_value(spec: mujoco.MjSpec, p: ParameterSpec) -> float:
    """A joint parameter's value in `spec` (damping is MuJoCo 4's 3-vector: its linear term)."""
    joint = spec.joint(p.target)
    field = p.kind.split("_", 1)[1]
    return float(joint.damping[0] if field == "damping" else getattr(joint, field))


def _find(root: ET.Element, tag: str, name: str) -> ET.Element | None:
    for el in root.iter(tag):
        if el.get("name") == name:
            return el
    return None


def identified_xml(spec: mujoco.MjSpec, specs: Sequence[ParameterSpec], params: sysid.ParameterDict) -> str:
    """The MJCF of `spec` (identified values applied) with every identified number at full precision.

    `MjSpec.to_xml` rounds to 6 significant digits; the identified attributes are rewritten with repr(), and
    every full inertia tensor is written as the tensor (to_xml writes its rounded principal form).
    """
    from .arm_models import with_full_inertia_text

    root = ET.fromstring(with_full_inertia_text(spec, spec.to_xml()))
    for p in specs:
        if p.kind in SIGNAL_KINDS:
            continue
        if p.kind.startswith("body_"):
            body, el = spec.body(p.target), _find(root, "body", p.target)
            if el is None:
                raise ConfigError("identified body missing from the written MJCF", body=p.target)
            inertial = el.find("inertial")
            if inertial is None:
                inertial = ET.SubElement(el, "inertial")
                el.remove(inertial)
                el.insert(0, inertial)
            inertial.set("mass", repr(float(body.mass)))
            inertial.set("pos", full_precision(body.ipos))
            if not has_full_inertia(body):  # a full tensor is written already (with_full_inertia_text)
                inertial.set("diaginertia", full_precision(body.inertia))
                if not np.any(np.isnan(body.iquat)):
                    inertial.set("quat", full_precision(body.iquat))
        elif p.kind == "joint_effort_offset":
            motor = joint_motor(spec, p.target)
            actuators = root.find("actuator")
            el = None if actuators is None else next((a for a in actuators if a.get("name") == motor.name), None)
            if el is None:
                raise ConfigError("identified joint motor missing from the written MJCF", joint=p.target)
            el.tag = "general"  # a <motor> cannot hold a bias; <general> with the motor's defaults can
            el.set("biastype", "affine")
            el.set("biasprm", full_precision(motor.biasprm[:3]))
        elif p.kind.startswith("joint_"):
            el = _find(root, "joint", p.target)
            if el is None:
                raise ConfigError("identified joint missing from the written MJCF", joint=p.target)
            el.set(p.kind.split("_", 1)[1], repr(joint_value(spec, p)))
        elif p.kind == "actuator_gain":
            actuators = root.find("actuator")
            el = None if actuators is None else next((a for a in actuators if a.get("name") == p.target), None)
            if el is None:
                raise ConfigError("identified actuator missing from the written MJCF", actuator=p.target)
            el.set("gear", full_precision(spec.actuator(p.target).gear))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"
