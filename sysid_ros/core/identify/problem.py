"""An identification problem: what model, which joints, which data and which parameters, read from YAML.

Everything is checked before any optimisation (`check_problem`): the model loads, every parameter names
an existing body/joint/actuator/signal, bounds are ordered and contain the start, and data files exist.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import yaml

from ..errors import ConfigError
from ..paths import model_path

PARAMETER_KINDS = ("body_mass", "body_mass_com", "joint_damping", "joint_frictionloss", "joint_armature",
                   "actuator_gain", "signal_delay", "signal_gain", "signal_bias")
BACKENDS = ("mujoco", "scipy", "scipy_parallel_fd")


@dataclass(frozen=True)
class ParameterSpec:
    """One quantity to identify. `start` None takes the model's value; bounds are absolute."""

    name: str
    kind: str
    target: str
    min_value: tuple[float, ...]
    max_value: tuple[float, ...]
    start: tuple[float, ...] | None = None
    frozen: bool = False


CONTROLS = ("auto", "commands", "effort")
START_VELOCITIES = ("auto", "measured", "positions", "smoothed")
SEGMENTS = ("all", "longest")
SOURCE_KEYS = ("path", "bag", "npz", "feedback_topic", "command_topic", "command_joints", "control", "start_s",
               "end_s", "segments")


@dataclass(frozen=True)
class DataSource:
    """A bag directory/file or an `.npz` of arrays; the control is an effort command topic or measured effort.

    `feedback_topic` picks one JointState topic (default: all, merged by joint); `command_joints` is the
    controller's joint order of a Float64MultiArray command topic; `control: effort` never reads commands;
    `segments: longest` keeps only the longest gap-free stretch.
    """

    path: Path
    command_topic: str | None = None
    control: str = "auto"  # auto | commands | effort
    start_s: float = 0.0
    end_s: float | None = None
    feedback_topic: str | None = None
    command_joints: tuple[str, ...] | None = None
    segments: str = "all"  # all | longest

    @property
    def kind(self) -> str:
        return "npz" if self.path.suffix == ".npz" else "bag"


@dataclass(frozen=True)
class OptimizerSpec:
    backend: str = "mujoco"
    max_iters: int = 100
    quiet: bool = True
    xtol: float = 1e-6  # relative step that ends the run; 1e-8 (the default) can cost ~100 line-search evaluations



@dataclass(frozen=True)
class Problem:
    """A whole identification problem; paths are absolute."""

    model: str
    joints: tuple[str, ...]
    parameters: tuple[ParameterSpec, ...]
    training: tuple[DataSource, ...]
    validation: tuple[DataSource, ...] = ()
    mapping: dict[str, Any] = field(default_factory=dict)
    observe: tuple[str, ...] = ("position",)
    window_s: float | None = None
    smoothing_samples: int | None = None  # None: chosen from the data with start_velocity auto
    start_velocity: str = "auto"  # measured | positions (smoothed positions' derivative) | smoothed | auto
    initial_state: str = "auto"  # estimate | measured | auto (estimate unless the data is cut into windows)
    start_noise: str = "weight"  # measured start states: weight (one GLS step) | propagate (intervals only)
    position_noise_rad: float = 1e-3
    velocity_noise_rad_s: float = 1e-2
    optimizer: OptimizerSpec = OptimizerSpec()
    warm_start: bool = True
    unidentifiable_relative: float = 0.5
    name: str = "identified"

    @property
    def estimate_initial_state(self) -> bool:
        return self.initial_state == "estimate" or (self.initial_state == "auto" and self.window_s is None)


def _floats(value: Any, what: str, name: str) -> tuple[float, ...]:
    try:
        out = tuple(float(v) for v in np.atleast_1d(np.asarray(value, dtype=float)))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{what} must be a number or a list of numbers, got {value!r}", parameter=name) from exc
    return out


