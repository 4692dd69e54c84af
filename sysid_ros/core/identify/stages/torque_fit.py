"""The torque-space fit of an arm: the problem's bodies (each with its 10 inertial parameters) and joint terms
(damping, friction loss, armature, effort offset) by weighted linear least squares on the measured joint
torque, refitted physically consistent when a body comes out non-physical, with
block-bootstrap intervals, and
written into the model as MuJoCo holds them; whether the result carries it is decided by time-blocked
cross-validation on the training rows (`choose_on_training`).

The regressor is `linear.arm_regressor`'s, with friction loss as the held-out torque check reads it (a soft sign,
`torque_check.FRICTIONLOSS_BAND_RAD_S`): the fit uses the form the MJCF holds, not the regression's smoother
tanh (on the real Panda log the form MuJoCo holds predicts held-out torque 0.88x the published model's on joint
3 where the regression's tanh scales gave 1.03x). A body the problem frees is fitted with all 10 of its inertial
parameters (the full form) or, where the folds say the full form overfits, as the problem frees it (the problem
form: a `body_mass` scales its body, `choose_form`), its mass within the problem's bounds; bodies welded together
(`body_weldid`) move as one, so in the full form each welded group is fitted once, on its jointed body when the
problem frees it, else on the group's first freed body.
Everything the problem does not free keeps the window fit's value, and a small ridge on unit-norm columns pulls
what the data hardly see toward
the model file (the user's prior; the window fit's values can rest on bounds where they absorbed what the rigid
body got wrong: on the real Panda log, centred on them, joint 1 came out 0.99x the published model on the 1 ms
clock, centred on the model file 0.82x). Each joint's equations are weighted by 1 / its
residual RMS of a first, unweighted pass (the shoulder's N m would otherwise set the wrist's mN m). A damping,
friction loss or armature (a rotor's inertia) that comes out negative is held at 0 and the rest fitted again (an
active set). Every fit is a small solve on
per-joint normal equations (`JointNormals`): a cross-validation fold's are the whole record's less its
left-out rows'. See docs/identification.md, "The torque-space fit and the MJCF a user takes away".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import mujoco
import numpy as np

from ...linear import (
    INERTIAL_NAMES,
    JOINT_TERMS,
    ArmRegressor,
    block_normal_equations,
    friction_loss_columns,
    physically_consistent,
    weigh_joints,
)
from ...sim import hold_band, joint_motor, set_effort_offset
from ..checks.torque_validation import (
    FRICTIONLOSS_BAND_RAD_S,
    VELOCITY_LAG_SAMPLES,
    Part,
    joint_order,
    torque_records,
    velocity_lag_samples,
)
from ..problem.file import VALUE_WIDTH, ParameterSpec
from ..problem.inertia import tensor_entries
from ..problem.parameters import scale_mass
from ..problem.spec_values import has_full_inertia, model_value
from ..rollout import sequences as sd

FIT_WINDOWS_S = (0.05, 0.1, 0.2)
"""Savitzky-Golay windows (cubic) the fit tries; the torque is filtered by the same kernel, so a longer window
costs only bandwidth, and keeps the acceleration's noise (which biases every inertial term) small. Which one
fits a record is measured on it, by the time-blocked folds of `choose_window`."""
TAKE_BELOW = 0.9
"""The result carries the torque-space fit when its joint torque over time-blocked folds of the training rows
(`choose_on_training`) is below this fraction of the window fit's (geometric mean over the joints). Within 10 %
either way the two tie, and the tie goes to the torque-space fit when it resolves every parameter the problem asks
(`resolves`) and its intervals are the narrower (`narrower`: equal predictions, so the more precise values, the
torque's timing counted), else to the window fit (on arm3 it ties at 0.93x: the window fit has every value within
0.2 %, the torque-space fit in the problem form the masses within 2.2 % but the damping 5-13 % low, its intervals
widened by the torque's timing, so the window fit stays). A payload weighed on an identified arm (`body_mass_com` on
the tool) ties at 0.999: the torque-space fit, the online estimator's regression, weighs 4.202 +- 0.026 kg of a 4.2
kg truth where the window fit weighed 4.176 +- 0.032; the simulated iiwa of test_identify_iiwa, whose window fit
holds its damping to 0.04 % with 10-25x narrower intervals, ties at 0.999 too and keeps it (the torque-space fit's
joint 2 damping is 1.9 % off). The window fit is scored in sample, so a tie already favours it.
The held-out rows play no part in the choice."""
ALONE_BELOW = 0.5
"""With `window_fit: auto`, a torque-space fit that leaves a parameter of the problem unresolved (an infinite
half-width) stands alone only below this fraction of the start values' torque (far better than they are, as on
the real Panda log at 0.34x); above it the window fit runs, which may resolve it, and the two are weighed as with
`always`: on arm3's bags over DDS (torque tapes around the hanging pose) the torque-space fit predicts the folds
at 0.88x, with the link masses unresolved and the damping 1.4-1.6 half-widths off, where the window fit has every
value within 0.5 %."""
FRICTION_BANDS_RAD_S = (FRICTIONLOSS_BAND_RAD_S, 0.03, 0.1)
"""The velocity bands a joint's friction loss may act over (frictionloss x clip(v / band), written into the MJCF as
MuJoCo holds it, `sim.friction`), chosen per joint by time-blocked folds (`choose_bands`). The first is the
near-sign every joint starts from. A real drive's friction rounds off through zero velocity (the published Panda
model's sigmoids span 0.1-0.4 rad/s), and a sign at the filtered velocity overshoots each filtered reversal: on the
real Panda the folds take 0.1 rad/s on joints 2-4, 6 and 7 (held-out torque on joint 7 0.059 -> 0.047 N m)."""
WIDER_BAND_GAIN = 0.005
"""A wider friction band must predict its joint's folds this fraction better than the narrowest (parsimony). On
the real Panda joint 1's folds are 0.6 % better at 0.03 rad/s (taken: held-out 0.189 -> 0.187 N m); at 1 % it
kept 0.01."""
RIDGE = 1e-4
"""The prior toward the model file, on unit-norm columns: only what the data cannot tell apart stays there."""
MAX_ROWS = 5000
"""Rows the fit uses at most (evenly spaced): derivatives filtered over tens of ms change little between them."""
MIN_PRINCIPAL = 0.01
"""A projected body's principal moments are at least this fraction of its largest."""
TERM_OF_KIND = {
    "joint_damping": "viscous",
    "joint_frictionloss": "coulomb",
    "joint_armature": "armature",
    "joint_effort_offset": "offset",
}
MUJOCO_TERM = {"viscous": "damping", "coulomb": "frictionloss", "armature": "armature", "offset": "effort_offset"}
"""The regressor's joint terms as MuJoCo names them."""
BODY_KINDS = ("body_mass", "body_mass_com", "body_inertia")
FITTED_KINDS = BODY_KINDS + tuple(TERM_OF_KIND)
"""The parameter kinds the torque-space fit writes into the model."""


TIMING_HALF_WIDTHS = 3.0
"""A value that moves by more than this many of its noise half-widths (the bootstrap's) when the torque is read
half a sample later has its precision set by the torque's timing, not the noise (its interval, the two added in
quadrature, over 3x the noise's): with `window_fit: auto` the window fit then runs, which replays the torque as
applied, and the two are weighed as with `always` (`TorqueSpaceFit.timing_sensitive`). Measured: the real Panda
log (1 kHz) moves 0.22 at most (joint 2's damping); the logged iiwa of test_identify_torque_space (500 Hz)
2.4 (joint 3's damping), it stands alone with the widened intervals; arm3 (a PID drive holding its effort 2 ms,
500 Hz) 10 (the shoulder's damping, 23 %), the window fit runs and has every value within 0.2 %."""


