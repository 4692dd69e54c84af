"""ParameterSpecs -> a mujoco.sysid ParameterDict (modifiers that set absolute values on the spec),
a SignalTransform for measurement parameters, a model cache, and a full-precision identified MJCF.

Body mass uses its own modifier: `InertiaType.Mass` fails in mujoco 4.0.0 and the library's mass
modifiers compile the spec once per call. Mass scales the rotational inertia (the body keeps its shape):
the diagonal inertia, or the whole tensor of a body given by `fullinertia` (the principal axes stay).
`body_inertia` moves all 10 inertial parameters through log-Cholesky coordinates (`inertia.py`): every vector
the optimiser can reach is a physical body, written as mass, `ipos` and `fullinertia`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import mujoco
import numpy as np
from mujoco import sysid

from ...errors import ConfigError
from ...sim import constant_bias, joint_motor, set_effort_offset
from . import inertia
from .file import VALUE_WIDTH, ParameterSpec
from .spec_values import has_full_inertia

SIGNAL_KINDS = ("signal_delay", "signal_gain", "signal_bias")


def _body_modifier(spec: mujoco.MjSpec, p: ParameterSpec) -> Callable[[mujoco.MjSpec, sysid.Parameter], None]:
    body = spec.body(p.target)
    full = has_full_inertia(body)
    m0 = float(body.mass)
    i0 = np.array(body.fullinertia if full else body.inertia, dtype=float)
    if m0 <= 0 or not body.explicitinertial and not np.any(i0):
        raise ConfigError("body has no mass to scale (0 kg in the compiled model)", parameter=p.name, body=p.target)
    target, with_com = p.target, p.kind == "body_mass_com"

    def modify(s: mujoco.MjSpec, param: sysid.Parameter) -> None:
        b = s.body(target)
        scale_mass(b, float(param.value[0]), m0, i0, full)
        if with_com:  # moving the centre of mass keeps the tensor about it
            b.ipos = np.asarray(param.value[1:4], dtype=float)

    return modify


def scale_mass(body: mujoco.MjsBody, mass: float, m0: float, i0: np.ndarray, full: bool) -> None:
    """A `body_mass`: `body`'s mass set to `mass` and its tensor about the centre of mass to `i0` x mass / `m0`,
    the shape kept (`i0` its `fullinertia` when `full`, else its diagonal `inertia`)."""
    body.mass = mass
    if full:
        body.fullinertia = i0 * (mass / m0)
    else:
        body.inertia = i0 * (mass / m0)


def _inertia_modifier(p: ParameterSpec) -> Callable[[mujoco.MjSpec, sysid.Parameter], None]:
    """`body_inertia`: log-Cholesky coordinates -> mass, centre of mass and the full tensor about it."""
    target = p.target

    def modify(s: mujoco.MjSpec, param: sysid.Parameter) -> None:
        b = s.body(target)
        mass, com, tensor = inertia.from_coordinates(param.value)
        b.explicitinertial = True
        b.mass, b.ipos = mass, com
        b.inertia = np.zeros(3)  # MuJoCo refuses a diagonal and a full tensor together,
        b.iquat = np.array([1.0, 0, 0, 0])  # and rotates the full tensor by iquat (problem_spec's principal frame)
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


def _offset_modifier(spec: mujoco.MjSpec, p: ParameterSpec) -> Callable[[mujoco.MjSpec, sysid.Parameter], None]:
    """A torque sensor's offset as a constant bias on the joint's motor (`sim.motors`)."""
    motor = joint_motor(spec, p.target)
    if motor is None:
        raise ConfigError("joint_effort_offset needs a motor on the joint", parameter=p.name, joint=p.target)
    plain = motor.biastype == mujoco.mjtBias.mjBIAS_NONE and not np.any(np.asarray(motor.biasprm[1:], dtype=float))
    if not (plain or constant_bias(motor.biastype, motor.biasprm)):
        raise ConfigError(
            "the joint's motor has a bias of its own (not a plain torque motor)", parameter=p.name, actuator=motor.name
        )
    name, gear = motor.name, float(motor.gear[0])

    def modify(s: mujoco.MjSpec, param: sysid.Parameter) -> None:
        set_effort_offset(s.actuator(name), float(param.value[0]), gear)

    return modify


def _actuator_modifier(spec: mujoco.MjSpec, p: ParameterSpec) -> Callable[[mujoco.MjSpec, sysid.Parameter], None]:
    target, gear0 = p.target, float(spec.actuator(p.target).gear[0])
    return lambda s, param: s.actuator(target).gear.__setitem__(0, gear0 * float(param.value[0]))


def build_parameters(
    spec: mujoco.MjSpec, specs: Sequence[ParameterSpec], starts: dict[str, tuple[float, ...]]
) -> sysid.ParameterDict:
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


def general_inertial_frames(model: mujoco.MjModel) -> mujoco.MjModel:
    """`model` with MuJoCo's shortcuts for inertial frames that coincide with their bodies' (`body_sameframe`,
    `body_simple`) cleared: the compiler sets them for a centre of mass within ~1e-6 m of the body's origin,
    so a payload written `<inertial pos="0 0 0">` ignores every finite-difference step of its centre (zero
    gradient, "not identifiable"). The general path gives the same dynamics for every body."""
    model.body_sameframe[:] = 0
    model.body_simple[:] = 0
    return model


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
            model = general_inertial_frames(sysid.apply_param_modifiers(params, spec))
            self.compiles += 1
            self._cache[key] = model
            if len(self._cache) > self._maxsize:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return model
