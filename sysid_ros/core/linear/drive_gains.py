"""Drive gains calibrated with a known mass: each joint's torque scale from an unloaded and a loaded run.

A controller that logs motor current times a drive gain (or a torque sensor with a scale error) reports
tau_logged = tau / k per joint, and every term identified from it is off by k. The arm's own model cannot tell
k from the arm's parameters (both scale together); a payload whose inertial parameters are known breaks the tie
(the method published identifications of current-sensing arms use: Gautier & Briot's global identification of
drive gains). With the arm's base parameters theta common to both runs and the known payload's torque
tau_p (zero in the unloaded run), every sample and joint gives one linear equation

    W_b(q, qd, qdd) theta - tau_logged,j k_j = -tau_p,j

solved by per-joint weighted least squares with block-bootstrap intervals (`regression.fit_linear`). The
regressor carries viscous, smooth Coulomb (the measured velocity's tanh filtered like the torque,
`arm_friction`'s finding; each joint's v_s from a log grid, `_coulomb_bands`), armature and an offset per joint;
the payload's own columns are left out of the arm's. One v_s for all joints chosen by a weighted residual (which
cannot choose: see `_coulomb_bands`) left the smallest one, 5 mrad/s, on a plant whose v_s are 20-30 mrad/s: on
noise-free 1 kHz runs of the industrial stand-in (a 2 kg mass on the tool axis) the wrists' gains came out
4-99 % off (wrists 1-2's misfit 0.19-0.23 N m); with each joint's own v_s (the plant's, found) the wrists'
misfit is 0.0006-0.007 N m and the gains within 0.1 % (wrist 3, which that mass hardly loads, 0.6 %).
Positions and torque are low-passed forwards and backwards (`base_fit.filtered_rows`) and the filter's transients
at both ends left out: on the simulated industrial arm with true gains, the ends alone raised the fit's residual
from 0.05-0.14 to 2-3 N m on the big joints, and the gains came out 12-50 % low. A joint the payload hardly loads
(a wrist turning about the payload's own axis: mount the mass off that axis) has no calibrated gain: its interval
says so, and a warning.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import scipy.linalg
from scipy.signal import butter, filtfilt

from ..errors import ConfigError, DataError, ModelError
from ..files import load_yaml
from ..online import on_uniform_grid
from .arm_regressor import INERTIAL_NAMES, JOINT_TERMS, ArmRegressor, body_inertial_parameters
from .base_fit import Rows, filtered_rows
from .regression import BootstrapSettings, FitThresholds, fit_linear

COULOMB_BANDS_RAD_S = tuple(np.geomspace(0.005, 0.2, 17))
"""The smooth Coulomb term's v_s tried per joint (a factor ~1.26 apart): `_coulomb_bands` chooses."""
RANK_TOLERANCE = 1e-7
"""Columns of the arm's regressor whose QR pivot is below this share of the largest are combinations of others."""
MAX_RELATIVE_HALF_WIDTH = 0.02
"""A gain whose 95 % half-width is wider than this share of itself is not calibrated (a warning names it)."""
EDGE_CUTOFF_PERIODS = 4.0
"""Rows within this many periods of the filter's cutoff of either end are its transient, left out."""


@dataclass(frozen=True)
class DriveGains:
    """Each joint's torque scale k (the true torque is k x the logged one) with its 95 % half-width."""

    joints: tuple[str, ...]
    gain: np.ndarray
    half_width_95: np.ndarray
    residual_rms_nm: np.ndarray  # per joint, weighted fit
    payload_share: np.ndarray  # the payload's torque RMS over the logged torque RMS, per joint
    coulomb_band_rad_s: np.ndarray  # per joint
    calibrated: np.ndarray  # per joint: its gain is positive and known to MAX_RELATIVE_HALF_WIDTH
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, float]:
        """The calibrated joints' gains (the others keep the logged effort as it is)."""
        return {j: float(k) for j, k, ok in zip(self.joints, self.gain, self.calibrated) if ok}

    def document(self) -> dict[str, Any]:
        """What `sysid-ros calibrate-gains` writes: gains a problem file's `effort_scale` takes as they are."""
        return {
            "effort_scale": self.as_dict(),
            "half_width_95": {j: float(h) for j, h in zip(self.joints, self.half_width_95)},
            "residual_rms_nm": {j: round(float(r), 6) for j, r in zip(self.joints, self.residual_rms_nm)},
            "payload_share": {j: round(float(s), 4) for j, s in zip(self.joints, self.payload_share)},
            "coulomb_band_rad_s": {j: float(b) for j, b in zip(self.joints, self.coulomb_band_rad_s)},
            "verdict": "suspect" if self.warnings else "ok",
            "warnings": list(self.warnings),
        }


