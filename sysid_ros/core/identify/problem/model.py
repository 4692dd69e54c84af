"""The problem's model: loaded and prepared for identification (`problem_spec`), and the problem checked
against it before any optimisation (`check_problem`): every parameter names an existing body, joint,
actuator or signal, its start fits its bounds, and the data files exist."""

from __future__ import annotations

import math
from fnmatch import fnmatch

import mujoco
import numpy as np

from ...errors import ConfigError, ModelError
from ...files import load_spec, model_path
from ...sim import joint_motor
from .arm_models import explicit_inertials, prepare_urdf_spec
from .file import VALUE_WIDTH, ParameterSpec, Problem
from .inertia import from_physical
from .spec_values import model_value

MAX_SIGNAL_DELAY_S = 1.0  # a sensor's or a transport's delay; a longer shift leaves a record no overlap


def problem_spec(problem: Problem) -> mujoco.MjSpec:
    """The problem's model as an MjSpec ready to identify (ModelError when it cannot be found or parsed).

    A URDF gets `arm_models.prepare_urdf_spec` (no fusing, contacts off, principal inertials, a torque
    motor per hinge joint); the bodies of mass parameters get explicit inertials from the compiled model
    (a body whose mass comes from its geoms then scales like any other), so defaults and starts are the
    compiled model's values.
    """
    path = model_path(problem.model)
    spec = load_spec(path)
    try:  # MuJoCo's compile errors (a mass <= 0, a mesh it cannot find, a stack overflow) as one line
        if path.suffix == ".urdf":
            prepare_urdf_spec(spec, source=str(path))
        bodies = [
            p.target for p in problem.parameters if p.kind.startswith("body_") and spec.body(p.target) is not None
        ]
        if bodies:
            explicit_inertials(spec, bodies)
        else:
            spec.copy().compile()
    except (ValueError, mujoco.FatalError) as exc:
        raise ModelError(f"model does not compile: {str(exc).strip()}", model=problem.model) from None
    return spec


def _target_exists(spec: mujoco.MjSpec, model: mujoco.MjModel, p: ParameterSpec, signals: list[str]) -> bool:
    if p.kind.startswith("body_"):
        return spec.body(p.target) is not None and p.target != "world"
    if p.kind == "joint_effort_offset":
        return spec.joint(p.target) is not None and joint_motor(spec, p.target) is not None
    if p.kind.startswith("joint_"):
        return spec.joint(p.target) is not None
    if p.kind == "actuator_gain":
        return spec.actuator(p.target) is not None
    return any(fnmatch(s, p.target) for s in signals)


def check_problem(
    problem: Problem, spec: mujoco.MjSpec, model: mujoco.MjModel, signal_names: list[str]
) -> dict[str, tuple[float, ...]]:
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
            raise ConfigError(
                f"body {p.target!r} disappears when the model compiles (fused into its parent)", parameter=p.name
            )
        start = p.start if p.start is not None else model_value(spec, p)
        width = VALUE_WIDTH.get(p.kind, 1)
        if len(start) != width:
            raise ConfigError(f"start has {len(start)} values, expected {width}", parameter=p.name)
        if p.kind == "body_inertia":  # bounds are on the mass (the other coordinates are boxed around the start)
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
            raise ConfigError(
                f"min {[float(v) for v in lo]} must be below max {[float(v) for v in hi]}", parameter=p.name
            )
        if np.any(np.asarray(start_bounded) < lo) or np.any(np.asarray(start_bounded) > hi):
            raise ConfigError(
                f"start {list(start_bounded)} is outside the bounds {[float(v) for v in lo]} .. "
                f"{[float(v) for v in hi]}",
                parameter=p.name,
            )
        if p.kind in ("body_mass", "body_mass_com", "body_inertia") and lo[0] <= 0:
            raise ConfigError("a mass bound must be > 0", parameter=p.name)
        if p.kind in ("joint_damping", "joint_frictionloss", "joint_armature") and lo[0] < 0:
            raise ConfigError(f"{p.kind} cannot be negative", parameter=p.name)
        if p.kind == "signal_delay" and max(abs(lo[0]), abs(hi[0])) > MAX_SIGNAL_DELAY_S:
            raise ConfigError(
                f"signal_delay bounds beyond +-{MAX_SIGNAL_DELAY_S:g} s: that is no transport delay, "
                "and a shift that long leaves the signals no overlap",
                parameter=p.name,
            )
        starts[p.name] = tuple(float(v) for v in start)
    if all(p.frozen for p in problem.parameters):
        raise ConfigError("every parameter is frozen: nothing to identify")
    for src in (*problem.training, *problem.validation):
        if not src.path.exists():
            raise ConfigError("data file does not exist", bag=str(src.path))
    return starts