def late_torque(
    model: mujoco.MjModel, maps: Sequence[sd.JointMap], parts: Sequence[Part], rows: TorqueRows
) -> np.ndarray | None:
    """`rows`' torque read half a sample later, as `torque_fit_rows` filters it: each measured effort the mean of
    itself and the one before (an effort command: of itself and the command before, half its hold later); None
    when a part has no torque or the rows do not match."""

    def later(values: np.ndarray) -> np.ndarray:
        out = np.array(values, dtype=float)
        out[1:] = 0.5 * (out[1:] + out[:-1])
        return out

    late = []
    for samples, commands in parts:
        if commands is not None:
            late.append((samples, replace(commands, values=later(commands.values))))
        elif samples.effort is not None:
            late.append((replace(samples, effort=later(samples.effort)), None))
        else:
            return None
    record = torque_records(model, maps, late, filter_window_s=rows.filter_window_s)
    if record is None or len(record[1]) <= rows.index.max():
        return None
    tau = record[1][rows.index]
    return tau if np.isfinite(tau).all() else None


def timing_words(moved: dict[str, float]) -> str:
    """What a `TorqueSpaceFit.timing_sensitive` says, in words (the three largest moves)."""
    worst = list(moved.items())[:3]  # `timing_sensitive`'s order: the largest first
    return (
        "the torque-space fit's values depend on the torque's timing: read half a sample later, "
        + ", ".join(f"{k} moves {v:.1f} half-widths" for k, v in worst)
        + " (a drive's held effort, a logger's lag); the window fit replays the torque as applied"
    )


@dataclass(frozen=True, eq=False)
class TorqueSpaceFit:
    """The fitted bodies (mass, centre of mass, tensor about it), joint terms, the bodies projected onto physical
    values, the joint terms held at 0 (negative when free), and the model with them written in."""

    bodies: dict[str, tuple[float, np.ndarray, np.ndarray]]
    joints: dict[str, dict[str, float]]
    projected: tuple[str, ...]
    held_at_zero: tuple[str, ...]
    spec: mujoco.MjSpec
    rows: int
    filter_window_s: float = float("nan")  # the Savitzky-Golay window of the fit's derivatives
    form: str = "full"  # `FORMS`
    form_ratio: float = float("nan")  # the full form's fold torque over the problem form's (nan: no choice)
    friction_bands: dict[str, float] = field(default_factory=dict)  # each written friction loss's band, rad/s
    velocity_lag_s: float = 0.0  # how much earlier the friction loss read the records' own velocity (0: as logged)
    timing: dict[str, float] = field(default_factory=dict)
    """How far each value moves (keyed as `intervals`; a body's: its mass) when the torque is read half a sample
    later (`late_torque`); empty when not measured."""
    intervals: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """95 % half-widths by body (mass, com x y z, tensor as `tensor_entries`; a scaled body's: its mass) and by
    "joint.mujoco_term", the block bootstrap's with each mass's and joint term's `timing` move added in quadrature;
    inf where the data do not determine the value alone (`Spread.resolution` below `RESOLVED`)."""

    def resolves(self, parameters: Sequence[ParameterSpec]) -> bool:
        """Whether the data alone set every free parameter of `parameters` of a kind the fit writes (finite
        half-widths)."""
        return all(
            np.all(np.isfinite(half_widths_of(self.intervals, p.kind, p.target, VALUE_WIDTH.get(p.kind, 1))))
            for p in parameters
            if p.kind in FITTED_KINDS and not p.frozen
        )

    def narrower(self, parameters: Sequence[ParameterSpec], window_widths: dict[str, tuple[float, ...]]) -> bool:
        """Whether this fit's intervals are narrower than the window fit's (`window_widths` by parameter, its own
        coordinates): the geometric mean over the free `body_mass`, `body_mass_com` and joint-term parameters of
        the ratio of the first half-widths (a mass, a joint term) is below 1; a window width that is inf or
        missing counts for this fit."""
        ratios = []
        for p in parameters:
            if p.frozen or p.kind not in FITTED_KINDS or p.kind == "body_inertia":  # its coordinates are not values
                continue
            mine = half_widths_of(self.intervals, p.kind, p.target, 1)[0]
            theirs = window_widths.get(p.name, (np.inf,))[0]
            if np.isfinite(theirs) and theirs > 0:
                ratios.append(np.log(max(mine, 1e-300) / theirs))
        return not ratios or float(np.mean(ratios)) < 0.0

    def document(self) -> dict[str, Any]:
        """The values the fit wrote, by body and joint (the tensor as ixx iyy izz ixy ixz iyz)."""
        return {
            "rows": self.rows,
            "filter_window_s": self.filter_window_s,
            "form": self.form,
            "full_form_ratio": None if np.isnan(self.form_ratio) else self.form_ratio,  # None: no body to scale
            "friction_band_rad_s": dict(self.friction_bands),
            "velocity_lag_s": self.velocity_lag_s,
            "bodies": {
                name: {"mass": m, "com": [float(x) for x in c], "inertia": [float(x) for x in tensor_entries(t)]}
                for name, (m, c, t) in self.bodies.items()
            },
            "joints": self.joints,
            "projected_onto_physical": list(self.projected),
            "held_at_zero": list(self.held_at_zero),
            "half_width_95": {k: [float(x) for x in v] for k, v in self.intervals.items()},
            "half_sample_later_change": dict(self.timing),
            "timing_sensitive": {k: round(v, 2) for k, v in self.timing_sensitive().items()},
        }

    def timing_sensitive(self) -> dict[str, float]:
        """The values that move by more than `TIMING_HALF_WIDTHS` x their 95 % half-width from the noise (the
        bootstrap's, before the timing is added to it) when the torque is read half a sample later, with that move
        in those half-widths, the largest first: the values then depend on when the torque was stamped."""
        out = {}
        for key, moved in self.timing.items():
            widened = self.intervals.get(key, (float("inf"),))[0]
            noise = float(np.sqrt(max(widened**2 - moved**2, 0.0)))
            if np.isfinite(widened) and moved > TIMING_HALF_WIDTHS * noise:
                out[key] = moved / max(noise, 1e-300)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))  # the largest first


def half_widths_of(intervals: dict[str, Sequence[float]], kind: str, target: str, n: int) -> tuple[float, ...]:
    """A parameter's `n` half-widths in a fit's `intervals` (a body's first n: mass, com, tensor; or the joint
    term's); inf where the fit has none."""
    key = target if kind in BODY_KINDS else f"{target}.{MUJOCO_TERM[TERM_OF_KIND[kind]]}"
    got = intervals.get(key)
    return tuple(float(h) for h in got[:n]) if got is not None and len(got) >= n else (float("inf"),) * n