def read_effort_scale(path: str | Path) -> dict[str, float]:
    """The `effort_scale` of a file `sysid-ros calibrate-gains` wrote (or a plain joint: gain mapping), each gain a
    finite number in (0, 100]; a one-line ConfigError otherwise."""
    doc = load_yaml(path, "effort scale")
    scale = doc.get("effort_scale", doc) if isinstance(doc, dict) else doc
    if not isinstance(scale, dict) or not scale:
        raise ConfigError("no effort_scale mapping (joint: gain) in the file", file=str(path))
    bad = [
        str(k)
        for k, v in scale.items()
        if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v) or not 0.0 < v <= 100.0
    ]
    if bad:
        raise ConfigError(f"effort_scale gains must be numbers in (0, 100]: {', '.join(bad)}", file=str(path))
    return {str(k): float(v) for k, v in scale.items()}


def _body_columns(arm: ArmRegressor, body: str) -> np.ndarray:
    names = [f"{body}.{p}" for p in INERTIAL_NAMES]
    missing = [n for n in names if n not in arm.names]
    if missing:
        raise ModelError(f"the model has no body {body!r} for the known payload")
    return np.array([arm.names.index(n) for n in names])


def _independent(w: np.ndarray) -> np.ndarray:
    """Indices of a set of independent columns of the stacked regressor (column-pivoted QR)."""
    flat = w[:: max(1, len(w) * w.shape[1] // 20000)].reshape(-1, w.shape[-1])  # whole samples: every joint's rows
    scale = np.linalg.norm(flat, axis=0)
    used = np.flatnonzero(scale > 0)
    _, r, pivots = scipy.linalg.qr(flat[:, used] / scale[used], mode="economic", pivoting=True)
    diag = np.abs(np.diag(r))
    rank = int(np.sum(diag > RANK_TOLERANCE * diag[0])) if len(diag) else 0
    return np.sort(used[pivots[:rank]])


def _gain_columns(logged: np.ndarray) -> np.ndarray:
    """(N, nv, nv): joint j's gain column is minus its logged torque, in joint j's rows only."""
    n, nv = logged.shape
    out = np.zeros((n, nv, nv))
    out[:, np.arange(nv), np.arange(nv)] = -logged
    return out


def _solve(phi: np.ndarray, y: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares of y (N, nv) on phi (N, nv, P); the values and each joint's residual RMS."""
    flat = (phi * weights[None, :, None]).reshape(-1, phi.shape[-1])
    scale = np.linalg.norm(flat, axis=0)
    scale[scale == 0] = 1.0
    a, b = flat / scale, (y * weights).ravel()
    try:  # normal equations: the search solves hundreds of these; the columns are independent (`_independent`)
        with warnings.catch_warnings():
            warnings.simplefilter("error", scipy.linalg.LinAlgWarning)  # ill conditioned: least squares instead
            theta = scipy.linalg.solve(a.T @ a, a.T @ b, assume_a="pos") / scale
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgWarning):
        theta = np.linalg.lstsq(a, b, rcond=None)[0] / scale
    return theta, np.sqrt(np.mean((y - phi @ theta) ** 2, axis=0))


def _coulomb_bands(
    regressors: list[np.ndarray],
    tanh: list[np.ndarray],
    coulomb: list[int],
    arm_cols: np.ndarray,
    logged: np.ndarray,
    y: np.ndarray,
    period_s: float,
    cutoff_hz: float,
) -> np.ndarray:
    """Each joint's v_s (an index into COULOMB_BANDS_RAD_S): coordinate descent on sum_j log(residual RMS_j),
    the likelihood of a fit whose joints have their own noise levels, over rows thinned to ~10 per cutoff period
    (the filtered rows hold nothing faster). A weighted residual summed over joints with weights 1 / RMS_j is the
    same for every v_s (each joint contributes its row count) and cannot choose."""
    nv = logged.shape[1]
    stride = max(1, int(1.0 / (10.0 * cutoff_hz * period_s)))
    ends = np.cumsum([0] + [len(w) for w in regressors])
    rows = np.concatenate([np.arange(a, b, stride) for a, b in zip(ends[:-1], ends[1:])])
    thin = [w[::stride].copy() for w in regressors]
    tanh = [t[:, ::stride] for t in tanh]
    gains, y = _gain_columns(logged[rows]), y[rows]
    choice = np.full(nv, len(COULOMB_BANDS_RAD_S) // 2)
    keep = None
    weights = np.ones(nv)

    def score(choice: np.ndarray) -> tuple[float, np.ndarray]:
        nonlocal keep
        for w, t in zip(thin, tanh):
            w[:, np.arange(nv), coulomb] = t[choice, :, np.arange(nv)].T
        w_arm = np.concatenate([w[..., arm_cols] for w in thin])
        if keep is None:
            keep = _independent(w_arm)
        _, rms = _solve(np.concatenate([w_arm[..., keep], gains], axis=-1), y, weights)
        return float(np.sum(np.log(np.maximum(rms, 1e-12)))), rms

    best, rms = score(choice)
    weights = 1.0 / np.maximum(rms, 1e-9 * rms.max(initial=1.0))
    best, _ = score(choice)
    for _ in range(3):
        changed = False
        for j in range(nv):
            for k in range(len(COULOMB_BANDS_RAD_S)):
                if k == choice[j]:
                    continue
                trial = choice.copy()
                trial[j] = k
                value, _ = score(trial)
                if value < best - 1e-9:
                    best, choice, changed = value, trial, True
        if not changed:
            break
    return choice


@dataclass(frozen=True)
class CalibrationRun:
    """One run on a uniform clock: filtered rows (model DOF order), the measured velocity on the same clock
    (None: the filtered one stands in) and the rows left out at each end (the filter's transient)."""

    rows: Rows
    velocity: np.ndarray | None
    cutoff_hz: float
    edge: int

    def coulomb(self, band_rad_s: float | np.ndarray) -> np.ndarray:
        """tanh(v / v_s), filtered like the torque when the velocity was measured."""
        if self.velocity is None:
            return np.tanh(self.rows.qd / band_rad_s)
        b, a = butter(4, self.cutoff_hz, fs=1.0 / self.rows.period_s)
        return filtfilt(b, a, np.tanh(self.velocity / band_rad_s), axis=0)


def calibration_run(
    time_ns: np.ndarray, q: np.ndarray, tau: np.ndarray, velocity: np.ndarray | None = None, cutoff_hz: float = 4.0
) -> CalibrationRun:
    """A logged run (rows in model DOF order, possibly jittered) as `calibrate_drive_gains` takes it."""
    q, tau = np.asarray(q, dtype=float), np.asarray(tau, dtype=float)
    both = tau if velocity is None else np.hstack([tau, np.asarray(velocity, dtype=float)])
    t, q, both = on_uniform_grid(np.asarray(time_ns), q, both)
    nv = q.shape[1]
    period = float(np.median(np.diff(t))) * 1e-9
    edge = int(np.ceil(EDGE_CUTOFF_PERIODS / cutoff_hz / period))
    if len(t) < 2 * edge + 50:
        raise DataError(f"a run of {len(t)} rows is too short: {edge} rows at each end are the filter's transient")
    rows = filtered_rows(q, both[:, :nv], period, cutoff_hz)
    return CalibrationRun(rows, None if velocity is None else both[:, nv:], cutoff_hz, edge)


def calibrate_drive_gains(
    model: mujoco.MjModel,
    unloaded: CalibrationRun,
    loaded: CalibrationRun,
    payload_body: str,
    *,
    bootstrap: BootstrapSettings = BootstrapSettings(),
) -> DriveGains:
    """Each joint's drive gain from an `unloaded` and a `loaded` run of the arm `model`, which holds the known
    payload as the body `payload_body` with its true inertial (mass, centre, inertia)."""
    arm = ArmRegressor(model, JOINT_TERMS)
    payload_cols = _body_columns(arm, payload_body)
    known = body_inertial_parameters(model, model.body(payload_body).id)
    if known[0] <= 0:
        raise ModelError(f"the known payload body {payload_body!r} has no mass in the model")
    runs = (unloaded, loaded)
    for run in runs:
        if run.rows.q.shape != run.rows.tau.shape or run.rows.q.shape[1] != arm.nv:
            raise DataError(f"each run needs (N, {arm.nv}) positions and torques; got {run.rows.q.shape}")
    cut = [slice(r.edge, len(r.rows.q) - r.edge) for r in runs]
    arm_cols = np.setdiff1d(np.arange(arm.n_params), payload_cols)
    coulomb = [arm.names.index(f"{j}.coulomb") for j in arm.joint_names]
    regressors = [arm.compute(r.rows.q[c], r.rows.qd[c], r.rows.qdd[c]) for r, c in zip(runs, cut)]
    tau_p = [np.zeros_like(regressors[0][..., 0]), regressors[1][..., payload_cols] @ known]
    logged = np.concatenate([r.rows.tau[c] for r, c in zip(runs, cut)])
    n, nv = logged.shape
    y = -np.concatenate(tau_p)
    bands = np.asarray(COULOMB_BANDS_RAD_S)
    tanh = [np.stack([r.coulomb(b)[c] for b in bands]) for r, c in zip(runs, cut)]  # (bands, N, nv) per run
    choice = _coulomb_bands(regressors, tanh, coulomb, arm_cols, logged, y, runs[0].rows.period_s, runs[0].cutoff_hz)
    for w, t in zip(regressors, tanh):
        w[:, np.arange(nv), coulomb] = t[choice, :, np.arange(nv)].T
    w_arm = np.concatenate([w[..., arm_cols] for w in regressors])
    keep = _independent(w_arm)
    phi = np.concatenate([w_arm[..., keep], _gain_columns(logged)], axis=-1)
    _, rms = _solve(phi, y, np.ones(nv))
    weights = 1.0 / np.maximum(rms, 1e-9 * rms.max(initial=1.0))
    names = [f"arm.{arm.names[arm_cols[k]]}" for k in keep] + [f"{j}.drive_gain" for j in arm.joint_names]
    fit = fit_linear(
        (y * weights).ravel(),
        (phi * weights[None, :, None]).reshape(n * nv, -1),
        names,
        time_index=np.repeat(np.arange(n), nv),
        bootstrap=bootstrap,
        limits=FitThresholds(max_relative_half_width=np.inf),
    )
    gain, half = fit.values[-nv:], fit.half_width_95[-nv:]
    resid_rms = np.sqrt(np.mean((y - phi @ fit.values) ** 2, axis=0))
    loaded_tau = loaded.rows.tau[cut[1]]
    share = np.sqrt(np.mean(tau_p[1] ** 2, axis=0)) / np.maximum(np.sqrt(np.mean(loaded_tau**2, axis=0)), 1e-12)
    calibrated = np.isfinite(gain) & (gain > 0) & (half <= MAX_RELATIVE_HALF_WIDTH * gain)
    warnings = []
    for j, joint in enumerate(arm.joint_names):
        if not calibrated[j]:
            warnings.append(
                f"{joint}: not calibrated (gain {gain[j]:.4g} +- {half[j]:.2g}): the payload's torque is "
                f"{share[j]:.1%} of the logged torque there against a misfit of {resid_rms[j]:.2g} N m; a heavier "
                "mass, one mounted off this joint's axis, more motion of it or a longer run would narrow it"
            )
    return DriveGains(arm.joint_names, gain, half, resid_rms, share, bands[choice], calibrated, tuple(warnings))
