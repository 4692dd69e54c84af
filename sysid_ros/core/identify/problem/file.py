"""An identification problem: what model, which joints, which data and which parameters, read from YAML.

The file format only: `PROBLEM_SCHEMA` checks every key, `problem_from_dict` builds the frozen `Problem`.
The problem is checked against its model (targets exist, starts inside bounds) by `problem_model.check_problem`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...files import (
    REQUIRED,
    AnyOf,
    Choice,
    Flag,
    Integer,
    Key,
    ListOf,
    MapOf,
    Number,
    Numbers,
    Table,
    Text,
    check,
    load_yaml,
)

PARAMETER_KINDS = (
    "body_mass",
    "body_mass_com",
    "body_inertia",
    "joint_damping",
    "joint_frictionloss",
    "joint_armature",
    "joint_effort_offset",
    "actuator_gain",
    "signal_delay",
    "signal_gain",
    "signal_bias",
)
VALUE_WIDTH = {"body_mass_com": 4, "body_inertia": 10}
"""Values per parameter (1 unless listed): body_inertia's start is mass, com, ixx iyy izz ixy ixz iyz; its
min/max are the mass bounds (its optimiser coordinates are log-Cholesky, see `inertia.py`)."""
COMPONENTS = {
    "body_mass_com": ("mass", "com_x", "com_y", "com_z"),
    "body_inertia": ("mass", "com_x", "com_y", "com_z", "ixx", "iyy", "izz", "ixy", "ixz", "iyz"),
}
"""What each value of a multi-valued parameter is (body_inertia: kg, m, kg m^2 about the centre of mass)."""
BACKENDS = ("mujoco", "scipy", "scipy_parallel_fd")
MIN_SEGMENT_S = 1e-3  # a shorter window holds at most one sample even at 1 kHz
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

    def __post_init__(self) -> None:
        if (self.min_value is None) != (self.max_value is None):
            raise ConfigError("give both min and max, or neither (bounds from physics)", parameter=self.name)


CONTROLS = ("auto", "commands", "effort")
START_VELOCITIES = ("auto", "measured", "positions", "smoothed")
SEGMENTS = ("all", "longest")


@dataclass(frozen=True)
class PeriodicSpec:
    """A data entry's `periodic` key: the record repeats `periods` periods of `period_s` from `start_s` seconds after
    its first joint state (for bags recorded without the tape's periods); `keep_hz` the derivatives' band
    (default `linear.DEFAULT_KEEP_HZ`), `settle_s` the first period's seconds left out of the average."""

    start_s: float
    period_s: float
    periods: int
    keep_hz: float | None = None
    settle_s: float | None = None


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
    periodic: PeriodicSpec | None = None
    effort_scale: dict[str, float] | None = None  # per joint: the measured effort times this (calibrated gains)

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
    segment_s: float | None = None
    smoothing_samples: int | None = None  # None: chosen from the data with start_velocity auto
    start_velocity: str = "auto"  # measured | positions (smoothed positions' derivative) | smoothed | auto
    initial_state: str = "auto"  # estimate | measured | auto (estimate unless the data is cut into windows)
    start_noise: str = "weight"  # measured start states: weight (one GLS step) | propagate (intervals only)
    position_noise_rad: float = 1e-3
    velocity_noise_rad_s: float = 1e-2
    optimizer: OptimizerSpec = OptimizerSpec()
    warm_start: bool = True
    window_fit: str = "always"  # always | auto (not run when an arm's torque-space fit alone is clearly better)
    unidentifiable_relative: float = 0.5
    name: str = "identified"
    regularization_weight: float = 0.0  # > 0: a prior toward the start values (`plausibility.Prior`)

    def __post_init__(self) -> None:
        if self.segment_s is not None and not (math.isfinite(self.segment_s) and self.segment_s >= MIN_SEGMENT_S):
            raise ConfigError(f"segment_s must be >= {MIN_SEGMENT_S:g} s, got {self.segment_s}")

    @property
    def estimate_initial_state(self) -> bool:
        return self.initial_state == "estimate" or (self.initial_state == "auto" and self.segment_s is None)


# The keys of a data entry and of a problem file: type, range and default, one line per key.
_SOURCE = Table(
    {
        "path": Key(Text()),
        "bag": Key(Text()),
        "npz": Key(Text()),
        "feedback_topic": Key(Text()),
        "command_topic": Key(Text()),
        "command_joints": Key(ListOf(Text(), 1)),
        "control": Key(Choice(CONTROLS), "auto"),
        "start_s": Key(Number(min=0.0), 0.0),
        "end_s": Key(Number(above=0.0)),
        "segments": Key(Choice(SEGMENTS), "all"),
        "effort_scale": Key(
            MapOf(Number(above=0.0, max=100.0)),
            None,
            "per joint, the logged effort times this (drive gains from `sysid-ros calibrate-gains`)",
        ),
        "periodic": Key(
            AnyOf(
                (
                    Table(
                        {
                            "start_s": Key(
                                Number(min=0.0), REQUIRED, "the first period's start after the first sample"
                            ),
                            "period_s": Key(Number(above=0.0, max=1e5), REQUIRED),
                            "periods": Key(Integer(1, 100_000), REQUIRED),
                            "keep_hz": Key(Number(above=0.0), None, "the derivatives' band (default 10 Hz)"),
                            "settle_s": Key(Number(min=0.0), None, "first period's seconds not averaged (default 1)"),
                        }
                    ),
                )
            )
        ),
    }
)
_PARAMETER = Table(
    {
        "name": Key(Text(), REQUIRED),
        "kind": Key(Choice(PARAMETER_KINDS), REQUIRED),
        "body": Key(Text()),
        "joint": Key(Text()),
        "actuator": Key(Text()),
        "signal": Key(Text()),
        "min": Key(Numbers()),  # both absent: bounds from physics (plausibility.py)
        "max": Key(Numbers()),
        "start": Key(Numbers()),
        "frozen": Key(Flag(), False),
    }
)
_JOINT_MAP = Table({"joint": Key(Text()), "actuator": Key(Text())})
PROBLEM_SCHEMA = Table(
    {
        "name": Key(Text(name=True), "identified", "results file name (a plain name inside --out)"),
        "model": Key(Text(), REQUIRED, "embedded model name or an MJCF/URDF path"),
        "joints": Key(AnyOf((ListOf(Text(), 1), MapOf(_JOINT_MAP))), REQUIRED),
        "training": Key(ListOf(AnyOf((Text(), _SOURCE)), 1), REQUIRED),
        "validation": Key(ListOf(AnyOf((Text(), _SOURCE))), []),
        "parameters": Key(ListOf(_PARAMETER, 1), REQUIRED),
        "observe": Key(ListOf(Choice(("position", "velocity")), 1), ["position"]),
        "segment_s": Key(Number(min=MIN_SEGMENT_S, max=1e6)),
        "smoothing_samples": Key(AnyOf((Choice(("auto",)), Integer(0, MAX_SMOOTHING_SAMPLES))), "auto"),
        "start_velocity": Key(Choice(START_VELOCITIES), "auto"),
        "initial_state": Key(Choice(("auto", "estimate", "measured")), "auto"),
        "start_noise": Key(Choice(("weight", "propagate")), "weight"),
        # 1 nrad / 1 nrad/s: below any encoder (24 bits a turn: 0.37 urad) and far from the floating-point floor
        "noise": Key(
            Table(
                {
                    "position_rad": Key(Number(min=1e-9, max=10.0), 1e-3),
                    "velocity_rad_s": Key(Number(min=1e-9, max=1e3), 1e-2),
                }
            )
        ),
        "optimizer": Key(
            Table(
                {
                    "backend": Key(Choice(BACKENDS), "mujoco"),
                    "max_iters": Key(Integer(1, 100_000), 100),
                    "quiet": Key(Flag(), True),
                    "xtol": Key(Number(above=0.0, max=1.0), 1e-6),
                }
            )
        ),
        "warm_start": Key(Flag(), True),
        "window_fit": Key(
            Choice(("always", "auto")),
            "always",
            "auto: not run when the torque-space fit alone predicts the training torque clearly better than the "
            "start values (an arm with measured torque whose problem frees only what that fit writes)",
        ),
        "unidentifiable_relative": Key(Number(above=0.0), 0.5),
        "regularization": Key(
            Table(
                {
                    "weight": Key(
                        Number(min=0.0, max=1e6), 0.0, "prior rows sqrt(w) (x - x0) / ((max - min) / 4); 0: off"
                    )
                }
            )
        ),
    },
    renamed={"window_s": "segment_s"},
)


def _parameter(entry: dict[str, Any], path: str) -> ParameterSpec:
    name, kind = entry["name"], entry["kind"]
    targets = [k for k in ("body", "joint", "actuator", "signal") if entry[k] is not None]
    if len(targets) != 1:
        raise ConfigError(f"{path}: a parameter must name exactly one body, joint, actuator or signal", parameter=name)
    for key in ("min", "max", "start"):
        width = 1 if kind == "body_inertia" and key != "start" else VALUE_WIDTH.get(kind, 1)
        if entry[key] is not None and len(entry[key]) not in ((width,) if kind == "body_inertia" else (1, width)):
            raise ConfigError(f"{path}.{key}: {kind} takes {width} value(s), got {len(entry[key])}", parameter=name)
    try:
        return ParameterSpec(name, kind, entry[targets[0]], entry["min"], entry["max"], entry["start"], entry["frozen"])
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


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
        raise ConfigError(f"{path}: control: effort replays the measured effort; drop command_topic (or use commands)")
    joints = entry["command_joints"]
    return DataSource(
        file.resolve(),
        entry["command_topic"],
        entry["control"],
        entry["start_s"],
        entry["end_s"],
        entry["feedback_topic"],
        None if joints is None else tuple(joints),
        entry["segments"],
        None if entry["periodic"] is None else PeriodicSpec(**entry["periodic"]),
        None if entry["effort_scale"] is None else {str(k): float(v) for k, v in entry["effort_scale"].items()},
    )


def problem_from_dict(doc: dict[str, Any], base_dir: str | Path = ".") -> Problem:
    """Build a Problem from a parsed YAML document; relative paths are taken from `base_dir`.

    The document is checked against `PROBLEM_SCHEMA` first: one ConfigError naming the key path.
    """
    doc = check(PROBLEM_SCHEMA, doc)
    base = Path(base_dir)
    joints_doc = doc["joints"]
    mapping = (
        {k: {n: v for n, v in entry.items() if v is not None} for k, entry in joints_doc.items()}
        if isinstance(joints_doc, dict)
        else {}
    )
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
        model=model,
        joints=joints,
        parameters=tuple(_parameter(p, f"parameters[{k}]") for k, p in enumerate(doc["parameters"])),
        training=tuple(_source(s, base, f"training[{k}]") for k, s in enumerate(doc["training"])),
        validation=tuple(_source(s, base, f"validation[{k}]") for k, s in enumerate(doc["validation"])),
        mapping=mapping,
        observe=tuple(doc["observe"]),
        segment_s=doc["segment_s"],
        smoothing_samples=smoothing,
        start_velocity=velocity,
        initial_state=doc["initial_state"],
        start_noise=doc["start_noise"],
        position_noise_rad=noise["position_rad"],
        velocity_noise_rad_s=noise["velocity_rad_s"],
        optimizer=OptimizerSpec(opt["backend"], opt["max_iters"], opt["quiet"], opt["xtol"]),
        warm_start=doc["warm_start"],
        window_fit=doc["window_fit"],
        unidentifiable_relative=doc["unidentifiable_relative"],
        name=doc["name"],
        regularization_weight=doc["regularization"]["weight"],
    )


def load_problem(path: str | Path) -> Problem:
    """Read a problem YAML file (paths in it are relative to the file)."""
    path = Path(path)
    return problem_from_dict(load_yaml(path, "problem file"), path.parent)