def coupled_joints(model: mujoco.MjModel) -> list[str]:
    """Joints tied to another by an active joint equality (MuJoCo's form of a URDF `<mimic>`: q1 = c0 + c1 q2 +
    ...), each as "joint1 = c0 + c1 joint2". The arm regressor treats every DOF as independent, which such a
    model is not: its torque-space fit and torque checks would be wrong."""

    def name(j: int) -> str:
        return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(j)) or f"joint {j}"

    out = []
    for e in range(model.neq):
        if int(model.eq_type[e]) != int(mujoco.mjtEq.mjEQ_JOINT) or not model.eq_active0[e]:
            continue
        a, b = model.eq_obj1id[e], model.eq_obj2id[e]
        c = model.eq_data[e][:5]
        out.append(
            f"{name(a)} = {c[0]:.4g}"
            if b < 0
            else f"{name(a)} = {c[0]:.4g} + {c[1]:.4g} {name(b)}" + ("" if not np.any(c[2:]) else " + higher powers")
        )
    return out


def fitted_bodies(model: mujoco.MjModel, parameters: Sequence[ParameterSpec], skip: Sequence[int] = ()) -> list[int]:
    """The bodies whose inertials the fit frees: one per welded group the problem frees a body of (less `skip`)."""
    free = [model.body(p.target).id for p in parameters if p.kind in BODY_KINDS and not p.frozen]
    free = [b for b in free if b not in skip]
    chosen: dict[int, int] = {}
    for b in free:
        group = int(model.body_weldid[b])
        if group == 0:
            continue  # welded to the world: no joint feels it
        if b == group:
            chosen[group] = b
        else:
            chosen.setdefault(group, b)
    return sorted(chosen.values())


def physical_body(params: np.ndarray, floor: float = 1e-6) -> tuple[float, np.ndarray, np.ndarray, bool]:
    """(mass, centre of mass, tensor about it, whether it was moved) of 10 standard parameters, projected onto
    a physical body: mass >= floor, principal moments >= 1 % of the largest, the largest below the sum of the
    others (the triangle inequality)."""
    m = max(float(params[0]), floor)
    c = np.asarray(params[1:4], dtype=float) / m
    ixx, ixy, iyy, ixz, iyz, izz = params[4:]
    i_o = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    i_c = i_o - m * (c @ c * np.eye(3) - np.outer(c, c))
    i_c = 0.5 * (i_c + i_c.T)
    val, vec = np.linalg.eigh(i_c)
    fixed = np.maximum(val, max(floor, MIN_PRINCIPAL * val.max()))
    fixed[2] = min(fixed[2], 0.99 * (fixed[0] + fixed[1]))  # ascending: only the largest can break the triangle
    moved = params[0] < floor or bool(np.any(np.abs(fixed - val) > 1e-9 * max(abs(val).max(), floor)))
    return m, c, vec @ np.diag(fixed) @ vec.T, moved


@dataclass(frozen=True, eq=False)
class TorqueRows:
    """A record set's rows for the torque-space fit at one derivative filter window: the whole-arm regressor
    (rows, DOFs, every `ArmRegressor` parameter) on its usable rows (evenly spaced, at most `MAX_ROWS`), their
    torque (model DOF order) and their index in the joined record (`dt_s` apart); the friction loss's columns over
    each DOF's band `bands` (in `w`), and over each of `FRICTION_BANDS_RAD_S` (`coulomb`, when the records have
    their own velocity; `with_bands` swaps them in)."""

    w: np.ndarray
    tau: np.ndarray
    index: np.ndarray
    dt_s: float
    filter_window_s: float
    q: np.ndarray  # the rows' poses (model DOF order)
    bands: np.ndarray = field(default_factory=lambda: np.zeros(0))  # each DOF's friction band in `w`, rad/s
    coulomb: dict[float, np.ndarray] = field(default_factory=dict)  # band -> (rows, DOFs) friction-loss columns
    coulomb_at: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # each DOF's column in `w`
    inverse: dict[float, np.ndarray] = field(default_factory=dict)
    """band -> (rows, DOFs) the friction loss as `mj_inverse` reads an MJCF on these filtered states, clip(qd / band)
    of the filtered velocity (`with_bands(..., inverse=True)`)."""

    def take(self, mask: np.ndarray) -> TorqueRows:
        return replace(
            self,
            w=self.w[mask],
            tau=self.tau[mask],
            index=self.index[mask],
            q=self.q[mask],
            coulomb={band: c[mask] for band, c in self.coulomb.items()},
            inverse={band: c[mask] for band, c in self.inverse.items()},
        )

    def with_bands(self, bands: np.ndarray, inverse: bool = False) -> TorqueRows:
        """These rows with each DOF's friction loss over `bands[dof]` (one of `coulomb`'s bands; with `inverse`, as
        `mj_inverse` reads it on the filtered states)."""
        columns = self.inverse if inverse else self.coulomb
        if not columns or (np.array_equal(bands, self.bands) and not inverse):
            return self
        w = self.w.copy()
        for dof, (band, column) in enumerate(zip(bands, self.coulomb_at)):
            w[:, dof, column] = columns[float(band)][:, dof]
        return replace(self, w=w, bands=np.array(bands, dtype=float))

    def rms(self, model: mujoco.MjModel) -> np.ndarray:
        """Each DOF's torque RMS of `model` (its values through the same regressor) on these rows."""
        return np.sqrt(np.mean((self.tau - self.w @ ArmRegressor(model, JOINT_TERMS).true_parameters()) ** 2, axis=0))


