"""Torque-space validation of an arm result: per joint, the RMS of measured minus predicted joint torque on
held-out data, for the model file (nominal), the identified model and the regression with smooth friction.

A model's torque is the whole-arm regressor W(q, qd, qdd) (`arm_regressor`) times its parameters: inertials,
damping, armature, friction loss as c clip(v / band) over the band the model's friction constraint holds
(`sim.friction`: a stiff one's is a sign; the torque-space fit writes its own), and the effort offset its
motors' constant bias stands for (`joint_effort_offset`). Velocities and accelerations
come from a Savitzky-Golay filter (50 ms, cubic) and the measured torque is smoothed by the same kernel as
the acceleration, so every model is compared on the same filtered record; friction terms are evaluated on
the record's measured velocity and filtered the same way (`arm_friction.friction_loss_columns`), else on the
filtered velocity (as c tanh(v / 0.01 rad/s)). The held-out data: the problem's
validation data, else the last quarter of the longest training record (then left out of the regression).

When every training record repeats whole periods (`Loaded.periodic`: an `optimal` tape its recorder stored, or
the data entry's `periodic` key), the regression is fitted on the periods averaged sample by sample and
differentiated in the frequency domain (`linear.periodic_record`) instead of the Savitzky-Golay filter: every
whole period, the held-out quarter included (say so; give validation data for a check out of sample), the torque
averaged but not filtered, the Coulomb term on the averaged period's exact velocity; and the noise measured
between the periods is reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import mujoco
import numpy as np

from ...errors import DataError
from ...linear import (
    JOINT_TERMS,
    ArmFrictionFit,
    ArmRegressor,
    BootstrapSettings,
    Periods,
    concatenate,
    fit_arm_friction,
    friction_loss_columns,
    periodic_record,
)
from ...signals import (
    Derivatives,
    JointCommands,
    JointSamples,
    advanced,
    savgol_derivatives,
    smooth_like_acceleration,
    velocity_lag,
)
from ...sim import friction_bands
from ..rollout import sequences as sd

FRICTIONLOSS_BAND_RAD_S = 0.01
"""The band a fitted friction loss acts over unless the folds choose a wider one (the torque-space fit's
`FRICTION_BANDS_RAD_S`; the same band as the warm start's regressor)."""
VELOCITY_LAG_SAMPLES = 2.0
"""A record's velocity is re-timed against its positions from this lag on: the real Panda's velocity lags its
positions' derivative by 4.8 samples (5 ms, the drive's filter; re-timed, the identified MJCF's held-out torque
on joint 1 fell 0.187 -> 0.186 N m and joint 6's 0.044 -> 0.042); a simulated arm logged by a polling logger
shows 0.7-0.9 samples, within the stamps' own half-sample uncertainty (`late_torque`), and is read as logged."""
MIN_BAND_RAD_S = 1e-6
"""A model's friction band is read no narrower (a stiff constraint's is about 1e-6 rad/s already: a sign)."""
Part = tuple[JointSamples, JointCommands | None]
MAX_TORQUE_ROWS = 20_000
"""Rows the torque checks and fits use at most per set of records (evenly spaced; the derivatives are taken on
every row first): the whole-arm regressor holds about 17 kB per row for a 6-joint arm (rows x bodies x joints x
3 Jacobians), so a long or fast record would otherwise need gigabytes (149,000 rows: 2.6 GB and a MemoryError)."""


PERIODIC_BOOTSTRAP = BootstrapSettings(blocks=100, resamples=200)
"""Blocks of an averaged period (50 ms of a 5 s period): with the default 20, some base parameters of an optimal
tape are excited in a few blocks only (its intervals came out 1.8x its OLS ones; with 100, as the plan predicts)."""


def joint_arrays(
    model: mujoco.MjModel, maps: Sequence[sd.JointMap], samples: JointSamples, commands: JointCommands | None
) -> tuple[np.ndarray, np.ndarray]:
    """Positions and torques (held effort commands, else the measured effort), (N, nv) in model DOF order."""
    ros = joint_order(model, maps)
    q = np.column_stack([samples.column("position", j) for j in ros])
    if commands is not None:
        held = commands.held_at(samples.time_ns)
        u = np.column_stack([held[:, commands.joint_names.index(j)] for j in ros])
    else:
        u = np.column_stack([samples.column("effort", j) for j in ros])
    return q, u


def torque_rows(
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    samples: JointSamples,
    commands: JointCommands | None,
    every: int = 1,
    filter_window_s: float = 0.05,
) -> tuple[Derivatives, np.ndarray, np.ndarray] | None:
    """Derivatives of the positions, the torque filtered the same way (in model DOF order), valid rows
    (every `every`-th); None for a record under 200 samples."""
    if len(samples) < 200:
        return None
    q, u = joint_arrays(model, maps, samples, commands)
    dt_s = float(np.median(np.diff(samples.time_ns))) * 1e-9
    deriv = savgol_derivatives(q, dt_s, filter_window_s=filter_window_s, polyorder=3)
    tau = smooth_like_acceleration(deriv, u)  # efforts and effort commands are joint torques already
    ok = deriv.valid.all(axis=1) & np.all(np.isfinite(tau), axis=1)
    ok[np.arange(len(ok)) % every != 0] = False
    return deriv, tau, ok


def held_out_split(
    train: Sequence[tuple[str, list]], held_out: Sequence[tuple[str, list]] = ()
) -> tuple[list[Part], list[Part], str]:
    """(parts to fit, parts to check, what the check uses): the validation data, else the last quarter of the
    longest training record (which the fit then leaves out)."""
    fit_parts = [part for _, parts in train for part in parts]
    if held_out:
        return fit_parts, [part for _, parts in held_out for part in parts], "validation data"
    longest = max(fit_parts, key=lambda part: len(part[0]))
    n = len(longest[0])
    first = (longest[0].slice(0, int(0.75 * n)), longest[1])
    last = (longest[0].slice(int(0.75 * n), n), longest[1])
    return [first] + [p for p in fit_parts if p is not longest], [last], "the last quarter of the training record"


def joint_order(model: mujoco.MjModel, maps: Sequence[sd.JointMap]) -> list[str]:
    """The ROS joint names in model DOF order (the regressor's columns)."""
    return [maps[k].ros_joint for k in np.argsort([int(model.jnt_dofadr[model.joint(m.mjcf_joint).id]) for m in maps])]


def measured_velocity(model: mujoco.MjModel, maps: Sequence[sd.JointMap], samples: JointSamples) -> np.ndarray | None:
    """The record's own joint velocity in model DOF order, read as much earlier as it lags its positions'
    derivative when that is `VELOCITY_LAG_SAMPLES` or more (`velocity_lag_samples`: a drive's filtered estimate),
    or None when it has none (or not finite)."""
    if samples.velocity is None:
        return None
    v = np.column_stack([samples.column("velocity", j) for j in joint_order(model, maps)])
    if not np.isfinite(v).all():
        return None
    lag = velocity_lag_samples(model, maps, samples)
    return advanced(v, lag) if abs(lag) >= VELOCITY_LAG_SAMPLES else v


def velocity_lag_samples(model: mujoco.MjModel, maps: Sequence[sd.JointMap], samples: JointSamples) -> float:
    """How many samples the record's own velocity lags the derivative of its positions (`signals.velocity_lag`;
    0 without a velocity)."""
    if samples.velocity is None or len(samples) < 2:
        return 0.0
    joints = joint_order(model, maps)
    q = np.column_stack([samples.column("position", j) for j in joints])
    v = np.column_stack([samples.column("velocity", j) for j in joints])
    return velocity_lag(q, v, float(np.median(np.diff(samples.time_ns))) * 1e-9)


def torque_records(
    model: mujoco.MjModel, maps: Sequence[sd.JointMap], parts: Sequence[Part], filter_window_s: float = 0.05
) -> tuple[Derivatives, np.ndarray, np.ndarray | None] | None:
    """The parts' derivatives, torques (NaN where a row is not usable) and measured velocities (None unless
    every part has them) joined."""
    got, velocities = [], []
    for samples, commands in parts:
        rows = torque_rows(model, maps, samples, commands, filter_window_s=filter_window_s)
        if rows is not None:
            deriv, tau, ok = rows
            got.append((deriv, np.where(ok[:, None], tau, np.nan)))
            velocities.append(measured_velocity(model, maps, samples))
    if not got:
        return None
    deriv, tau = concatenate(got)
    valid = np.flatnonzero(deriv.valid.all(axis=1) & np.isfinite(tau).all(axis=1))
    if len(valid) > MAX_TORQUE_ROWS:  # evenly spaced rows: memory bounded whatever the record's length or rate
        unused = np.ones(len(tau), dtype=bool)
        unused[valid[np.linspace(0, len(valid) - 1, MAX_TORQUE_ROWS).round().astype(int)]] = False
        tau = np.where(unused[:, None], np.nan, tau)
        deriv = replace(deriv, valid=deriv.valid & ~unused.reshape((-1,) + (1,) * (deriv.valid.ndim - 1)))
    return deriv, tau, None if any(v is None for v in velocities) else np.concatenate(velocities)


def periodic_records(
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    train: Sequence[tuple[str, list]],
    periodic: Mapping[str, Periods],
) -> tuple[Derivatives, np.ndarray, dict[str, dict[str, Any]]] | None:
    """Every training record's periods averaged, differentiated in the frequency domain (`linear.periodic_record`)
    and joined, with what each measured (its periods and the noise between them, per joint); None unless every
    training record has checked periods."""
    if not train or any(name not in periodic for name, _ in train):
        return None
    joints = joint_order(model, maps)
    got, summary = [], {}
    for name, parts in train:
        p = periodic[name]
        held = [(s, c) for s, c in parts if s.time_ns[0] <= p.start_ns and s.time_ns[-1] >= p.end_ns]
        if not held:
            raise DataError(f"training record {name} does not hold its {p.periods} period(s) of {p.period_s:g} s")
        samples, commands = held[0]
        q, u = joint_arrays(model, maps, samples, commands)
        try:
            record = periodic_record(samples.time_ns, q, u, p.start_ns, p.period_s, p.periods, p.keep_hz, p.settle_s)
        except DataError as exc:
            raise DataError(f"training record {name}: {exc}") from None
        got.append((record.deriv, record.torque))
        summary[name] = {
            **p.document(),
            "torque_noise_nm": {j: round(float(v), 6) for j, v in zip(joints, record.torque_noise_nm)},
            "position_noise_rad": {j: float(f"{v:.4g}") for j, v in zip(joints, record.position_noise_rad)},
        }
    deriv, tau = concatenate(got)
    return deriv, tau, summary


@dataclass(frozen=True, eq=False)
class TorqueValidation:
    """Held-out joint torque RMS per model label (`nominal`, `identified`, `regression_friction`) and joint."""

    joints: tuple[str, ...]
    held_out: str
    rms_nm: dict[str, dict[str, float]]
    friction: ArmFrictionFit | None
    samples: int
    periodic: dict[str, dict[str, Any]] = field(default_factory=dict)  # the averaged records, when the fit used them

    def base_document(self) -> dict[str, Any]:
        """The regression's base parameters (value, 95 % half-width) and how its derivatives were made."""
        if self.friction is None:
            return {}
        fit = self.friction.fit
        return {
            "derivatives": "periodic (periods averaged, frequency domain)"
            if self.periodic
            else "savgol (0.05 s cubic, torque smoothed by its acceleration kernel)",
            "residual_rms_nm": round(float(fit.fit.residual_rms), 6),
            "condition_number": round(float(fit.fit.condition_number), 3),
            "parameters": {
                name: {"value": float(v), "half_width_95": float(h)}
                for name, v, h in zip(fit.base.base_names, fit.fit.values, fit.fit.half_width_95)
            },
        }

    def periodic_note(self) -> str | None:
        """What the averaged records changed and measured, in one line (None without them)."""
        if not self.periodic:
            return None
        parts = []
        for name, doc in self.periodic.items():
            tau, q = doc["torque_noise_nm"].values(), doc["position_noise_rad"].values()
            parts.append(
                f"{name}: {doc['periods']} periods of {doc['period_s']:g} s ({doc['source']}; consecutive periods "
                f"correlate {doc['least_correlation_between_periods']:.4f}), derivatives up to {doc['keep_hz']:g} Hz, "
                f"the first {doc['settle_s']:g} s of the first period left out; noise between periods "
                f"{min(tau):.3g}-{max(tau):.3g} N m, {1e3 * min(q):.3g}-{1e3 * max(q):.3g} mrad"
            )
        return (
            "whole-arm regression on the periods averaged and differentiated in the frequency domain (replacing "
            "the 0.05 s Savitzky-Golay filter): " + "; ".join(parts)
        )

    def metrics(self) -> dict[str, Any]:
        return {
            "held_out": self.held_out,
            "samples": self.samples,
            **{label: {j: round(v, 6) for j, v in rms.items()} for label, rms in self.rms_nm.items()},
        }

    def friction_document(self) -> dict[str, Any]:
        """Per joint: the regression's offset, viscous, Coulomb (value and 95 % half-width), v_s; and the
        closest MuJoCo representation (damping, frictionloss, joint_effort_offset) with what it cannot hold."""
        if self.friction is None:
            return {}
        out: dict[str, Any] = {}
        for name, jf in zip(self.joints, self.friction.joints):
            terms = {
                t: (
                    {"value": v[0], "half_width_95": v[1]}
                    if v is not None
                    else "combined with other parameters (see the base parameters)"
                )
                for t, v in jf.terms.items()
            }
            coulomb = jf.value("coulomb")
            out[name] = {
                **terms,
                "velocity_scale_rad_s": jf.velocity_scale_rad_s,
                "model": f"offset + viscous qd + coulomb tanh(v / {jf.velocity_scale_rad_s:.3g} rad/s)"
                + (
                    ", v the measured velocity, the tanh filtered like the torque"
                    if self.friction.filtered_friction
                    else ", v the filtered velocity"
                ),
                "mujoco": {
                    "damping": jf.value("viscous"),
                    "frictionloss": coulomb,
                    "joint_effort_offset": jf.value("offset"),
                    "not_representable": "the tanh's rise below about "
                    f"{2 * jf.velocity_scale_rad_s:.3g} rad/s (friction loss is a soft sign)",
                },
            }
            if jf.on_search_bound:
                out[name]["note"] = "v_s on its search bound"
        return out

    def friction_notes(self, with_offset: set[str]) -> list[str]:
        """What the MuJoCo model cannot represent of the regression's friction, and offsets the data show on
        joints without a `joint_effort_offset` parameter (beyond twice their 95 % half-width)."""
        if self.friction is None:
            return []
        scales = [jf.velocity_scale_rad_s for jf in self.friction.joints]
        out = [
            f"joint friction (regression, per joint under `friction`): its smooth Coulomb rise tanh(v / v_s), v_s "
            f"{min(scales):.2g}-{max(scales):.2g} rad/s, is not representable in MuJoCo (friction loss is a soft "
            "sign; no Stribeck term): damping, frictionloss and joint_effort_offset are the closest form"
        ]
        missing = [
            f"{name} {jf.terms['offset'][0]:+.3g} +- {jf.terms['offset'][1]:.2g} N m"
            for name, jf in zip(self.joints, self.friction.joints)
            if name not in with_offset
            and jf.terms.get("offset") is not None
            and abs(jf.terms["offset"][0]) > 2 * jf.terms["offset"][1]
        ]
        if missing:
            out.append(
                "the regression finds torque offsets on joints the problem gives no joint_effort_offset: "
                + ", ".join(missing)
            )
        return out


def rms_per_joint(err: np.ndarray, joints: Sequence[str]) -> dict[str, float]:
    """Each joint's RMS of the columns of `err` (N, joints), NaN rows left out."""
    return {j: float(np.sqrt(np.nanmean(err[:, k] ** 2))) for k, j in enumerate(joints)}


def whole_arm(model: mujoco.MjModel, maps: Sequence[sd.JointMap]) -> bool:
    """Whether the problem maps every DOF of the model, two or more (what the whole-arm regressor needs)."""
    return len(maps) >= 2 and len(maps) == model.nv


def torque_validation(
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    train: Sequence[tuple[str, list]],
    held_out: Sequence[tuple[str, list]] = (),
    models: dict[str, mujoco.MjModel] | None = None,
    friction: bool = True,
    periodic: Mapping[str, Periods] | None = None,
) -> TorqueValidation | None:
    """Held-out torque RMS per joint of `models` (label -> compiled model; default the nominal `model`) and,
    with `friction`, of the whole-arm regression with smooth friction fitted on the training part (on the averaged
    periods when `periodic` holds every training record's, see the module).
    None when the problem is not a whole arm (every DOF a mapped hinge or slide joint) or the data are short."""
    if not whole_arm(model, maps):
        return None
    fit_parts, check_parts, label = held_out_split(train, held_out)
    check = torque_records(model, maps, check_parts)
    if check is None:
        return None
    deriv, tau_all, velocity = check
    valid = deriv.valid.all(axis=1)
    rows = valid & np.isfinite(tau_all).all(axis=1)
    if rows.sum() < 50:
        return None
    tau = tau_all[rows]
    joints = joint_order(model, maps)
    arm = ArmRegressor(model, JOINT_TERMS, coulomb_band_rad_s=FRICTIONLOSS_BAND_RAD_S)
    w_valid = arm.compute(deriv.q[valid], deriv.qd[valid], deriv.qdd[valid])  # the friction fit's prediction reuses it
    w = w_valid[rows[valid]]
    coulomb_at = np.array([arm.names.index(f"{joint}.coulomb") for joint in arm.joint_names])
    rms = {}
    for name, m in (models or {"nominal": model}).items():
        # each model's friction loss over its own band, of the record's velocity filtered like the torque
        if velocity is not None:
            bands = np.maximum(friction_bands(m), MIN_BAND_RAD_S)
            w[:, np.arange(len(coulomb_at)), coulomb_at] = friction_loss_columns(deriv, velocity, bands)[rows]
        rms[name] = rms_per_joint(tau - w @ ArmRegressor(m, JOINT_TERMS).true_parameters(), joints)
    fitted, averaged = None, {}
    if friction:
        periods = periodic_records(model, maps, train, periodic) if periodic else None
        if periods is not None:
            fit_deriv, fit_tau, averaged = periods
            fitted = fit_arm_friction(model, fit_deriv, fit_tau, bootstrap=PERIODIC_BOOTSTRAP)
            predicted = fitted.predicted_torque(deriv, None, w_valid)[rows]
            rms["regression_friction"] = rms_per_joint(tau - predicted, joints)
        record = None if periods is not None else torque_records(model, maps, fit_parts)
        if record is not None:
            fit_deriv, fit_tau, fit_velocity = record
            fitted = fit_arm_friction(
                model, fit_deriv, fit_tau, friction_velocity=fit_velocity if velocity is not None else None
            )
            predicted = fitted.predicted_torque(deriv, velocity if fitted.filtered_friction else None, w_valid)[rows]
            rms["regression_friction"] = rms_per_joint(tau - predicted, joints)
    return TorqueValidation(tuple(joints), label, rms, fitted, int(rows.sum()), averaged)


def total(rms: dict[str, float]) -> float:
    return math.sqrt(sum(v**2 for v in rms.values()))
