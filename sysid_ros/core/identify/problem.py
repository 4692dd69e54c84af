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
from ..files.paths import model_path
from ..files.schema import (REQUIRED, AnyOf, Choice, Flag, Integer, Key, ListOf, MapOf, Number, Numbers, Table, Text,
                            check)

PARAMETER_KINDS = ("body_mass", "body_mass_com", "body_inertia", "joint_damping", "joint_frictionloss",
                   "joint_armature", "joint_effort_offset", "actuator_gain", "signal_delay", "signal_gain",
                   "signal_bias")
VALUE_WIDTH = {"body_mass_com": 4, "body_inertia": 10}
"""Values per parameter (1 unless listed): body_inertia's start is mass, com, ixx iyy izz ixy ixz iyz; its
min/max are the mass bounds (its optimiser coordinates are log-Cholesky, see `inertia.py`)."""
COMPONENTS = {"body_mass_com": ("mass", "com_x", "com_y", "com_z"),
              "body_inertia": ("mass", "com_x", "com_y", "com_z", "ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
"""What each value of a multi-valued parameter is (body_inertia: kg, m, kg m^2 about the centre of mass)."""
BACKENDS = ("mujoco", "scipy", "scipy_parallel_fd")
MIN_WINDOW_S = 1e-3  # a shorter window holds at most one sample even at 1 kHz
MAX_SMOOTHING_SAMPLES = 1001


@dataclass(frozen=True)
class ParameterSpec:
    """One quantity to identify. `start` None takes the model's value; bounds are absolute (None: from physics,
    filled by `plausibility.physical_bounds` before the problem is checked)."""

    name: str
    kind: str
    target: str
    min_value: tuple[float, ...] | None
    max_value: tuple[float, ...] | None
    start: tuple[float, ...] | None = None
    frozen: bool = False


CONTROLS = ("auto", "commands", "effort")
START_VELOCITIES = ("auto", "measured", "positions", "smoothed")
SEGMENTS = ("all", "longest")


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
    regularization_weight: float = 0.0  # > 0: a prior toward the start values (`plausibility.Prior`)

    @property
    def estimate_initial_state(self) -> bool:
        return self.initial_state == "estimate" or (self.initial_state == "auto" and self.window_s is None)


# The keys of a data entry and of a problem file: type, range and default, one line per key.
_SOURCE = Table({
    "path": Key(Text()), "bag": Key(Text()), "npz": Key(Text()),
    "feedback_topic": Key(Text()),
    "command_topic": Key(Text()),
    "command_joints": Key(ListOf(Text(), 1)),
    "control": Key(Choice(CONTROLS), "auto"),
    "start_s": Key(Number(min=0.0), 0.0),
    "end_s": Key(Number(above=0.0)),
    "segments": Key(Choice(SEGMENTS), "all"),
})
_PARAMETER = Table({
    "name": Key(Text(), REQUIRED),
    "kind": Key(Choice(PARAMETER_KINDS), REQUIRED),
    "body": Key(Text()), "joint": Key(Text()), "actuator": Key(Text()), "signal": Key(Text()),
    "min": Key(Numbers()),  # both absent: bounds from physics (plausibility.py)
    "max": Key(Numbers()),
    "start": Key(Numbers()),
    "frozen": Key(Flag(), False),
})
_JOINT_MAP = Table({"joint": Key(Text()), "actuator": Key(Text())})
PROBLEM_SCHEMA = Table({
    "name": Key(Text(name=True), "identified", "results file name (a plain name inside --out)"),
    "model": Key(Text(), REQUIRED, "embedded model name or an MJCF/URDF path"),
    "joints": Key(AnyOf((ListOf(Text(), 1), MapOf(_JOINT_MAP))), REQUIRED),
    "training": Key(ListOf(AnyOf((Text(), _SOURCE)), 1), REQUIRED),
    "validation": Key(ListOf(AnyOf((Text(), _SOURCE))), []),
    "parameters": Key(ListOf(_PARAMETER, 1), REQUIRED),
    "observe": Key(ListOf(Choice(("position", "velocity")), 1), ["position"]),
    "window_s": Key(Number(min=MIN_WINDOW_S, max=1e6)),
    "smoothing_samples": Key(AnyOf((Choice(("auto",)), Integer(0, MAX_SMOOTHING_SAMPLES))), "auto"),
    "start_velocity": Key(Choice(START_VELOCITIES), "auto"),
    "initial_state": Key(Choice(("auto", "estimate", "measured")), "auto"),
    "start_noise": Key(Choice(("weight", "propagate")), "weight"),
    "noise": Key(Table({"position_rad": Key(Number(above=0.0), 1e-3),
                        "velocity_rad_s": Key(Number(above=0.0), 1e-2)})),
    "optimizer": Key(Table({"backend": Key(Choice(BACKENDS), "mujoco"),
                            "max_iters": Key(Integer(1, 100_000), 100),
                            "quiet": Key(Flag(), True),
                            "xtol": Key(Number(above=0.0, max=1.0), 1e-6)})),
    "warm_start": Key(Flag(), True),
    "unidentifiable_relative": Key(Number(above=0.0), 0.5),
    "regularization": Key(Table({"weight": Key(Number(min=0.0, max=1e6), 0.0,
                                               "prior rows sqrt(w) (x - x0) / ((max - min) / 4); 0: off")})),
})


def _parameter(entry: dict[str, Any], path: str) -> ParameterSpec:
    name, kind = entry["name"], entry["kind"]
    targets = [k for k in ("body", "joint", "actuator", "signal") if entry[k] is not None]
    if len(targets) != 1:
        raise ConfigError(f"{path}: a parameter must name exactly one body, joint, actuator or signal",
                          parameter=name)
    if (entry["min"] is None) != (entry["max"] is None):
        raise ConfigError(f"{path}: give both min and max, or neither (bounds from physics)", parameter=name)
    for key in ("min", "max", "start"):
        width = 1 if kind == "body_inertia" and key != "start" else VALUE_WIDTH.get(kind, 1)
        if entry[key] is not None and len(entry[key]) not in ((width,) if kind == "body_inertia" else (1, width)):
            raise ConfigError(f"{path}.{key}: {kind} takes {width} value(s), got {len(entry[key])}",
                              parameter=name)
    return ParameterSpec(name, kind, entry[targets[0]], entry["min"], entry["max"], entry["start"],
                         entry["frozen"])


def _source(entry: Any, base: Path, path: str) -> DataSource:
    entry = _SOURCE.check({"path": entry}, path) if isinstance(entry, str) else entry
    given = [entry[k] for k in ("path", "bag", "npz") if entry[k] is not None]
    if len(given) != 1:
        raise ConfigError(f"{path}: a data entry needs exactly one of path, bag or npz")
    file = Path(given[0]).expanduser()
    file = file if file.is_absolute() else (base / file)
    if entry["end_s"] is not None and entry["end_s"] <= entry["start_s"]:
        raise ConfigError(f"{path}.end_s: must be after start_s ({entry['start_s']:g} s), got {entry['end_s']:g}")
    if entry["control"] == "effort" and entry["command_topic"]:
        raise ConfigError(f"{path}: control: effort replays the measured effort; drop command_topic (or use "
                          "commands)")
    joints = entry["command_joints"]
    return DataSource(file.resolve(), entry["command_topic"], entry["control"], entry["start_s"], entry["end_s"],
                      entry["feedback_topic"], None if joints is None else tuple(joints), entry["segments"])


def problem_from_dict(doc: dict[str, Any], base_dir: str | Path = ".") -> Problem:
    """Build a Problem from a parsed YAML document; relative paths are taken from `base_dir`.

    The document is checked against `PROBLEM_SCHEMA` first: one ConfigError naming the key path.
    """
    doc = check(PROBLEM_SCHEMA, doc)
    base = Path(base_dir)
    joints_doc = doc["joints"]
    mapping = {k: {n: v for n, v in entry.items() if v is not None} for k, entry in joints_doc.items()} \
        if isinstance(joints_doc, dict) else {}
    joints = tuple(mapping) if mapping else tuple(joints_doc)
    model = doc["model"]
    if model.endswith((".xml", ".urdf", ".mjcf")) and not Path(model).is_absolute():
        model = str((base / model).resolve())
    noise, opt = doc["noise"], doc["optimizer"]
    smoothing, velocity = doc["smoothing_samples"], doc["start_velocity"]
    if smoothing == "auto":
        smoothing = None if velocity == "auto" else 7
    elif velocity == "auto":
        velocity = "smoothed"  # an explicit smoothing keeps its meaning: smooth what was measured
    return Problem(
        model=model, joints=joints,
        parameters=tuple(_parameter(p, f"parameters[{k}]") for k, p in enumerate(doc["parameters"])),
        training=tuple(_source(s, base, f"training[{k}]") for k, s in enumerate(doc["training"])),
        validation=tuple(_source(s, base, f"validation[{k}]") for k, s in enumerate(doc["validation"])),
        mapping=mapping, observe=tuple(doc["observe"]), window_s=doc["window_s"],
        smoothing_samples=smoothing, start_velocity=velocity, initial_state=doc["initial_state"],
        start_noise=doc["start_noise"], position_noise_rad=noise["position_rad"],
        velocity_noise_rad_s=noise["velocity_rad_s"],
        optimizer=OptimizerSpec(opt["backend"], opt["max_iters"], opt["quiet"], opt["xtol"]),
        warm_start=doc["warm_start"], unidentifiable_relative=doc["unidentifiable_relative"], name=doc["name"],
        regularization_weight=doc["regularization"]["weight"])


def load_problem(path: str | Path) -> Problem:
    """Read a problem YAML file (paths in it are relative to the file)."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the problem file: {exc}", file=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"the problem file is not valid YAML{where}: {getattr(exc, 'problem', None) or exc}",
                          file=str(path)) from None
    return problem_from_dict(doc, path.parent)


def load_spec(problem: Problem) -> mujoco.MjSpec:
    """The problem's model as an MjSpec ready to identify (ModelError when it cannot be found or parsed).

    A URDF gets `arm_models.prepare_urdf_spec` (no fusing, contacts off, principal inertials, a torque
    motor per hinge joint); the bodies of mass parameters get explicit inertials from the compiled model
    (a body whose mass comes from its geoms then scales like any other), so defaults and starts are the
    compiled model's values.
    """
    from ..sim.robot import load_spec as _load
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
    if p.kind == "body_inertia":
        from .inertia import tensor_entries
        from .parameters import inertia_tensor

        body = spec.body(p.target)
        return (float(body.mass), *map(float, body.ipos), *map(float, tensor_entries(inertia_tensor(body))))
    if p.kind == "joint_damping":
        return (float(spec.joint(p.target).damping[0]),)
    if p.kind == "joint_effort_offset":  # measured minus applied: the joint motor's constant bias, negated
        from .parameters import effort_offset_value

        return (effort_offset_value(spec, p.target),)
    if p.kind in ("joint_frictionloss", "joint_armature"):
        return (float(getattr(spec.joint(p.target), p.kind.split("_", 1)[1])),)
    if p.kind == "actuator_gain":
        return (1.0,)  # a scale on the actuator's nominal gain
    return {"signal_delay": (0.0,), "signal_gain": (1.0,), "signal_bias": (0.0,)}[p.kind]


def _target_exists(spec: mujoco.MjSpec, model: mujoco.MjModel, p: ParameterSpec, signals: list[str]) -> bool:
    if p.kind.startswith("body_"):
        return spec.body(p.target) is not None and p.target != "world"
    if p.kind == "joint_effort_offset":
        from .parameters import joint_motor

        return spec.joint(p.target) is not None and joint_motor(spec, p.target) is not None
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
            what = "joint with a motor" if p.kind == "joint_effort_offset" else p.kind.split("_")[0]
            hint = f" (signals: {signal_names})" if what == "signal" else ""
            raise ConfigError(f"the model has no {what} named {p.target!r}{hint}", parameter=p.name)
        if p.kind.startswith("body_") and mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, p.target) < 0:
            raise ConfigError(f"body {p.target!r} disappears when the model compiles (fused into its parent)",
                              parameter=p.name)
        if p.min_value is None or p.max_value is None:
            raise ConfigError("give both min and max, or neither (bounds from physics)", parameter=p.name)
        start = p.start if p.start is not None else model_value(spec, p)
        width = VALUE_WIDTH.get(p.kind, 1)
        if len(start) != width:
            raise ConfigError(f"start has {len(start)} values, expected {width}", parameter=p.name)
        if p.kind == "body_inertia":  # bounds are on the mass (the other coordinates are boxed around the start)
            from .inertia import from_physical

            try:
                from_physical(np.asarray(start))
            except ConfigError as exc:
                raise ConfigError(f"start: {exc}", parameter=p.name, body=p.target) from None
            width, start_bounded = 1, start[:1]
        else:
            start_bounded = start
        lo, hi = np.broadcast_to(p.min_value, width), np.broadcast_to(p.max_value, width)
        if not all(math.isfinite(v) for v in (*lo, *hi, *start)):
            raise ConfigError("bounds and start must be finite", parameter=p.name)
        if np.any(lo >= hi):
            raise ConfigError(f"min {[float(v) for v in lo]} must be below max {[float(v) for v in hi]}",
                              parameter=p.name)
        if np.any(np.asarray(start_bounded) < lo) or np.any(np.asarray(start_bounded) > hi):
            raise ConfigError(f"start {list(start_bounded)} is outside the bounds {[float(v) for v in lo]} .. "
                              f"{[float(v) for v in hi]}", parameter=p.name)
        if p.kind in ("body_mass", "body_mass_com", "body_inertia") and lo[0] <= 0:
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
