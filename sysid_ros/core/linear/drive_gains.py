"""Drive gains calibrated with a known mass: each joint's torque scale from an unloaded and a loaded run.

A controller that logs motor current times a drive gain (or a torque sensor with a scale error) reports
tau_logged = tau / k per joint, and every term identified from it is off by k. The arm's own model cannot tell
k from the arm's parameters (both scale together); a payload whose inertial parameters are known breaks the tie
(the method published identifications of current-sensing arms use: Gautier & Briot's global identification of
drive gains). With the arm's base parameters theta common to both runs and the known payload's torque
tau_p (zero in the unloaded run), every sample and joint gives one linear equation

    W_b(q, qd, qdd) theta - tau_logged,j k_j = -tau_p,j

solved by per-joint weighted least squares with block-bootstrap intervals (`regression.fit_linear`). The
regressor carries viscous, smooth Coulomb (one v_s for all joints, the best of a log grid; the measured
velocity's tanh filtered like the torque, `arm_friction`'s finding), armature and an offset per joint; the
payload's own columns are left out of the arm's. Positions and torque are low-passed forwards and backwards
(`base_fit.filtered_rows`) and the filter's transients at both ends left out: on the simulated industrial arm
with true gains, the ends alone raised the fit's residual from 0.05-0.14 to 2-3 N m on the big joints, and
the gains came out 12-50 % low. A joint the payload hardly loads (a wrist turning about the payload's own
axis) has no calibrated gain: its interval says so, and a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
import scipy.linalg
from scipy.signal import butter, filtfilt

from ..errors import DataError, ModelError
from ..online import on_uniform_grid
from .arm_regressor import INERTIAL_NAMES, JOINT_TERMS, ArmRegressor, body_inertial_parameters
from .base_fit import Rows, filtered_rows
from .regression import BootstrapSettings, FitThresholds, fit_linear

COULOMB_BANDS_RAD_S = tuple(np.geomspace(0.005, 0.2, 9))
"""The smooth Coulomb term's v_s tried (one for all joints; a factor ~1.6 apart): the best residual wins."""
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
    coulomb_band_rad_s: float
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
            "coulomb_band_rad_s": float(self.coulomb_band_rad_s),
            "verdict": "suspect" if self.warnings else "ok",
            "warnings": list(self.warnings),
        }


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


@dataclass(frozen=True)
class CalibrationRun:
    """One run on a uniform clock: filtered rows (model DOF order), the measured velocity on the same clock
    (None: the filtered one stands in) and the rows left out at each end (the filter's transient)."""

    rows: Rows
    velocity: np.ndarray | None
    cutoff_hz: float
    edge: int

    def coulomb(self, band_rad_s: float) -> np.ndarray:
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
    gain_cols = np.zeros((n, nv, nv))
    gain_cols[:, np.arange(nv), np.arange(nv)] = -logged
    y = -np.concatenate(tau_p)
    best = None
    for band in COULOMB_BANDS_RAD_S:
        for w, r, c in zip(regressors, runs, cut):
            w[:, np.arange(nv), coulomb] = r.coulomb(band)[c]
        w_arm = np.concatenate([w[..., arm_cols] for w in regressors])
        keep = _independent(w_arm)
        phi = np.concatenate([w_arm[..., keep], gain_cols], axis=-1)
        flat = phi.reshape(n * nv, -1)
        scale = np.linalg.norm(flat, axis=0)
        scale[scale == 0] = 1.0
        theta = np.linalg.lstsq(flat / scale, y.ravel(), rcond=None)[0] / scale
        resid = y - phi @ theta
        rms = np.sqrt(np.mean(resid**2, axis=0))
        weights = 1.0 / np.maximum(rms, 1e-9 * rms.max(initial=1.0))
        score = float(np.sum((resid * weights) ** 2))
        if best is None or score < best[0]:
            best = (score, band, phi, weights, keep)
    _, band, phi, weights, keep = best
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
                "mass, more motion of this joint or a longer run would narrow it"
            )
    return DriveGains(arm.joint_names, gain, half, resid_rms, share, float(band), calibrated, tuple(warnings))