def _parameter(entry: dict[str, Any]) -> ParameterSpec:
    name = entry.get("name")
    if not name:
        raise ConfigError(f"a parameter has no name: {entry}")
    kind = entry.get("kind")
    if kind not in PARAMETER_KINDS:
        raise ConfigError(f"unknown parameter kind {kind!r}; choose from {PARAMETER_KINDS}", parameter=name)
    target = entry.get("body") or entry.get("joint") or entry.get("actuator") or entry.get("signal")
    if not target:
        raise ConfigError("a parameter must name its body, joint, actuator or signal", parameter=name)
    if "min" not in entry or "max" not in entry:
        raise ConfigError("a parameter needs min and max bounds", parameter=name)
    start = entry.get("start")
    return ParameterSpec(str(name), kind, str(target), _floats(entry["min"], "min", name),
                         _floats(entry["max"], "max", name),
                         None if start is None else _floats(start, "start", name), bool(entry.get("frozen", False)))


def _source(entry: Any, base: Path) -> DataSource:
    entry = {"path": entry} if isinstance(entry, str) else dict(entry)
    unknown = sorted(set(entry) - set(SOURCE_KEYS))
    if unknown:
        raise ConfigError(f"unknown keys in a data entry: {unknown}; known: {list(SOURCE_KEYS)}")
    path = Path(str(entry.get("path") or entry.get("bag") or entry.get("npz") or "")).expanduser()
    if not str(path) or str(path) == ".":
        raise ConfigError(f"a data entry names no path: {entry}")
    path = path if path.is_absolute() else (base / path)
    control = entry.get("control", "auto")
    if control not in CONTROLS:
        raise ConfigError(f"control must be auto, commands or effort, got {control!r}", bag=str(path))
    segments = entry.get("segments", "all")
    if segments not in SEGMENTS:
        raise ConfigError(f"segments must be all or longest, got {segments!r}", bag=str(path))
    joints = entry.get("command_joints")
    if joints is not None and (isinstance(joints, str) or not all(isinstance(j, str) for j in joints)):
        raise ConfigError(f"command_joints must be a list of joint names, got {joints!r}", bag=str(path))
    if control == "effort" and entry.get("command_topic"):
        raise ConfigError("control: effort replays the measured effort; drop command_topic (or use commands)",
                          bag=str(path))
    try:
        start_s = float(entry.get("start_s", 0.0))
        end_s = None if entry.get("end_s") is None else float(entry["end_s"])
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"start_s and end_s must be seconds: {exc}", bag=str(path)) from exc
    if start_s < 0 or (end_s is not None and end_s <= start_s):
        raise ConfigError(f"need 0 <= start_s < end_s, got {start_s} .. {end_s}", bag=str(path))
    return DataSource(path.resolve(), entry.get("command_topic"), control, start_s, end_s,
                      entry.get("feedback_topic"), None if joints is None else tuple(joints), segments)


