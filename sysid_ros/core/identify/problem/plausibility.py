"""Bounds from physics for parameters given without `min`/`max`, and the optional prior toward the nominal model.

Defaults (each stated in a note of the result; docs/identification.md "Plausibility" gives the sources):
- masses (`body_mass`, `body_mass_com`, `body_inertia`): `MASS_RANGE` times the nominal model's mass; a payload
  (a body with no joint of its own in its chain below the last joint: a tool, a load) has no trustworthy
  nominal, so `PAYLOAD_FRACTION` of the arm's moving mass up to that whole mass (or twice the nominal);
- centres of mass (`body_mass_com`): within the body's rms radius of the nominal (`inertia.com_half_width`),
  also when only a scalar mass `min`/`max` is given (those bound the mass alone);
- armature: 0 .. torque limit / `DRIVE_ACCELERATION_RAD_S2` (a drive's reflected rotor inertia J_rotor N^2
  lets it accelerate its own rotor at far more than this at peak torque);
- damping: 0 .. torque limit / `DAMPING_SPEED_RAD_S` (viscous friction never eats the whole drive at 1 rad/s);
- friction loss: 0 .. `FRICTION_FRACTION` of the torque limit;
- torque-sensor offset (`joint_effort_offset`): within +-`OFFSET_FRACTION` of the torque limit;
- actuator gain: `GAIN_RANGE` of the nominal gear.
Each upper bound is at least `NOMINAL_HEADROOM` times the nominal value (the model's own value stays inside).
Joint terms need the joint's torque limit from the model (motor ctrlrange x gear, forcerange or the joint's
actuator force range); without one, and for signal parameters, `min`/`max` must be given.

The prior (`regularization: {weight: w}`): one extra residual row per free optimiser coordinate,
sqrt(w) (x - x0) / ((max - min) / 4), appended to what mujoco.sysid's Gauss-Newton sees. In the residual's
noise units w = 1 is a Gaussian prior centred on the start (the nominal model) with the bound range as its
+-2 sigma: the estimate is the posterior mode, and the intervals the posterior's (never wider than the data's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import mujoco
import numpy as np

from ...errors import ConfigError
from ...sim import joint_motor
from .file import Problem
from .inertia import com_half_width
from .spec_values import inertia_tensor, model_value

MASS_RANGE = (0.5, 2.0)
PAYLOAD_FRACTION = 1e-3
"""A payload's lower mass bound, as a fraction of the arm's moving mass (bounds must stay > 0)."""
DRIVE_ACCELERATION_RAD_S2 = 100.0
DAMPING_SPEED_RAD_S = 1.0
FRICTION_FRACTION = 0.5
OFFSET_FRACTION = 0.1
"""A joint torque sensor's zero offset: a few percent of its range; 10 % of the drive's limit leaves room."""
GAIN_RANGE = (0.5, 2.0)
NOMINAL_HEADROOM = 1.5
PRIOR_RANGE_SIGMAS = 4.0
"""The prior's standard deviation is (max - min) / this: the bound range is its +-2 sigma."""


def torque_limit(model: mujoco.MjModel, joint: str) -> float | None:
    """The smallest torque limit the model states for a joint (N m), or None."""
    jid = model.joint(joint).id
    limits = [float(np.abs(model.jnt_actfrcrange[jid]).max())] if model.jnt_actfrclimited[jid] else []
    for a in range(model.nu):
        if model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT or model.actuator_trnid[a][0] != jid:
            continue
        if model.actuator_forcelimited[a]:
            limits.append(float(np.abs(model.actuator_forcerange[a]).max()))
        if model.actuator_ctrllimited[a]:
            limits.append(float(np.abs(model.actuator_ctrlrange[a]).max() * abs(model.actuator_gear[a][0])))
    limits = [v for v in limits if v > 0 and math.isfinite(v)]
    return min(limits) if limits else None