def torque_fit_rows(
    model: mujoco.MjModel, maps: Sequence[sd.JointMap], parts: Sequence[Part], filter_window_s: float
) -> TorqueRows | None:
    """The rows of `parts` (`torque_check` parts) for the fit with derivatives through the `filter_window_s`
    Savitzky-Golay filter, the friction loss as MuJoCo holds it over a band (`sim.friction`; of the measured
    velocity filtered like the torque, when every part has one: then over each of `FRICTION_BANDS_RAD_S`, the
    first in `w`); None when fewer than 50 rows are usable."""
    record = torque_records(model, maps, parts, filter_window_s=filter_window_s)
    if record is None:
        return None
    deriv, tau, velocity = record
    arm = ArmRegressor(model, JOINT_TERMS, coulomb_band_rad_s=FRICTIONLOSS_BAND_RAD_S)
    friction = (
        {}
        if velocity is None
        else {band: friction_loss_columns(deriv, velocity, np.array(band)) for band in FRICTION_BANDS_RAD_S}
    )
    ok = deriv.valid.all(axis=1) & np.isfinite(tau).all(axis=1)
    for columns in friction.values():
        ok &= np.isfinite(columns).all(axis=1)
    rows = np.flatnonzero(ok)
    rows = rows[:: max(1, len(rows) // MAX_ROWS)]
    if len(rows) < 50:
        return None
    w = arm.compute(deriv.q[rows], deriv.qd[rows], deriv.qdd[rows])
    at = np.array([arm.names.index(f"{joint}.coulomb") for joint in arm.joint_names])
    bands = np.full(len(at), FRICTIONLOSS_BAND_RAD_S)
    coulomb = {band: columns[rows] for band, columns in friction.items()}
    if coulomb:
        w[:, np.arange(len(at)), at] = coulomb[FRICTIONLOSS_BAND_RAD_S]
    inverse = {band: np.clip(deriv.qd[rows] / band, -1.0, 1.0) for band in FRICTION_BANDS_RAD_S}
    return TorqueRows(w, tau[rows], rows, deriv.dt_s, filter_window_s, deriv.q[rows], bands, coulomb, at, inverse)


@dataclass(frozen=True, eq=False)
class TorqueSpaceChoice:
    """The torque-space fit on every training row, whether the result carries it, and what decided, all on the
    training rows by time-blocked cross-validation: `ratio`, its joint torque over the window fit's (geometric
    mean over the joints of each joint's RMS pooled over the folds); `cv_rms_nm`, that RMS per model and joint."""

    fit: TorqueSpaceFit
    taken: bool
    ratio: float
    folds: int = 0
    cv_rms_nm: dict[str, dict[str, float]] = field(default_factory=dict)
    reference: str = "window_fit"  # what the fit was weighed against: the window fit, or the start values

    def worse_than_file(self) -> list[str]:
        """The joints on which the model the result carries predicts its training folds more than `WORSE_BY`
        worse than the model file."""
        chosen = self.cv_rms_nm.get("torque_space" if self.taken else self.reference, {})
        nominal = self.cv_rms_nm.get("nominal", {})
        return [j for j, v in chosen.items() if j in nominal and v > WORSE_BY * nominal[j]]


SCORE_WINDOW_S = 0.05
"""The folds are scored through the torque check's own filter (`torque_records`' default), whatever window the
fit's derivatives use: a longer window smooths the measured torque too, and would score itself better."""
CV_FOLDS = 5
"""Time-blocked cross-validation folds of the training rows for the choice between the fits (and the filter
window)."""
WORSE_BY = 1.02
"""A carried model whose cross-validated joint torque RMS exceeds the model file's by this factor is a warning
(within 2 % the two are the noise's to tell apart)."""


def cross_validated(
    spec: mujoco.MjSpec,
    parameters: Sequence[ParameterSpec],
    prior: mujoco.MjModel,
    rows: TorqueRows,
    scored_rows: TorqueRows,
    others: dict[str, mujoco.MjModel] | None = None,
    physical: bool = True,
    form: str = "full",
) -> tuple[dict[str, np.ndarray], int]:
    """Each DOF's torque RMS pooled over `CV_FOLDS` time-blocked folds: fold k scores the k-th contiguous block
    of `scored_rows` (the same record through the torque check's filter, so that fits through different
    windows compare) with a torque-space fit on the rest of `rows`, and `others` (fixed models) on the same
    block; rows within one filter window of a block's edge are in neither part (the filter spans them); the fit
    in `form`. (RMS by label, folds scored)."""
    setup = fit_setup(spec, parameters, prior, form)
    if setup is None:
        return {}, 0
    w, r = setup.residual(rows)
    total = JointNormals.of(w, r)
    edges = np.linspace(rows.index[0], rows.index[-1] + 1, CV_FOLDS + 1)
    guard = int(np.ceil(max(rows.filter_window_s, scored_rows.filter_window_s) / rows.dt_s))
    squares: dict[str, list[np.ndarray]] = {}
    folds = n = 0
    for lo, hi in zip(edges[:-1], edges[1:]):
        scored = (scored_rows.index >= lo + guard) & (scored_rows.index < hi - guard)
        fitted = (rows.index < lo - guard) | (rows.index >= hi + guard)
        if scored.sum() < 10 or fitted.sum() < 50:
            continue
        normals = total.minus(JointNormals.of(w[~fitted], r[~fitted]))  # the left-out block's rows taken away
        theta, _, held = _solve(setup, normals, physical)
        trial = _fitted(setup, theta, held, rows, int(fitted.sum()))
        block = scored_rows.take(scored)
        for label, m in {"torque_space": trial.spec.copy().compile(), **(others or {})}.items():
            squares.setdefault(label, []).append(block.rms(m) ** 2 * scored.sum())
        folds, n = folds + 1, n + int(scored.sum())
    return {label: np.sqrt(np.sum(v, axis=0) / max(n, 1)) for label, v in squares.items()}, folds


def choose_on_training(
    spec: mujoco.MjSpec,
    parameters: Sequence[ParameterSpec],
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    parts: Sequence[Part],
    window_widths: dict[str, tuple[float, ...]] | None = None,
) -> TorqueSpaceChoice | None:
    """The torque-space fit of `parts` (the training rows) and the choice between it and `spec` (the window fit;
    with `window_widths` None, the start values of a run whose window fit has not run, and no tie) made on them
    alone, by `CV_FOLDS` time-blocked folds (`cross_validated`): the filter window is the one whose
    least-squares fit predicts the folds best, then the torque-space fit on the other blocks, the window fit and
    the model file are scored on each block; the torque-space fit is taken below `TAKE_BELOW` x the window fit's
    torque (geometric mean over the joints). The window fit saw every training row (its score is in sample: the
    choice leans to it). Then the torque-space fit on every row, with intervals. None when the problem frees
    nothing it fits or the records are short."""
    check = torque_fit_rows(model, maps, parts, SCORE_WINDOW_S)
    rows = None if check is None else choose_window(spec, parameters, model, maps, parts, check)
    if rows is None or check is None:
        return None
    bands = choose_bands(spec, parameters, model, rows)
    rows, check = rows.with_bands(bands), check.with_bands(bands)
    form, form_ratio = choose_form(spec, parameters, model, rows, check)
    fit = fit_torque_space(spec, parameters, rows, model, form=form, late_tau=late_torque(model, maps, parts, rows))
    if fit is None:
        return None
    fit = replace(fit, form=form, form_ratio=form_ratio, velocity_lag_s=velocity_lag_s(model, maps, parts))
    reference = "window_fit" if window_widths is not None else "start_values"
    others = {reference: spec.copy().compile(), "nominal": model}
    cv, folds = cross_validated(spec, parameters, model, rows, check, others, form=form)
    if folds < 2:
        return None
    joints = joint_order(model, maps)
    named = {label: {j: float(rms[k]) for k, j in enumerate(joints)} for label, rms in cv.items()}
    ratio = torque_ratio(named["torque_space"], named[reference], joints)
    tie = (
        window_widths is not None
        and ratio < 1.0 / TAKE_BELOW
        and fit.resolves(parameters)
        and fit.narrower(parameters, window_widths)
    )
    taken = ratio < TAKE_BELOW or tie
    if window_widths is None and (fit.timing_sensitive() or not (fit.resolves(parameters) or ratio < ALONE_BELOW)):
        taken = False  # the window fit may add something (the timing replayed, a value resolved): it runs
    return TorqueSpaceChoice(fit, taken, ratio, folds, named, reference)


PROBLEM_FORM_ABOVE = 1.05
"""The problem's own form (a `body_mass` scales its body) replaces the full form (all 10 inertials of each body)
when the full form predicts the time-blocked folds of the training rows above this multiple of the problem form's
torque (geometric mean over the joints): there the full form leaves masses to the base parameters and fits the
noise. On arm3 of test_identify_arm (link masses off, the file's shapes right) the full form's folds are at
1.80x, and the problem form resolves each mass; on the real Panda log (the file's link inertias far off) at 0.80x.
A tie keeps the full form: on bench_torque_coverage's iiwa (a payload's mass off) the two tie at 1.00x, and the
problem form's intervals held the truth for 86 % of the values (its payload mass's for 20 %, half as wide as
the errors' spread) where the full form's held 90 %."""


def choose_form(
    spec: mujoco.MjSpec, parameters: Sequence[ParameterSpec], model: mujoco.MjModel, rows: TorqueRows, check: TorqueRows
) -> tuple[str, float]:
    """The torque-space fit's form (`FORMS`) for `rows`, by time-blocked folds of `check` (the least-squares fits,
    as `choose_window`): the problem's when it has a body to scale and the full form predicts the folds above
    `PROBLEM_FORM_ABOVE` x its torque; with the full form's ratio to it (nan when there is no choice)."""
    if not scaled_bodies(model, parameters):
        return "full", float("nan")
    scores = {}
    for form in FORMS:
        cv, folds = cross_validated(spec, parameters, model, rows, check, physical=False, form=form)
        if folds < 2:
            return "full", float("nan")
        scores[form] = {str(k): float(v) for k, v in enumerate(cv["torque_space"])}
    ratio = torque_ratio(scores["full"], scores["problem"], list(scores["full"]))
    return ("problem" if ratio > PROBLEM_FORM_ABOVE else "full"), ratio


def torque_ratio(rms: dict[str, float], reference: dict[str, float], joints: Sequence[str]) -> float:
    """One model's joint torque RMS over a reference model's: the geometric mean over `joints` of the ratios."""
    return float(np.exp(np.mean([np.log(max(rms[j], 1e-12) / max(reference[j], 1e-12)) for j in joints])))


def velocity_lag_s(model: mujoco.MjModel, maps: Sequence[sd.JointMap], parts: Sequence[Part]) -> float:
    """How much earlier the friction columns read the records' own velocity (`measured_velocity`): the median over
    the parts of each one's lag, in seconds, where it was re-timed; 0 where none was."""
    lags = []
    for samples, _ in parts:
        lag = velocity_lag_samples(model, maps, samples)
        if abs(lag) >= VELOCITY_LAG_SAMPLES:
            lags.append(lag * float(np.median(np.diff(samples.time_ns))) * 1e-9)
    return float(np.median(lags)) if lags else 0.0


def choose_bands(
    spec: mujoco.MjSpec, parameters: Sequence[ParameterSpec], model: mujoco.MjModel, rows: TorqueRows
) -> np.ndarray:
    """Each DOF's friction band (one of `FRICTION_BANDS_RAD_S`) by time-blocked folds of `rows`: least-squares fits
    with every DOF's friction loss over one band, each scored as `mj_inverse` reads the MJCF it writes on the
    filtered states (`TorqueRows.inverse`); a joint whose friction loss the problem frees takes the narrowest band
    unless a wider one predicts its folds `WIDER_BAND_GAIN` better (the rest keep the first)."""
    joints = list(ArmRegressor(model, JOINT_TERMS).joint_names)
    freed = {p.target for p in parameters if p.kind == "joint_frictionloss" and not p.frozen}
    bands = np.full(len(joints), FRICTION_BANDS_RAD_S[0])
    if not rows.coulomb or not freed & set(joints):
        return bands
    scores: dict[float, np.ndarray] = {}
    for band in FRICTION_BANDS_RAD_S:
        same = np.full(len(joints), band)
        scored = rows.with_bands(same, inverse=True)
        cv, folds = cross_validated(spec, parameters, model, rows.with_bands(same), scored, physical=False)
        if folds < 2:
            return bands
        scores[band] = cv["torque_space"]
    for dof, joint in enumerate(joints):
        if joint in freed:
            best = min(FRICTION_BANDS_RAD_S, key=lambda band: scores[band][dof])
            narrowest = scores[FRICTION_BANDS_RAD_S[0]][dof]
            bands[dof] = best if scores[best][dof] < (1.0 - WIDER_BAND_GAIN) * narrowest else FRICTION_BANDS_RAD_S[0]
    return bands


def choose_window(
    spec: mujoco.MjSpec,
    parameters: Sequence[ParameterSpec],
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    parts: Sequence[Part],
    check: TorqueRows | None = None,
) -> TorqueRows | None:
    """The rows at the one of `FIT_WINDOWS_S` whose least-squares torque-space fit predicts the time-blocked
    folds of `check` (default: the rows through `SCORE_WINDOW_S`) best (geometric mean over the joints of each
    joint's RMS relative to the best window's; the physical refit is left out of this choice, for time); None
    when no window gives rows."""
    check = torque_fit_rows(model, maps, parts, SCORE_WINDOW_S) if check is None else check
    candidates: dict[float, TorqueRows] = {}
    scores: dict[float, np.ndarray] = {}
    for window in FIT_WINDOWS_S:  # the scoring window's rows are computed once (the regressor is the cost)
        same = check is not None and window == check.filter_window_s
        rows = check if same else torque_fit_rows(model, maps, parts, window)
        if rows is None:
            continue
        candidates[window] = rows
        if check is None:
            continue
        cv, folds = cross_validated(spec, parameters, model, rows, check, physical=False)
        if folds >= 2:
            scores[window] = cv["torque_space"]
    if not candidates:
        return None
    if len(scores) < 2:
        return next(iter(candidates.values()))
    rms = np.array(list(scores.values()))
    score = np.exp(np.mean(np.log(np.maximum(rms, 1e-12) / np.maximum(rms.min(axis=0), 1e-12)), axis=1))
    return candidates[list(scores)[int(np.argmin(score))]]


def fit_on_parts(
    spec: mujoco.MjSpec,
    parameters: Sequence[ParameterSpec],
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    parts: Sequence[Part],
    window: float | None = None,
    intervals: bool = False,
) -> TorqueSpaceFit | None:
    """The torque-space fit on records (`torque_check` parts) from `spec` (the window fit) with the ridge toward
    `model` (the model file), its filter window `window` (default: `choose_window`'s), with `intervals` or none;
    None when the problem frees nothing it fits or the records are short."""
    rows = (
        choose_window(spec, parameters, model, maps, parts)
        if window is None
        else torque_fit_rows(model, maps, parts, window)
    )
    return None if rows is None else fit_torque_space(spec, parameters, rows, model, intervals=intervals)


@dataclass(frozen=True, eq=False)
class FitSetup:
    """What the fit frees in a model (`spec`, which it writes into, compiled): the regressor, the fitted bodies
    (all 10 inertials each) and joint terms, the free columns, the ridge's centre `theta0` (every column, then
    each scaled body's mass change), which free values must be >= 0 (`signed`), and the
    bodies whose mass alone is fitted, their shape kept (`scaled`: a `body_mass` as the problem defines it, each
    one more column after the regressor's: its 10 inertials per kg times the change of its mass)."""

    spec: mujoco.MjSpec
    model: mujoco.MjModel
    arm: ArmRegressor
    bodies: list[int]
    terms: set[tuple[str, str]]
    free: np.ndarray
    theta0: np.ndarray
    signed: np.ndarray
    mass_bounds: np.ndarray  # (fitted then scaled bodies, 2): each one's mass bounds, kg (the problem's)
    scaled: tuple[int, ...] = ()
    shapes: np.ndarray = field(default_factory=lambda: np.zeros((0, 10)))  # each scaled body's inertials per kg

    def name(self, column: int) -> str:
        """A column's name: the regressor's, or "<body>.mass" for a scaled body's."""
        n = self.arm.n_params
        return self.arm.names[column] if column < n else f"{self.model.body(self.scaled[column - n]).name}.mass"

    def masses(self, theta: np.ndarray) -> np.ndarray:
        """The fitted, then the scaled bodies' masses in `theta` (every column)."""
        own = [theta[10 * self.arm.bodies.index(b)] for b in self.bodies]
        return np.array(
            own + [self.model.body_mass[b] + theta[self.arm.n_params + k] for k, b in enumerate(self.scaled)]
        )

    def outside_mass_bounds(self, theta: np.ndarray) -> bool:
        """Whether a fitted or scaled body's mass in `theta` (every column) lies outside its bounds."""
        masses = self.masses(theta)
        return bool(np.any(masses < self.mass_bounds[:, 0]) or np.any(masses > self.mass_bounds[:, 1]))

    def expanded(self, theta: np.ndarray) -> np.ndarray:
        """The regressor's parameters of `theta` (every column): each scaled body's 10 at its mass."""
        out = np.array(theta[: self.arm.n_params], dtype=float)
        for k, b in enumerate(self.scaled):
            at = 10 * self.arm.bodies.index(b)
            out[at : at + 10] = self.shapes[k] * (self.model.body_mass[b] + theta[self.arm.n_params + k])
        return out

    def value_columns(self) -> dict[str, int]:
        """Each written mass's and joint term's free column (its position among `free`), keyed as the intervals:
        a scaled body's mass change, a fitted body's mass, a joint term."""
        position = {int(c): k for k, c in enumerate(self.free)}
        n = self.arm.n_params
        out = {self.model.body(b).name: position[n + k] for k, b in enumerate(self.scaled)}
        out |= {self.model.body(b).name: position[10 * self.arm.bodies.index(b)] for b in self.bodies}
        for joint, term in sorted(self.terms):
            out[f"{joint}.{MUJOCO_TERM[term]}"] = position[self.arm.names.index(f"{joint}.{term}")]
        return out

    def residual(self, rows: TorqueRows) -> tuple[np.ndarray, np.ndarray]:
        """(the free columns of the regressor, the torque less the fixed model's `theta0`) on `rows`."""
        n = self.arm.n_params
        w = rows.w[:, :, self.free[self.free < n]]
        if self.scaled:
            at = [10 * self.arm.bodies.index(b) for b in self.scaled]
            extra = np.stack([rows.w[:, :, a : a + 10] @ shape for a, shape in zip(at, self.shapes)], axis=2)
            w = np.concatenate([w, extra], axis=2)
        return w, rows.tau - rows.w @ self.expanded(self.theta0)


def fit_setup(
    spec: mujoco.MjSpec, parameters: Sequence[ParameterSpec], prior: mujoco.MjModel | None, form: str = "full"
) -> FitSetup | None:
    """The fit's setup for `parameters` on `spec`, its ridge centred on `prior` (default `spec`'s values), in
    `form` (`FORMS`); None when the problem frees nothing it fits."""
    model = spec.copy().compile()
    arm = ArmRegressor(model, JOINT_TERMS, coulomb_band_rad_s=FRICTIONLOSS_BAND_RAD_S)
    scaled = scaled_bodies(model, parameters) if form == "problem" else []
    bodies = fitted_bodies(model, parameters, skip=scaled)
    terms = {
        (p.target, TERM_OF_KIND[p.kind])
        for p in parameters
        if p.kind in TERM_OF_KIND and not p.frozen and f"{p.target}.{TERM_OF_KIND[p.kind]}" in arm.names
    }
    free = [arm.bodies.index(b) * 10 + i for b in bodies for i in range(len(INERTIAL_NAMES))]
    free += [arm.names.index(f"{j}.{t}") for j, t in sorted(terms)]
    free += [arm.n_params + k for k in range(len(scaled))]
    if not free:
        return None
    own_values = arm.true_parameters()
    theta0 = np.concatenate([own_values, np.zeros(len(scaled))])
    free = np.array(sorted(free))
    own = free[free < arm.n_params]
    if prior is not None:  # the ridge's centre: what the data hardly see stays as the model file has it
        theta0[own] = ArmRegressor(prior, JOINT_TERMS).true_parameters()[own]
        theta0[arm.n_params :] = [prior.body_mass[b] - model.body_mass[b] for b in scaled]
    names = [arm.names[c] if c < arm.n_params else "" for c in free]
    signed = np.array(
        [c < arm.n_params and c >= 10 * len(arm.bodies) and not n.endswith(".offset") for c, n in zip(free, names)]
    )
    bounds = mass_bounds(model, bodies + scaled, parameters)
    shapes = np.array([own_values[10 * arm.bodies.index(b) :][:10] / model.body_mass[b] for b in scaled])
    return FitSetup(
        spec, model, arm, bodies, terms, free, theta0, signed, bounds, tuple(scaled), shapes.reshape(-1, 10)
    )


FORMS = ("full", "problem")
"""The torque-space fit's forms: `full` frees all 10 inertials of every body the problem frees (one per welded
group); `problem` keeps to the problem's own structure where it is linear (a `body_mass` scales its body, the
shape kept: one column), all 10 inertials for the other body kinds."""


def scaled_bodies(model: mujoco.MjModel, parameters: Sequence[ParameterSpec]) -> list[int]:
    """The bodies the problem frees only by a `body_mass` (none of `body_mass_com`, `body_inertia`), with mass."""
    kinds: dict[int, set[str]] = {}
    for p in parameters:
        if p.kind in BODY_KINDS and not p.frozen:
            kinds.setdefault(int(model.body(p.target).id), set()).add(p.kind)
    return sorted(b for b, k in kinds.items() if k == {"body_mass"} and model.body_mass[b] > 0 and model.body_weldid[b])


def mass_bounds(model: mujoco.MjModel, bodies: Sequence[int], parameters: Sequence[ParameterSpec]) -> np.ndarray:
    """(bodies, 2) each fitted body's mass bounds, kg: its parameter's (`min`/`max`, or the bounds from physics);
    1e-3-1e3x its file mass when the problem gives none."""
    given = {
        int(model.body(p.target).id): (p.min_value[0], p.max_value[0])
        for p in parameters
        if p.kind in BODY_KINDS and not p.frozen and p.min_value is not None
    }
    out = np.zeros((len(bodies), 2))
    for k, b in enumerate(bodies):
        own = max(float(model.body_mass[b]), 1e-6)
        lo, hi = given.get(b, (1e-3 * own, 1e3 * own))
        lo = max(float(lo), 1e-9)  # a mass the log-Cholesky coordinates can hold
        out[k] = lo, max(float(hi), (1.0 + 1e-6) * lo)
    return out


@dataclass(frozen=True)
class JointNormals:
    """Each joint's normal equations of the free columns on the residual torque (nv, F, F), (nv, F), its sum of
    squares (nv,), over `rows` rows: every fit on these rows is a small solve on them (the folds of a
    cross-validation subtract their left-out rows')."""

    gram: np.ndarray
    rhs: np.ndarray
    squares: np.ndarray
    rows: int

    @classmethod
    def of(cls, w: np.ndarray, r: np.ndarray) -> JointNormals:
        """Of the free columns `w` (rows, nv, F) and residual `r` (rows, nv)."""
        by_joint = w.transpose(1, 0, 2)
        gram = by_joint.transpose(0, 2, 1) @ by_joint
        rhs = (by_joint.transpose(0, 2, 1) @ r.T[:, :, None])[:, :, 0]
        return cls(gram, rhs, np.sum(r**2, axis=0), len(r))

    def minus(self, other: JointNormals) -> JointNormals:
        return JointNormals(
            self.gram - other.gram, self.rhs - other.rhs, self.squares - other.squares, self.rows - other.rows
        )

    def weighted(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(G, h) with joint j's equations weighted by weights[j]."""
        w2 = np.asarray(weights, dtype=float) ** 2
        return np.tensordot(w2, self.gram, axes=1), w2 @ self.rhs

    def rms(self, step: np.ndarray) -> np.ndarray:
        """Each joint's residual RMS after `step` (free values from theta0)."""
        sq = self.squares - 2.0 * self.rhs @ step + np.einsum("a,jab,b->j", step, self.gram, step)
        return np.sqrt(np.maximum(sq, 0.0) / max(self.rows, 1))


def fit_torque_space(
    spec: mujoco.MjSpec,
    parameters: Sequence[ParameterSpec],
    rows: TorqueRows,
    prior: mujoco.MjModel | None = None,
    intervals: bool = True,
    physical: bool = True,
    form: str = "full",
    late_tau: np.ndarray | None = None,
) -> TorqueSpaceFit | None:
    """The torque-space fit on `rows`, written into a copy of `spec`, whose values the parameters it does not fit
    keep; the ridge pulls toward `prior` (the same model's file values; default `spec`'s); refitted physically
    consistent when the least squares leaves a body non-physical (with `physical`; else projected); with
    `intervals`, block-bootstrap half-widths, and with `late_tau` (the rows' torque read half a sample later,
    `late_torque`) how far each value moves with it; in `form` (`FORMS`). None when the problem frees nothing it
    fits."""
    setup = fit_setup(spec, parameters, prior, form)
    if setup is None or len(rows.index) < 50:
        return None
    w, r = setup.residual(rows)
    theta, weights, held = _solve(setup, JointNormals.of(w, r), physical)
    fit = _fitted(setup, theta, held, rows, len(rows.index))
    if not intervals:
        return fit
    spread = _bootstrap(w, r, weights, held, setup.theta0[setup.free], _time_blocks(rows.index * rows.dt_s))
    fit = replace(fit, intervals=_intervals(setup, spread))
    if late_tau is None:
        return fit
    gram, rhs = JointNormals.of(w, late_tau - rows.tau).weighted(weights)
    moves = _value_changes(setup, _held_step(gram, rhs, held, np.zeros(len(held))))
    widened = {  # the torque's timing within half a sample: its move added in quadrature to the value's own
        key: (float(np.hypot(half[0], moves[key])), *half[1:]) if key in moves else half
        for key, half in fit.intervals.items()
    }
    return replace(fit, intervals=widened, timing=moves)


def _fitted(setup: FitSetup, theta: np.ndarray, held: np.ndarray, rows: TorqueRows, n_rows: int) -> TorqueSpaceFit:
    """The solved values (a fit on `n_rows` of `rows`) written into a copy of the setup's spec, the friction
    losses over `rows`' bands."""
    zeroed = tuple(setup.name(c) for c in setup.free[held])
    fit = _written(setup, theta, n_rows, zeroed, bands=rows.bands if len(rows.bands) else None)
    return replace(fit, filter_window_s=rows.filter_window_s)


def _solve(setup: FitSetup, normals: JointNormals, physical: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fit on `normals`: (every column's value, the joint weights, the free values held at 0)."""
    s = setup
    free, theta0 = s.free, s.theta0
    weights = _joint_weights(normals)
    gram, rhs = normals.weighted(weights)
    held = np.zeros(len(free), dtype=bool)  # joint terms held at 0 (they came out negative)
    while True:  # an active set: a negative damping, friction loss or armature is held at 0 and the rest refitted
        delta = _held_step(gram, rhs, held, theta0[free])
        negative = s.signed & ~held & (theta0[free] + delta < 0)
        if not negative.any():
            break
        held[np.flatnonzero(negative)[np.argmin((theta0[free] + delta)[negative])]] = True
    theta = theta0.copy()
    theta[free] += delta
    bodies_at = [10 * s.arm.bodies.index(b) for b in s.bodies]
    unphysical = any(physical_body(theta[k : k + 10])[3] for k in bodies_at) or s.outside_mass_bounds(theta)
    unphysical = unphysical or bool(np.any(s.masses(theta)[len(s.bodies) :] <= 0))
    if physical and unphysical:
        theta[free] = _physical_refit(gram, rhs + gram @ theta0[free], setup, theta[free])
        held = s.signed & (theta[free] <= 0.0)
    return theta, weights, held


@dataclass(frozen=True)
class Spread:
    """Block-bootstrap replicates of the free columns' values (replicates x free) and each column's resolution:
    the diagonal of (G + ridge)^-1 G on unit-norm columns, 1 where the data alone set the value, 0 where the
    ridge's prior does."""

    replicates: np.ndarray
    resolution: np.ndarray


RESOLVED = 0.9
"""A value whose columns' resolution is below this is not given an interval (the prior holds part of it)."""
BOOTSTRAP_REPLICATES = 200
BLOCK_S = (0.25, 1.0)
"""Bootstrap blocks: 1 s (several filter windows) when the record has 20 of them, else 1/20 of it, at least 0.25 s."""


def _joint_weights(normals: JointNormals) -> np.ndarray:
    """Each joint's weight: 1 / its residual RMS after an unweighted ridge fit (the shoulder's N m would otherwise
    set the wrist's mN m)."""
    rms = normals.rms(_ridge_solve(*normals.weighted(np.ones(len(normals.squares)))))
    return 1.0 / np.maximum(rms, 1e-9 * max(rms.max(), 1e-12))


def _ridge_solve(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """The solution with the ridge on unit-norm columns."""
    scale = _column_scale(gram)
    return np.linalg.solve(gram / np.outer(scale, scale) + RIDGE * np.eye(len(scale)), rhs / scale) / scale


def _column_scale(gram: np.ndarray) -> np.ndarray:
    scale = np.sqrt(np.maximum(np.diag(gram), 0.0))
    return np.maximum(scale, 1e-3 * np.median(scale[scale > 0])) if np.any(scale > 0) else np.ones(len(scale))


def _held_step(gram: np.ndarray, rhs: np.ndarray, held: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The step from `start` with the `held` columns' values set to 0 and the rest fitted (normal equations of the
    step)."""
    delta = np.where(held, -start, 0.0)
    kept = ~held
    delta[kept] = _ridge_solve(gram[np.ix_(kept, kept)], rhs[kept] - gram[np.ix_(kept, held)] @ delta[held])
    return delta


def _physical_refit(gram: np.ndarray, rhs: np.ndarray, setup: FitSetup, start: np.ndarray) -> np.ndarray:
    """The free values refitted physically consistent (`linear.physically_consistent`: every body one a density
    can make, damping, friction loss and armature >= 0) on the weighted normal equations of the free values (`gram`,
    `rhs`) with the ridge toward `theta0`, from the least-squares values `start` (projecting a least-squares
    solution afterwards cost up to 1.3x the torque error on the real Panda's held-out joints)."""
    free, theta0, n_bodies = setup.free, setup.theta0, len(setup.bodies)
    lo = np.where(np.r_[np.zeros(10 * n_bodies, dtype=bool), setup.signed[10 * n_bodies :]], 0.0, -np.inf)
    hi = np.full(len(free), np.inf)
    for k in range(n_bodies):  # log-Cholesky coordinates: the mass within its bounds, lengths e^-15-e^5 m
        lo[10 * k], hi[10 * k] = 0.5 * np.log(setup.mass_bounds[k])
        lo[10 * k + 1 : 10 * k + 4], hi[10 * k + 1 : 10 * k + 4] = -15.0, 5.0
    for k, b in enumerate(setup.scaled):  # a scaled body's mass change, its mass within its bounds
        lo[len(free) - len(setup.scaled) + k], hi[len(free) - len(setup.scaled) + k] = (
            setup.mass_bounds[n_bodies + k] - setup.model.body_mass[b]
        )
    return physically_consistent(gram, rhs, start, theta0[free], n_bodies, lo, hi, RIDGE)


def _time_blocks(t_s: np.ndarray) -> np.ndarray:
    """Each row's bootstrap block (contiguous runs of rows in time, from the rows' times in seconds)."""
    duration = float(t_s[-1] - t_s[0])
    block_s = min(BLOCK_S[1], max(BLOCK_S[0], duration / 20.0))
    return np.unique(((t_s - t_s[0]) // block_s).astype(int), return_inverse=True)[1]


def _bootstrap(
    w: np.ndarray, r: np.ndarray, weights: np.ndarray, held: np.ndarray, start: np.ndarray, blocks: np.ndarray
) -> Spread:
    """Replicates of the fitted values by resampling time blocks with replacement (per-block normal equations
    summed: a replicate costs one small solve). The held columns are fitted free in the replicates, so their
    spread says how far from 0 the data could put them."""
    grams, rhs = block_normal_equations(*weigh_joints(weights, w, r), blocks)
    n_blocks = len(grams)
    gram = grams.sum(axis=0)
    scale = _column_scale(gram)
    unit = gram / np.outer(scale, scale)
    resolution = np.diag(np.linalg.solve(unit + RIDGE * np.eye(len(scale)), unit))
    rng = np.random.default_rng(0)
    kept = ~held
    out = np.empty((BOOTSTRAP_REPLICATES, len(start)))
    for k in range(BOOTSTRAP_REPLICATES):
        counts = np.bincount(rng.integers(0, n_blocks, n_blocks), minlength=n_blocks).astype(float)
        g, h = np.tensordot(counts, grams, axes=1), counts @ rhs
        out[k] = start + _ridge_solve(g, h)
        if held.any():  # the kept columns as the fit has them: the held ones at 0
            step = np.where(held, -start, 0.0)
            step[kept] = _ridge_solve(g[np.ix_(kept, kept)], h[kept] - g[np.ix_(kept, held)] @ step[held])
            out[k, kept] = start[kept] + step[kept]
    return Spread(out, resolution)


def _intervals(setup: FitSetup, spread: Spread) -> dict[str, tuple[float, ...]]:
    """95 % half-widths (1.96 sd over the replicates) of the values the fit writes, as the MJCF holds them (a
    scaled body's: its mass); inf where a value's columns are not resolved by the data alone."""
    arm, model = setup.arm, setup.model
    position = {int(c): k for k, c in enumerate(setup.free)}
    single = {setup.model.body(b).name for b in setup.bodies}  # the rest: one value, one column each
    out: dict[str, tuple[float, ...]] = {}
    for key, at in setup.value_columns().items():
        if key not in single:
            half = 1.96 * float(np.std(spread.replicates[:, at]))
            out[key] = (half if spread.resolution[at] >= RESOLVED else float("inf"),)
    for b in setup.bodies:
        k = arm.bodies.index(b)
        cols = [position[c] for c in range(10 * k, 10 * k + 10)]
        values = []
        for rep in spread.replicates:
            m, c, tensor, _ = physical_body(rep[cols])
            values.append([m, *c, *tensor_entries(tensor)])
        half = 1.96 * np.std(np.array(values), axis=0)
        res = spread.resolution[cols]
        needs = [res[:1]] + [res[:4]] * 3 + [res] * 6  # mass; com (m and m c); tensor (all ten)
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)
        out[name] = tuple(float(h) if n.min() >= RESOLVED else float("inf") for h, n in zip(half, needs))
    return out


def _value_changes(setup: FitSetup, step: np.ndarray) -> dict[str, float]:
    """|change| of each mass and joint term the fit writes for a `step` of the free columns, keyed as the
    intervals."""
    return {key: abs(float(step[at])) for key, at in setup.value_columns().items()}


def _written(
    setup: FitSetup,
    theta: np.ndarray,
    rows: int,
    zeroed: tuple[str, ...],
    bands: np.ndarray | None = None,
) -> TorqueSpaceFit:
    """theta's (every column) fitted bodies (projected), scaled bodies and joint terms in a copy of the setup's
    spec (damping, friction loss and armature >= 0), each friction loss over its
    DOF's band in `bands` (default `FRICTIONLOSS_BAND_RAD_S`)."""
    model, arm, terms = setup.model, setup.arm, setup.terms
    out = setup.spec.copy()
    fitted: dict[str, tuple[float, np.ndarray, np.ndarray]] = {}
    projected: list[str] = []
    scaled_bounds = setup.mass_bounds[len(setup.bodies) :]
    for b, fitted_mass, bounds in zip(setup.scaled, setup.masses(theta)[len(setup.bodies) :], scaled_bounds):
        name = model.body(b).name
        body = out.body(name)
        m = float(np.clip(fitted_mass, *bounds))  # the least squares alone (no physical refit) can leave them
        if m != fitted_mass:
            projected.append(name)
        full = has_full_inertia(body)
        scale_mass(body, m, float(model.body_mass[b]), np.array(body.fullinertia if full else body.inertia), full)
        inertials = setup.shapes[setup.scaled.index(b)] * m
        fitted[name] = (m, inertials[1:4] / m, physical_body(inertials)[2])
    for b in setup.bodies:
        k = arm.bodies.index(b)
        m, c, tensor, moved = physical_body(theta[10 * k : 10 * k + 10])
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)
        body = out.body(name)
        body.mass, body.ipos = m, c
        body.fullinertia = tensor_entries(tensor)
        body.iquat, body.inertia = [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
        body.explicitinertial = True
        fitted[name] = (m, c, tensor)
        if moved:
            projected.append(name)
    joints: dict[str, dict[str, float]] = {}
    mujoco_name = MUJOCO_TERM
    for joint, term in sorted(terms):
        value = float(theta[arm.names.index(f"{joint}.{term}")])
        if term in ("viscous", "coulomb", "armature"):
            value = max(value, 0.0)  # held at 0 already when the fit made it negative
        target = out.joint(joint)
        if term == "viscous":
            target.damping[0] = value
        elif term == "coulomb":  # its band below, once the inertias are written
            target.frictionloss = value
        elif term == "armature":
            target.armature = value
        else:
            motor = joint_motor(out, joint)
            set_effort_offset(motor, value, float(motor.gear[0]))
        joints.setdefault(joint, {})[mujoco_name[term]] = value
    written_bands = {}
    friction = [joint for joint, term in sorted(terms) if term == "coulomb"]
    if friction:  # over the band the fit read it with: R needs the written model's inverse inertia
        invweight0 = out.compile().dof_invweight0
        for joint in friction:
            dof = int(model.jnt_dofadr[model.joint(joint).id])
            band = FRICTIONLOSS_BAND_RAD_S if bands is None else float(bands[arm.joint_names.index(joint)])
            hold_band(out.joint(joint), joints[joint]["frictionloss"], band, float(invweight0[dof]))
            written_bands[joint] = band
    held = tuple(f"{name.split('.')[0]}.{mujoco_name[name.split('.')[1]]}" for name in zeroed)
    return TorqueSpaceFit(fitted, joints, tuple(projected), held, out, rows, friction_bands=written_bands)


def outside_bounds(fit: TorqueSpaceFit, parameters: Sequence[ParameterSpec]) -> list[str]:
    """The problem's parameters whose value in the fitted model lies outside their bounds (the window fit keeps
    to them; the torque-space fit keeps only to the mass bounds)."""
    out = []
    for p in parameters:
        if p.frozen or p.min_value is None or p.kind not in FITTED_KINDS:
            continue
        value = model_value(fit.spec, p)
        if any(v < lo or v > hi for v, lo, hi in zip(value, p.min_value, p.max_value)):
            out.append(f"{p.name} {value[0]:.4g}" if len(value) == 1 else p.name)
    return out