def problem_from_dict(doc: dict[str, Any], base_dir: str | Path = ".") -> Problem:
    """Build a Problem from a parsed YAML document; relative paths are taken from `base_dir`."""
    if not isinstance(doc, dict):
        raise ConfigError("the problem file must be a mapping")
    base = Path(base_dir)
    known = {"model", "joints", "parameters", "training", "validation", "observe", "window_s", "smoothing_samples", "start_velocity",
             "initial_state", "start_noise", "noise", "optimizer", "warm_start", "unidentifiable_relative", "name"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ConfigError(f"unknown keys in the problem file: {unknown}")
    for key in ("model", "joints", "parameters", "training"):
        if not doc.get(key):
            raise ConfigError(f"the problem file needs {key!r}")
    joints_doc = doc["joints"]
    mapping = dict(joints_doc) if isinstance(joints_doc, dict) else {}
    joints = tuple(mapping) if mapping else tuple(str(j) for j in joints_doc)
    mapping = {k: (v or {}) for k, v in mapping.items()}
    model = str(doc["model"])
    if model.endswith((".xml", ".urdf", ".mjcf")) and not Path(model).is_absolute():
        model = str((base / model).resolve())
    noise = doc.get("noise") or {}
    opt = doc.get("optimizer") or {}
    backend = opt.get("backend", "mujoco")
    if backend not in BACKENDS:
        raise ConfigError(f"unknown optimizer backend {backend!r}; choose from {BACKENDS}")
    window = doc.get("window_s")
    x0 = doc.get("initial_state", "auto")
    if x0 not in ("auto", "estimate", "measured"):
        raise ConfigError(f"initial_state must be auto, estimate or measured, got {x0!r}")
    smoothing, velocity = doc.get("smoothing_samples", "auto"), doc.get("start_velocity", "auto")
    if velocity not in START_VELOCITIES:
        raise ConfigError(f"start_velocity must be one of {START_VELOCITIES}, got {velocity!r}")
    if smoothing != "auto" and (isinstance(smoothing, bool) or not isinstance(smoothing, int) or smoothing < 0):
        raise ConfigError(f"smoothing_samples must be auto or a whole number >= 0, got {smoothing!r}")
    if smoothing == "auto":
        smoothing = None if velocity == "auto" else 7
    elif velocity == "auto":
        velocity = "smoothed"  # an explicit smoothing keeps its meaning: smooth what was measured
    start_noise = doc.get("start_noise", "weight")
    if start_noise not in ("propagate", "weight"):
        raise ConfigError(f"start_noise must be propagate or weight, got {start_noise!r}")
    return Problem(
        model=model, joints=joints, parameters=tuple(_parameter(p) for p in doc["parameters"]),
        training=tuple(_source(s, base) for s in doc["training"]),
        validation=tuple(_source(s, base) for s in doc.get("validation") or ()), mapping=mapping,
        observe=tuple(doc.get("observe", ("position",))), window_s=None if window is None else float(window),
        smoothing_samples=smoothing, start_velocity=velocity, initial_state=x0, start_noise=start_noise,
        position_noise_rad=float(noise.get("position_rad", 1e-3)),
        velocity_noise_rad_s=float(noise.get("velocity_rad_s", 1e-2)),
        optimizer=OptimizerSpec(backend, int(opt.get("max_iters", 100)), bool(opt.get("quiet", True)),
                                float(opt.get("xtol", 1e-6))),
        warm_start=bool(doc.get("warm_start", True)),
        unidentifiable_relative=float(doc.get("unidentifiable_relative", 0.5)),
        name=str(doc.get("name", "identified")))


def load_problem(path: str | Path) -> Problem:
    """Read a problem YAML file (paths in it are relative to the file)."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the problem file: {exc}", file=str(path)) from exc
    return problem_from_dict(doc, path.parent)


def load_spec(problem: Problem) -> mujoco.MjSpec:
    """The problem's model as an MjSpec ready to identify (ModelError when it cannot be found or parsed).

    A URDF gets `arm_models.prepare_urdf_spec` (no fusing, contacts off, principal inertials, a torque
    motor per hinge joint); the bodies of mass parameters get explicit inertials from the compiled model
    (a body whose mass comes from its geoms then scales like any other), so defaults and starts are the
    compiled model's values.
    """
    from ..sim import load_spec as _load
    from .arm_models import explicit_inertials, prepare_urdf_spec

    path = model_path(problem.model)
    spec = _load(path)
    if path.suffix == ".urdf":
        prepare_urdf_spec(spec, source=str(path))
    bodies = [p.target for p in problem.parameters if p.kind.startswith("body_") and spec.body(p.target) is not None]
    if bodies:
        try:
            explicit_inertials(spec, bodies)
        except Exception as exc:
            raise ConfigError(f"model does not compile: {exc}", model=problem.model) from exc
    return spec


def model_value(spec: mujoco.MjSpec, p: ParameterSpec) -> tuple[float, ...]:
    """The model's current value of a parameter (the default start)."""
    if p.kind == "body_mass":
        return (float(spec.body(p.target).mass),)
    if p.kind == "body_mass_com":
        body = spec.body(p.target)
        return (float(body.mass), *map(float, body.ipos))
    if p.kind == "joint_damping":
        return (float(spec.joint(p.target).damping[0]),)
    if p.kind in ("joint_frictionloss", "joint_armature"):
        return (float(getattr(spec.joint(p.target), p.kind.split("_", 1)[1])),)
    if p.kind == "actuator_gain":
        return (1.0,)  # a scale on the actuator's nominal gain
    return {"signal_delay": (0.0,), "signal_gain": (1.0,), "signal_bias": (0.0,)}[p.kind]


def _target_exists(spec: mujoco.MjSpec, model: mujoco.MjModel, p: ParameterSpec, signals: list[str]) -> bool:
    if p.kind.startswith("body_"):
        return spec.body(p.target) is not None and p.target != "world"
    if p.kind.startswith("joint_"):
        return spec.joint(p.target) is not None
    if p.kind == "actuator_gain":
        return spec.actuator(p.target) is not None
    from fnmatch import fnmatch

    return any(fnmatch(s, p.target) for s in signals)


def check_problem(problem: Problem, spec: mujoco.MjSpec, model: mujoco.MjModel,
                  signal_names: list[str]) -> dict[str, tuple[float, ...]]:
    """Validate parameters against the model before optimising; return each parameter's start value."""
    starts: dict[str, tuple[float, ...]] = {}
    seen: set[str] = set()
    if not problem.parameters:
        raise ConfigError("no parameters to identify")
    for p in problem.parameters:
        if p.name in seen:
            raise ConfigError("two parameters share this name", parameter=p.name)
        seen.add(p.name)
        if not _target_exists(spec, model, p, signal_names):
            what = p.kind.split("_")[0]
            hint = f" (signals: {signal_names})" if what == "signal" else ""
            raise ConfigError(f"the model has no {what} named {p.target!r}{hint}", parameter=p.name)
        if p.kind.startswith("body_") and mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, p.target) < 0:
            raise ConfigError(f"body {p.target!r} disappears when the model compiles (fused into its parent)",
                              parameter=p.name)
        start = p.start if p.start is not None else model_value(spec, p)
        width = 4 if p.kind == "body_mass_com" else 1
        lo, hi = np.broadcast_to(p.min_value, width), np.broadcast_to(p.max_value, width)
        if len(start) != width:
            raise ConfigError(f"start has {len(start)} values, expected {width}", parameter=p.name)
        if not all(math.isfinite(v) for v in (*lo, *hi, *start)):
            raise ConfigError("bounds and start must be finite", parameter=p.name)
        if np.any(lo >= hi):
            raise ConfigError(f"min {[float(v) for v in lo]} must be below max {[float(v) for v in hi]}",
                              parameter=p.name)
        if np.any(np.asarray(start) < lo) or np.any(np.asarray(start) > hi):
            raise ConfigError(f"start {list(start)} is outside the bounds {[float(v) for v in lo]} .. "
                              f"{[float(v) for v in hi]}", parameter=p.name)
        if p.kind in ("body_mass", "body_mass_com") and lo[0] <= 0:
            raise ConfigError("a mass bound must be > 0", parameter=p.name)
        if p.kind in ("joint_damping", "joint_frictionloss", "joint_armature") and lo[0] < 0:
            raise ConfigError(f"{p.kind} cannot be negative", parameter=p.name)
        starts[p.name] = tuple(float(v) for v in start)
    if all(p.frozen for p in problem.parameters):
        raise ConfigError("every parameter is frozen: nothing to identify")
    for src in (*problem.training, *problem.validation):
        if not src.path.exists():
            raise ConfigError("data file does not exist", bag=str(src.path))
    if problem.window_s is not None and not problem.window_s > 0:
        raise ConfigError(f"window_s must be > 0, got {problem.window_s}")
    return starts