def _joint_bounds(kind: str, nominal: float, limit: float) -> tuple[float, str]:
    if kind == "joint_armature":
        rule, text = (
            limit / DRIVE_ACCELERATION_RAD_S2,
            f"torque limit {limit:g} N m / {DRIVE_ACCELERATION_RAD_S2:g} rad/s^2",
        )
    elif kind == "joint_damping":
        rule, text = limit / DAMPING_SPEED_RAD_S, f"torque limit {limit:g} N m at {DAMPING_SPEED_RAD_S:g} rad/s"
    else:
        rule, text = FRICTION_FRACTION * limit, f"{FRICTION_FRACTION:g} x torque limit {limit:g} N m"
    if NOMINAL_HEADROOM * nominal > rule:
        return NOMINAL_HEADROOM * nominal, f"{NOMINAL_HEADROOM:g} x the model's {nominal:g} (above {text})"
    return rule, text


def physical_bounds(problem: Problem, spec: mujoco.MjSpec, model: mujoco.MjModel) -> tuple[Problem, list[str]]:
    """The problem with every missing `min`/`max` filled from physics, and one note per filled parameter."""
    out, notes = [], []
    for p in problem.parameters:
        if (
            p.kind == "body_mass_com"
            and p.min_value is not None
            and p.max_value is not None
            and len(p.min_value) == len(p.max_value) == 1
            and spec.body(p.target) is not None
        ):
            nominal = model_value(spec, p)
            half = com_half_width(nominal[0], inertia_tensor(spec.body(p.target)))
            centre = nominal[1:4] if p.start is None else p.start[1:4]
            out.append(
                replace(
                    p,
                    min_value=(p.min_value[0], *(c - half for c in centre)),
                    max_value=(p.max_value[0], *(c + half for c in centre)),
                )
            )
            notes.append(
                f"{p.name}: min/max bound the mass; the centre of mass from physics: within {half:.3g} m of the start"
            )
            continue
        if p.min_value is not None and p.max_value is not None:
            out.append(p)
            continue
        if (
            p.kind.startswith("body_")
            and spec.body(p.target) is None
            or p.kind.startswith("joint_")
            and spec.joint(p.target) is None
            or p.kind == "joint_effort_offset"
            and joint_motor(spec, p.target) is None
        ):
            out.append(p)  # check_problem names the missing target
            continue
        nominal = model_value(spec, p)
        if p.kind.startswith("body_"):
            arm_kg = _carrying_arm_mass(model, p.target)
            if arm_kg > 0:
                hi = [max(arm_kg, MASS_RANGE[1] * nominal[0])]
                lo = [PAYLOAD_FRACTION * hi[0]]
                text = (
                    f"payload mass {lo[0]:.4g}..{hi[0]:.4g} kg (up to the {arm_kg:.4g} kg of arm that carries "
                    f"it; the model's {nominal[0]:.4g} kg is not trusted)"
                )
            else:
                lo, hi = [MASS_RANGE[0] * nominal[0]], [MASS_RANGE[1] * nominal[0]]
                text = (
                    f"mass {lo[0]:.4g}..{hi[0]:.4g} kg ({MASS_RANGE[0]:g}-{MASS_RANGE[1]:g}x the model's "
                    f"{nominal[0]:.4g})"
                )
            if p.kind == "body_mass_com":
                body = spec.body(p.target)
                half = com_half_width(nominal[0], inertia_tensor(body))
                lo += [c - half for c in nominal[1:4]]
                hi += [c + half for c in nominal[1:4]]
                text += f", centre of mass within {half:.3g} m of the model's"
        elif p.kind.startswith("joint_"):
            limit = torque_limit(model, p.target)
            if limit is None:
                raise ConfigError(
                    f"give min and max: the model states no torque limit for joint {p.target!r} to bound {p.kind} from",
                    parameter=p.name,
                )
            if p.kind == "joint_effort_offset":
                half = max(OFFSET_FRACTION * limit, NOMINAL_HEADROOM * abs(nominal[0]))
                lo, hi = [-half], [half]
                text = f"+-{half:.4g} N m ({OFFSET_FRACTION:g} x torque limit {limit:g} N m)"
            else:
                hi_value, text = _joint_bounds(p.kind, nominal[0], limit)
                lo, hi = [0.0], [hi_value]
                text = f"0..{hi_value:.4g} ({text})"
        elif p.kind == "actuator_gain":
            lo, hi = [GAIN_RANGE[0]], [GAIN_RANGE[1]]
            text = f"{GAIN_RANGE[0]:g}..{GAIN_RANGE[1]:g} x the nominal gear"
        else:
            raise ConfigError(f"{p.kind} has no physical default bounds: give min and max", parameter=p.name)
        out.append(replace(p, min_value=tuple(lo), max_value=tuple(hi)))
        notes.append(f"{p.name}: bounds from physics: {text}")
    return replace(problem, parameters=tuple(out)), notes


def _carrying_arm_mass(model: mujoco.MjModel, body: str) -> float:
    """The moving mass of the arm that carries `body` when it is a payload (no joint of its own, and none
    below it, but moved by joints above it); 0 for any other body."""
    b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
    subtree = [k for k in range(1, model.nbody) if _descends(model, k, b)]
    if b <= 0 or model.body_weldid[b] == 0 or any(model.body_jntnum[k] for k in subtree):
        return 0.0
    moving = [k for k in range(1, model.nbody) if model.body_weldid[k] != 0 and k not in subtree]
    return float(sum(model.body_mass[k] for k in moving))


def _descends(model: mujoco.MjModel, k: int, ancestor: int) -> bool:
    while k > 0:
        if k == ancestor:
            return True
        k = int(model.body_parentid[k])
    return k == ancestor


@dataclass(frozen=True)
class Prior:
    """Extra residual rows sqrt(weight) (x[index] - center) / scale for the free optimiser coordinates."""

    weight: float
    index: np.ndarray
    center: np.ndarray
    scale: np.ndarray
    names: tuple[str, ...]

    def rows(self, x: np.ndarray) -> np.ndarray:
        """The prior's residual rows at x (n,) or at each column of x (n, k)."""
        root = math.sqrt(self.weight)
        if x.ndim == 1:
            return root * (x[self.index] - self.center) / self.scale
        return root * (x[self.index] - self.center[:, None]) / self.scale[:, None]

    def jacobian(self, n: int) -> np.ndarray:
        out = np.zeros((len(self.index), n))
        out[np.arange(len(self.index)), self.index] = math.sqrt(self.weight) / self.scale
        return out


def make_prior(weight: float, params, names: Sequence[str]) -> Prior | None:
    """The prior on the named parameters' free coordinates (centred on their current values), or None (w = 0)."""
    if weight <= 0:
        return None
    index, center, scale, labels, k = [], [], [], [], 0
    wanted = set(names)
    for name in params.keys():
        prm = params[name]
        if prm.frozen:
            continue
        if name in wanted:
            lo, hi = np.broadcast_to(prm.min_value, prm.size), np.broadcast_to(prm.max_value, prm.size)
            for j in range(prm.size):
                index.append(k + j)
                center.append(float(np.ravel(prm.value)[j]))
                scale.append(float(hi[j] - lo[j]) / PRIOR_RANGE_SIGMAS)
                labels.append(f"{name}[{j}]" if prm.size > 1 else name)
        k += prm.size
    if not index:
        return None
    return Prior(float(weight), np.array(index), np.array(center), np.array(scale), tuple(labels))


def with_prior(residual_fn, prior: Prior | None):
    """`residual_fn` with the prior's rows appended (for the optimiser); unchanged without a prior."""
    if prior is None:
        return residual_fn

    def fn(x: np.ndarray, params, **kw):
        res, preds, records = residual_fn(x, params, **kw)
        return [*res, prior.rows(np.asarray(x, dtype=float))], preds, records

    return fn
