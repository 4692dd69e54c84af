"""A real Franka Panda: held-out joint torque of the model file, the identified MJCF and the regression with
smooth friction, as logged and on the robot's recovered clock, next to the robot's published model (issue 23).

The log is not in this repository (GPL-3.0): the excitation run of Gaz et al., "Dynamic Identification of the
Franka Emika Panda Robot With Retrieval of Feasible Parameters Using Penalty-Based Optimization" (RA-L 2019),
~21 s at ~1 kHz with joint torque sensors, in their public repository marcocognetti/FrankaEmikaPandaDynModel
under `matlab/data/Exciting_Traj/Trajectory_1/rbt_log/` (`exciting_traj_{time,positions,velocity,torques}.txt`).
Give that folder as the first argument or in `PANDA_LOG_DIR`; without it the bench says "skipped" and exits 0.
The published model (their link parameters and sigmoid friction) is typed in below from the paper's repository.

The user's model is MuJoCo Menagerie's Panda (`franka_emika_panda/panda.xml`) as a user makes it
identifiable: meshes dropped, fingers rigid, a torque motor per joint (`PANDA_MJCF` or `--model`; default
`test/data/real/panda_menagerie/panda_torque.xml`).

Every model is scored by one scorer, the issue's: held out = the rows after 70 % of the record's duration,
less its last 0.1 s; positions and torques on the recovered 1 ms clock (repeated rows dropped, cubic spline);
a 4th-order Butterworth low-pass at 10 Hz forwards and backwards on both; velocity and acceleration by central
differences; predicted torque = `mj_inverse` of the model plus its motors' bias (the published model: its
rigid body by `mj_inverse` plus its friction function; the regression: its own prediction).

`identify` runs the problem with `window_fit: auto`: its MJCF is the torque-space fit
(`core/identify/stages/torque_fit.py`: every freed link's 10 inertial parameters and per joint damping, friction
loss, armature and an effort offset, by weighted least squares on the measured torque, physically consistent,
armature below zero where the joint-space inertia stays positive definite) when it predicts time-blocked folds of
the training rows below 0.9x the start values' torque, and the window fit is then not run; else the window fit
runs and the two are weighed: the bench prints which, and the result's own held-out table has them
(docs/identification_arm.md, "A real Franka Panda").

The base-parameter fit (`core/linear/base_fit.py`, issue 32) is fitted on each time base's first 70 %
(the record splined onto a 1 ms grid, the scorer's 10 Hz filter and central differences) and scored as the MJCF
it writes, through `mj_inverse`. Next to it, a FIGAROH peer on the same rows in the same run (FIGAROH's
regressor on pinocchio, its QR base parameters, ordinary then per-joint weighted least squares, then its
physically consistent fit: `solve_direct_effort_fit`, a pseudo-inertia LMI per link by picos/cvxopt, as its
`physical_fit` stage runs it; scored through its regressor, the smallest eigenvalue of its joint-space inertia on
the training poses printed): it needs `pip install -r bench/requirements.txt`, else one line says it is skipped.
The issue's own figures for FIGAROH's physically consistent fit stay as a reference row, not computed here. FIGAROH's
physical fit bounds neither friction nor armature (its joint-space inertia comes out indefinite); the peer as the
issue describes it (friction and armature >= 0, masses 0.5-2x the URDF's) is one more row (`issue_peer`: the same
regressor, rows and weights, the LMI per link by picos/cvxopt).
The identified MJCF's RMS less the issue peer's is printed per joint with a 95 % interval from a block bootstrap
over 0.5 s stretches of the held-out rows (how sure an "at or below" is on 6 s of data).
The published model is also scored from its closed forms when the paper repository's C++ sources are at hand
(`--published-src`).

    .venv/bin/python bench/bench_panda.py [LOG_DIR] [--model PANDA_XML] [--bases logged,clock] [--max-iters N]
        [--quick] [--no-identify] [--keep DIR] [--published-src DIR] [--cutoff-hz 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np
from scipy.interpolate import CubicSpline
from scipy.signal import butter, filtfilt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sysid_ros.core.bags import save_npz
from sysid_ros.core.identify import (
    identify,
    load_source,
    problem_from_dict,
    torque_validation,
    write_results,
)
from sysid_ros.core.identify.rollout import sequences as sd
from sysid_ros.core.signals import JointSamples

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = REPO / "test/data/real/panda_menagerie/panda_torque.xml"
JOINTS = tuple(f"joint{k}" for k in range(1, 8))
PUBLISHED_RMS_NM = (0.205, 0.654, 0.186, 0.288, 0.113, 0.094, 0.058)
"""The published model's held-out RMS per joint as the issue gives it."""
FIGAROH_PHYSICAL_RMS_NM = (0.160, 0.243, 0.138, 0.220, 0.074, 0.044, 0.057)
"""FIGAROH's LMI physically consistent fit (picos), held out, as issue 32 gives it."""
PERIOD_S = 0.001
ISSUE_PEER = "issue 32's peer: FIGAROH's regressor, LMI, friction and armature >= 0, masses 0.5-2x (same rows)"
HELD_OUT_FROM, TAIL_S = 0.7, 0.1

# Gaz et al. 2019, the identified model: per link mass (kg), centre of mass (m, link frame) and inertia about
# it (Ixx Ixy Ixz Iyy Iyz Izz, kg m^2); the link frames are Menagerie's link1..link7 (links 1-7 of its
# Panda carry these same numbers but for link 1's z centre, which no joint feels). Friction per joint:
# tau_f = A / (1 + exp(-alpha (qd + phi))) - A / (1 + exp(-alpha phi)).
GAZ_MASS = (4.970684, 0.646926, 3.228604, 3.587895, 1.225946, 1.666555, 0.735522)
GAZ_COM = (
    (3.875e-03, 2.081e-03, 0.0),
    (-3.141e-03, -2.872e-02, 3.495e-03),
    (2.7518e-02, 3.9252e-02, -6.6502e-02),
    (-5.317e-02, 1.04419e-01, 2.7454e-02),
    (-1.1953e-02, 4.1065e-02, -3.8437e-02),
    (6.0149e-02, -1.4117e-02, -1.0517e-02),
    (1.0517e-02, -4.252e-03, 6.1597e-02),
)
GAZ_INERTIA = (
    (7.0337e-01, -1.3900e-04, 6.7720e-03, 7.0661e-01, 1.9169e-02, 9.1170e-03),
    (7.9620e-03, -3.9250e-03, 1.0254e-02, 2.8110e-02, 7.0400e-04, 2.5995e-02),
    (3.7242e-02, -4.7610e-03, -1.1396e-02, 3.6155e-02, -1.2805e-02, 1.0830e-02),
    (2.5853e-02, 7.7960e-03, -1.3320e-03, 1.9552e-02, 8.6410e-03, 2.8323e-02),
    (3.5549e-02, -2.1170e-03, -4.0370e-03, 2.9474e-02, 2.2900e-04, 8.6270e-03),
    (1.9640e-03, 1.0900e-04, -1.1580e-03, 4.3540e-03, 3.4100e-04, 5.4330e-03),
    (1.2516e-02, -4.2800e-04, -1.1960e-03, 1.0027e-02, -7.4100e-04, 4.8150e-03),
)
GAZ_FRICTION_A = (0.54615, 0.87224, 0.64068, 1.2794, 0.83904, 0.30301, 0.56489)
GAZ_FRICTION_PHI = (0.039533, 0.025882, -0.04607, 0.036194, 0.026226, -0.021047, 0.0035526)
GAZ_FRICTION_ALPHA = (5.1181, 9.0657, 10.136, 5.5903, 8.3469, 17.133, 10.336)


def load_log(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(time_ns, positions, velocities, torques) as logged, every row."""
    read = {
        name: np.loadtxt(folder / f"exciting_traj_{name}.txt") for name in ("time", "positions", "velocity", "torques")
    }
    t = np.round(read["time"] * 1e9).astype(np.int64)
    return t, *(read[name].reshape(len(t), 7) for name in ("positions", "velocity", "torques"))


def clock_ticks(time_ns: np.ndarray, q: np.ndarray, v: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows kept, their tick on a 1 ms clock): repeated rows dropped, each new state on its stamp's nearest
    millisecond, the later one kept when two land on one tick."""
    same = np.all(q[1:] == q[:-1], axis=1) & np.all(v[1:] == v[:-1], axis=1) & np.all(tau[1:] == tau[:-1], axis=1)
    keep = np.flatnonzero(np.r_[True, ~same])
    ticks = np.round((time_ns[keep] - time_ns[0]) * 1e-9 / PERIOD_S).astype(np.int64)
    last = np.r_[ticks[1:] != ticks[:-1], True]
    return keep[last], ticks[last]


class Scorer:
    """The issue's scorer on one log: filtered q, qd, qdd and measured torque on the held-out rows."""

    def __init__(self, time_ns: np.ndarray, q: np.ndarray, v: np.ndarray, tau: np.ndarray) -> None:
        keep, ticks = clock_ticks(time_ns, q, v, tau)
        grid = np.arange(int(ticks[-1]) + 1) * PERIOD_S
        at = ticks * PERIOD_S
        b, a = butter(4, 10.0, fs=1.0 / PERIOD_S)
        qf = filtfilt(b, a, CubicSpline(at, q[keep], axis=0)(grid), axis=0)
        self.tau = filtfilt(b, a, CubicSpline(at, tau[keep], axis=0)(grid), axis=0)
        qd = np.gradient(qf, PERIOD_S, axis=0)
        qdd = np.gradient(qd, PERIOD_S, axis=0)
        span = grid[-1]
        rows = (grid >= HELD_OUT_FROM * span) & (grid <= span - TAIL_S)
        self.q, self.qd, self.qdd, self.tau = qf[rows], qd[rows], qdd[rows], self.tau[rows]
        self.collapsed = int(len(time_ns) - len(keep))
        self.filled = len(grid) - len(keep)

    def inverse(self, model: mujoco.MjModel) -> np.ndarray:
        """Per row, mj_inverse's joint torque less what the motors give at zero control (their bias)."""
        data = mujoco.MjData(model)
        dofs = [int(model.jnt_dofadr[model.joint(j).id]) for j in JOINTS]
        out = np.empty_like(self.q)
        for k in range(len(self.q)):
            data.qpos[dofs], data.qvel[dofs], data.qacc[dofs] = self.q[k], self.qd[k], self.qdd[k]
            data.ctrl[:] = 0.0
            mujoco.mj_inverse(model, data)
            mujoco.mj_fwdActuation(model, data)
            out[k] = (data.qfrc_inverse - data.qfrc_actuator)[dofs]
        return out

    def rms(self, predicted: np.ndarray) -> np.ndarray:
        return np.sqrt(np.mean((self.tau - predicted) ** 2, axis=0))

    def rms_difference(self, a: np.ndarray, b: np.ndarray, block_s: float = 0.5, replicates: int = 2000):
        """Per joint, RMS(a) - RMS(b) on these rows and its 95 % interval by a block bootstrap over `block_s`
        stretches of the held-out rows (the errors are correlated over a filter's span and a motion's phase)."""
        sq_a, sq_b = (self.tau - a) ** 2, (self.tau - b) ** 2
        n = int(round(block_s / PERIOD_S))
        blocks = len(self.tau) // n
        per_a = sq_a[: blocks * n].reshape(blocks, n, -1).sum(axis=1)
        per_b = sq_b[: blocks * n].reshape(blocks, n, -1).sum(axis=1)
        picks = np.random.default_rng(0).integers(0, blocks, (replicates, blocks))
        diff = np.sqrt(per_a[picks].sum(axis=1) / (blocks * n)) - np.sqrt(per_b[picks].sum(axis=1) / (blocks * n))
        return self.rms(a) - self.rms(b), np.percentile(diff, 2.5, axis=0), np.percentile(diff, 97.5, axis=0)


def published_model(user_model: Path) -> mujoco.MjModel:
    """Gaz et al.'s rigid body on the user's kinematics: no hand, no armature, damping or friction loss."""
    spec = mujoco.MjSpec.from_file(str(user_model))
    for child in spec.body("link7").bodies:
        spec.delete(child)
    for k in range(7):
        body = spec.body(f"link{k + 1}")
        ixx, ixy, ixz, iyy, iyz, izz = GAZ_INERTIA[k]
        body.mass, body.ipos = GAZ_MASS[k], GAZ_COM[k]
        body.fullinertia = [ixx, iyy, izz, ixy, ixz, iyz]
        body.explicitinertial = True
        joint = spec.joint(JOINTS[k])
        joint.armature, joint.frictionloss = 0.0, 0.0
        joint.damping[0] = 0.0
    return spec.compile()


def published_friction(qd: np.ndarray) -> np.ndarray:
    a, phi, alpha = (np.array(x) for x in (GAZ_FRICTION_A, GAZ_FRICTION_PHI, GAZ_FRICTION_ALPHA))
    return a / (1 + np.exp(-alpha * (qd + phi))) - a / (1 + np.exp(-alpha * phi))


def closed_form_torque(src: Path, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
    """The published model's rigid body from its closed forms (`MassMatrix.cpp`, `CoriolisMatrix.cpp`,
    `GravityVector.cpp` of the paper's repository, read from the user's copy at run time, nothing kept), with
    `cq466 = cq466` read as cq4 * cq66: M(q) qdd + C(q, qd) qd + g(q), vectorised over rows."""
    import re

    env = {
        "cos": np.cos,
        "sin": np.sin,
        "pow": np.power,
        "q": q,
        "dq": qd,
        "M": np.zeros((len(q), 7, 7)),
        "S": np.zeros((len(q), 7, 7)),
        "g": np.zeros((len(q), 7)),
    }
    for name in ("MassMatrix", "CoriolisMatrix", "GravityVector"):
        text = (src / f"{name}.cpp").read_text()
        body = text[text.index("{", text.index(")")) + 1 : text.rindex("return")]
        lines = []
        for statement in body.split(";"):
            line = " ".join(statement.split()).replace("cq466 = cq466", "cq466 = cq4*cq66")
            if not line or line.startswith(("static", "Eigen::", "//")):
                continue
            line = re.sub(r"\b(dq|q)\((\d)\)", r"\1[:, \2]", line)
            line = re.sub(r"\bq\[(\d)\]", r"q[:, \1]", line)
            line = re.sub(r"^(M|S)\((\d),(\d)\) =", r"\1[:, \2, \3] =", line)
            line = re.sub(r"= M\((\d),(\d)\)$", r"= M[:, \1, \2]", line)
            lines.append(re.sub(r"^g\[(\d)\] =", r"g[:, \1] =", line))
        exec(compile("\n".join(lines), name, "exec"), env)
    return np.einsum("nij,nj->ni", env["M"], qdd) + np.einsum("nij,nj->ni", env["S"], qd) + env["g"]


def base_fit_rows(kind: str, time_ns: np.ndarray, q: np.ndarray, v: np.ndarray, tau: np.ndarray, cutoff_hz: float):
    """Every row of the record on a 1 ms grid (`clock`: the recovered ticks; `logged`: the stamps as logged),
    filtered as the scorer filters, and the training mask (the first 70 %)."""
    from sysid_ros.core.linear import filtered_rows

    if kind == "clock":
        keep, ticks = clock_ticks(time_ns, q, v, tau)
        at = ticks * PERIOD_S
    else:
        keep = np.flatnonzero(np.r_[True, np.diff(time_ns) > 0])
        at = (time_ns[keep] - time_ns[0]) * 1e-9
    grid = np.arange(int(np.floor(at[-1] / PERIOD_S)) + 1) * PERIOD_S
    rows = filtered_rows(
        CubicSpline(at, q[keep], axis=0)(grid), CubicSpline(at, tau[keep], axis=0)(grid), PERIOD_S, cutoff_hz
    )
    return rows, grid < HELD_OUT_FROM * grid[-1]


def figaroh_peer(rows, train: np.ndarray, scorer: Scorer) -> dict[str, tuple[np.ndarray, float]] | str:
    """FIGAROH's regressor on pinocchio (example-robot-data's Panda, fingers locked) with viscous + Coulomb
    friction, armature and an offset per joint; base columns by its QR; ordinary, then per-joint weighted least
    squares (rows scaled), then its physically consistent fit on the same weighted rows (`figaroh_physical`).
    (label: (held-out prediction, wall s)), or why it was skipped."""
    try:
        import warnings
        from importlib import metadata
        from types import SimpleNamespace

        import pinocchio as pin
        from figaroh.tools.qrdecomposition import get_baseIndex
        from figaroh.tools.regressor import build_regressor_basic
    except ImportError as exc:
        return f"skipped: the FIGAROH peer needs bench/requirements.txt ({exc})"
    urdf = next(
        (
            f.locate()
            for f in metadata.files("example-robot-data") or ()
            if str(f).endswith("panda_description/urdf/panda.urdf")
        ),
        None,
    )
    if urdf is None:
        return "skipped: example-robot-data has no panda.urdf"
    full = pin.buildModelFromUrdf(str(urdf))
    locked = [full.getJointId(n) for n in ("panda_finger_joint1", "panda_finger_joint2")]
    model = pin.buildReducedModel(full, locked, pin.neutral(full))
    robot = SimpleNamespace(model=model, data=model.createData())
    config = {
        "has_friction": True,
        "has_actuator_inertia": True,
        "has_joint_offset": True,
        "is_joint_torques": True,
        "act_idxv": list(range(7)),
    }
    t0 = time.perf_counter()
    index = np.flatnonzero(train)
    w = build_regressor_basic(robot, rows.q[index], rows.qd[index], rows.qdd[index], config)  # joint-major rows
    y = rows.tau[index].T.ravel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = list(get_baseIndex(w, [str(k) for k in range(w.shape[1])]))
    wb = w[:, base]
    out = {}
    phi = np.linalg.lstsq(wb, y, rcond=None)[0]
    n = len(index)
    sigma = np.sqrt(np.mean(((y - wb @ phi).reshape(7, n)) ** 2, axis=1))
    scale = np.repeat(1.0 / sigma, n)
    phi_w = np.linalg.lstsq(wb * scale[:, None], y * scale, rcond=None)[0]
    wall = time.perf_counter() - t0
    held = build_regressor_basic(robot, scorer.q, scorer.qd, scorer.qdd, config)
    for label, p in (("ordinary LS", phi), ("weighted LS", phi_w)):
        out[f"FIGAROH / pinocchio, {label} ({len(base)} base parameters)"] = (
            scorer.rms((held[:, base] @ p).reshape(7, -1).T),
            wall,
        )
    t0 = time.perf_counter()
    physical = figaroh_physical(model, w, y, scale)
    if isinstance(physical, str):
        print(physical)
    else:
        theta, how = physical
        wall = time.perf_counter() - t0
        low = figaroh_inertia_eigenvalue(model, theta, rows.q[index[:: max(1, n // 200)]])
        print(
            f"FIGAROH physically consistent fit: {how}; its joint-space inertia (armature included) on the training "
            f"poses: smallest eigenvalue {low:.3g} kg m^2" + (" (not positive definite)" if low <= 0 else "")
        )
        out["FIGAROH / pinocchio, physically consistent (LMI, cvxopt; same rows, weights)"] = (
            (held @ theta).reshape(7, -1).T,
            wall,
        )
    t0 = time.perf_counter()
    peer = issue_peer(model, w, y, scale)
    if isinstance(peer, str):
        print(peer)
    else:
        (bounded, ridge), wall = peer, time.perf_counter() - t0
        low = figaroh_inertia_eigenvalue(model, bounded, rows.q[index[:: max(1, n // 200)]])
        print(
            f"issue 32's peer: solved with the ridge {ridge:g}; its joint-space inertia's smallest eigenvalue on "
            f"the training poses {low:.3g} kg m^2"
        )
        out[ISSUE_PEER] = ((held @ bounded).reshape(7, -1).T, wall)
    return out


def issue_peer(model, w: np.ndarray, y: np.ndarray, row_weight: np.ndarray) -> tuple[np.ndarray, float] | str:
    """The physically consistent peer as issue 32 describes it ("its LMI physical-consistency fit with
    friction/armature >= 0 and link masses 0.5-2x the URDF's"; FIGAROH's own `physical_fit` stage bounds neither
    friction nor armature): FIGAROH's standard regressor and weighted rows, each link's pseudo-inertia positive
    semidefinite, link masses 0.5-2x the URDF's, viscous and Coulomb friction and armature >= 0, offsets free;
    the weighted least squares on unit-norm columns reduced to their R factor, with a ridge toward the URDF's
    values (zero for the joint terms) for what the rows do not see, solved by picos/cvxopt: with the ridge 1e-5,
    else 1e-4, else 1e-3 (cvxopt fails on this problem with a small ridge: a division by zero in its scaling).
    (the standard parameters, the ridge that solved), or why there are none."""
    try:
        import picos as pc
        from figaroh.identification.parameter import get_standard_parameters
    except ImportError as exc:
        return f"issue 32's peer: skipped ({exc})"
    nv = model.nv
    prior = np.r_[np.array(list(get_standard_parameters(model).values())), np.zeros(4 * nv)]
    a, b = w * row_weight[:, None], y * row_weight
    norms = np.linalg.norm(a, axis=0)
    norms[norms == 0] = 1.0
    _, r = np.linalg.qr(a / norms)
    z = np.linalg.lstsq(r.T, (a / norms).T @ b, rcond=None)[0]  # Q' b without forming Q
    size = max(float(np.linalg.norm(z)), 1e-12)  # the objective of order one (cvxopt's scaling)
    failures = []
    for ridge in (1e-5, 1e-4, 1e-3):
        problem = pc.Problem()
        u = pc.RealVariable("u", len(prior))  # theta x the column norms
        t = pc.RealVariable("t", 1)
        misfit = pc.Constant(r / size) * u - pc.Constant(z / size)
        problem.add_constraint(abs(misfit // (np.sqrt(ridge) / size * (u - pc.Constant(prior * norms)))) <= t)
        theta = [u[k] * (1.0 / norms[k]) for k in range(len(prior))]
        for j in range(nv):
            m, mx, my, mz, ixx, ixy, iyy, ixz, iyz, izz = theta[10 * j : 10 * j + 10]
            half = 0.5 * (ixx + iyy + izz)
            pseudo = pc.block(
                [
                    [half - ixx, -ixy, -ixz, mx],
                    [-ixy, half - iyy, -iyz, my],
                    [-ixz, -iyz, half - izz, mz],
                    [mx, my, mz, m],
                ]
            )
            problem.add_constraint((1.0 / max(prior[10 * j], 1e-6)) * pseudo >> 0)  # in units of the URDF mass
            problem.add_constraint(m >= 0.5 * prior[10 * j])
            problem.add_constraint(m <= 2.0 * prior[10 * j])
        for k in range(10 * nv, 13 * nv):  # fv, fs, Ia
            problem.add_constraint(u[k] >= 0)
        problem.set_objective("min", t)
        try:
            problem.solve(solver="cvxopt")
        except Exception as exc:  # the solver failing numerically
            failures.append(f"ridge {ridge:g}: {type(exc).__name__}")
            continue
        return np.array(u.value).ravel() / norms, ridge
    return "issue 32's peer: cvxopt failed (" + "; ".join(failures) + ")"


def figaroh_inertia_eigenvalue(model, theta: np.ndarray, q: np.ndarray) -> float:
    """The smallest eigenvalue over the poses `q` of pinocchio's joint-space inertia with FIGAROH's fitted links
    (standard parameters) and its fitted actuator inertia on the diagonal."""
    import pinocchio as pin

    fitted = model.copy()
    for j in range(1, model.njoints):
        fitted.inertias[j] = pin.Inertia.FromDynamicParameters(theta[10 * (j - 1) : 10 * j])
    data = fitted.createData()
    nv = model.nv
    armature = theta[10 * nv + 2 * nv : 10 * nv + 3 * nv]  # after fv and fs
    low = np.inf
    for pose in q:
        m = pin.crba(fitted, data, pose)
        m = np.triu(m) + np.triu(m, 1).T
        low = min(low, float(np.linalg.eigvalsh(m + np.diag(armature))[0]))
    return low


def figaroh_physical(model, w: np.ndarray, y: np.ndarray, row_weight: np.ndarray) -> tuple[np.ndarray, str] | str:
    """FIGAROH's physically consistent fit as its `physical_fit` selection stage runs it
    (`figaroh.identification.selection.run_physical_fit` with its defaults): the standard regressor with the columns
    its elimination drops (squared norm < 1e-6) zeroed, the weighted least squares' row weights, the nominal
    (URDF) parameters as the prior, `solve_direct_effort_fit` (a pseudo-inertia LMI per link, masses >= 1e-6, a
    1e-6 prior weight; no bounds on friction, armature or offsets) by cvxopt. When cvxopt fails on that problem
    (seen on the clock rows: a singular KKT system near the optimum, then a math domain error), once more with the
    row weights scaled by 1 / sqrt(rows) and the prior weight by 1 / rows: the same minimiser, an objective of
    order one. (standard parameters, how it was solved), or why there is none."""
    try:
        from figaroh.identification import physical_fit as pf
        from figaroh.identification.parameter import get_standard_parameters
    except ImportError as exc:
        return f"FIGAROH physically consistent fit: skipped ({exc})"
    standard = get_standard_parameters(model)
    joints = list(model.names[1:])
    names = list(standard) + [f"{b}_{j}" for b in ("fv", "fs", "Ia", "off") for j in joints]
    if len(names) != w.shape[1]:
        return f"FIGAROH physically consistent fit: skipped ({len(names)} names for {w.shape[1]} columns)"
    prior = np.r_[np.array(list(standard.values())), np.zeros(len(names) - len(standard))]
    ys = np.where(np.sum(w**2, axis=0) < 1e-6, 0.0, w)
    failures = []
    for scale in (1.0, 1.0 / np.sqrt(len(y))):
        policy = pf.PhysicalPolicy(prior_weight=pf.PhysicalPolicy().prior_weight * scale**2)
        how = "as FIGAROH runs it" if scale == 1.0 else "rescaled (row weights / sqrt(rows)), after: " + failures[0]
        try:
            problem = pf.build_problem(ys, y, names, joints, prior=prior, row_weight=row_weight * scale, policy=policy)
            record = pf.solve_direct_effort_fit(problem, solver="cvxopt")
        except Exception as exc:  # the solver stack (picos, cvxopt) missing or failing
            return f"FIGAROH physically consistent fit: could not run ({type(exc).__name__}: {exc})"
        if record.theta is not None and record.accepted:
            return record.theta, how
        infeasible = [j for j, f in record.feasibility.items() if not f["ok"]]
        failures.append(
            f"solver {record.solver_status}: {record.exception or 'links not feasible: ' + ', '.join(infeasible)}"
        )
    return "FIGAROH physically consistent fit: no accepted solution (" + "; then ".join(failures) + ")"


def problem(model: Path, data: Path, span_s: float, max_iters: int) -> dict:
    """The problem a user writes from docs/identification.md: every link mass and joint term free, bounds from
    physics, an effort offset on every joint, 0.25 s windows; trained on the first 70 %, validated on the rest."""
    cut = HELD_OUT_FROM * span_s
    params = [{"name": f"link{k}_mass", "kind": "body_mass", "body": f"link{k}"} for k in range(1, 8)]
    params.append({"name": "hand_mass", "kind": "body_mass", "body": "hand"})
    for j in JOINTS:
        params += [
            {"name": f"{j}_{kind}", "kind": f"joint_{kind}", "joint": j}
            for kind in ("damping", "frictionloss", "armature", "effort_offset")
        ]
    return {
        "name": "panda_identified",
        "model": str(model),
        "joints": list(JOINTS),
        "training": [{"npz": str(data), "control": "effort", "end_s": cut}],
        "validation": [{"npz": str(data), "control": "effort", "start_s": cut, "end_s": span_s - TAIL_S}],
        "segment_s": 0.25,
        "initial_state": "measured",
        "observe": ["position"],
        "noise": {"position_rad": 1.0e-4},
        "warm_start": True,
        "window_fit": "auto",
        "parameters": params,
        "optimizer": {"backend": "mujoco", "max_iters": max_iters, "quiet": True},
    }


def time_base(kind: str, time_ns: np.ndarray, q: np.ndarray, v: np.ndarray, tau: np.ndarray) -> JointSamples:
    """`logged`: every row with its polled stamp; `clock`: repeated rows dropped, stamped on the 1 ms ticks."""
    if kind == "logged":
        return JointSamples(JOINTS, time_ns, q, v, tau)
    keep, ticks = clock_ticks(time_ns, q, v, tau)
    return JointSamples(JOINTS, int(time_ns[0]) + ticks * 1_000_000, q[keep], v[keep], tau[keep])


def regression_torque(fit, scorer: Scorer) -> np.ndarray:
    """The regression with friction on the scorer's rows (its Coulomb term on the filtered velocity)."""
    return fit.fit.predicted_torque(fit.arm, scorer.q, scorer.qd, scorer.qdd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir", nargs="?", default=os.environ.get("PANDA_LOG_DIR"))
    parser.add_argument("--model", default=os.environ.get("PANDA_MJCF", str(DEFAULT_MODEL)))
    parser.add_argument("--bases", default="logged,clock", help="time bases to identify on (logged, clock)")
    parser.add_argument("--max-iters", type=int, default=30)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="2 window-fit iterations (to iterate on the torque-space fit; the full bench runs 30)",
    )
    parser.add_argument("--keep", help="write each run's results into this folder")
    parser.add_argument("--no-identify", action="store_true", help="only the scorer's rows (no identify runs)")
    parser.add_argument(
        "--published-src",
        help="the published model's C++ folder (cpp/panda_dyn_model_example/src of "
        "the paper's repository; default: found from LOG_DIR in that repository, or LOG_DIR/src)",
    )
    parser.add_argument("--cutoff-hz", type=float, default=10.0, help="the base-parameter fit's filter")
    args = parser.parse_args()
    folder = Path(args.log_dir) if args.log_dir else None
    if folder is None or not (folder / "exciting_traj_torques.txt").is_file():
        print(
            "skipped: no local copy of the Panda log (give its rbt_log folder as the argument or in PANDA_LOG_DIR; "
            "see this file's docstring)"
        )
        return 0
    model_path = Path(args.model)
    if not model_path.is_file():
        print(f"skipped: no Panda model at {model_path} (give --model or PANDA_MJCF)")
        return 0
    time_ns, q, v, tau = load_log(folder)
    scorer = Scorer(time_ns, q, v, tau)
    span_s = (time_ns[-1] - time_ns[0]) * 1e-9
    print(
        f"log: {len(time_ns)} rows over {span_s:.2f} s; on the 1 ms clock {scorer.collapsed} rows dropped (repeated, "
        f"or an older state on a tick), {scorer.filled} ticks without a state (spline); held out "
        f"{len(scorer.q)} rows"
    )
    nominal = mujoco.MjModel.from_xml_path(str(model_path))
    published = published_model(model_path)
    rows: dict[str, np.ndarray] = {
        "published model (issue)": np.array(PUBLISHED_RMS_NM),
        "published model (this scorer)": scorer.rms(scorer.inverse(published) + published_friction(scorer.qd)),
        "published rigid body, no friction": scorer.rms(scorer.inverse(published)),
        "nominal (model file)": scorer.rms(scorer.inverse(nominal)),
    }
    src = (
        Path(args.published_src)
        if args.published_src
        else next(
            (
                p
                for p in (
                    folder.parents[4] / "cpp/panda_dyn_model_example/src" if len(folder.parents) > 4 else None,
                    folder / "src",
                )
                if p is not None and (p / "CoriolisMatrix.cpp").is_file()
            ),
            None,
        )
    )
    if src is not None and (src / "CoriolisMatrix.cpp").is_file():
        rows["published model, its closed forms (this scorer)"] = scorer.rms(
            closed_form_torque(src, scorer.q, scorer.qd, scorer.qdd) + published_friction(scorer.qd)
        )
    else:
        print("published closed forms: skipped (give --published-src)")
    walls: dict[str, float] = {}
    peers: dict[str, np.ndarray] = {}  # by time base: issue 32 peer's held-out prediction
    for kind in args.bases.split(","):
        from sysid_ros.core.linear import fit_base_parameters

        t0, c0 = time.perf_counter(), time.process_time()
        fit_rows, train = base_fit_rows(kind, time_ns, q, v, tau, args.cutoff_hz)
        fit = fit_base_parameters(mujoco.MjSpec.from_file(str(model_path)), fit_rows, train=train)
        walls[kind], cpu = time.perf_counter() - t0, time.process_time() - c0
        rows[f"base-parameter fit, physical, MJCF ({kind})"] = scorer.rms(scorer.inverse(fit.spec.compile()))
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            (Path(args.keep) / f"base_fit_{kind}.xml").write_text(fit.spec.to_xml())
        print(
            f"{kind}: base-parameter fit in {walls[kind]:.1f} s wall, {cpu:.1f} s CPU ({fit.rows} rows, rank "
            f"{fit.base.rank} of {len(fit.names)}, {len(fit.intervals)} intervals; armature "
            + " ".join(f"{fit.value(f'{j}.armature'):.3f}" for j in JOINTS)
            + "".join(f"; {note}" for note in fit.notes)
            + ")"
        )
        peer = figaroh_peer(fit_rows, train, scorer)
        if isinstance(peer, str):
            print(peer)
        else:
            for label, (predicted, wall) in peer.items():
                rows[f"{label} ({kind})"] = scorer.rms(predicted)
            if ISSUE_PEER in peer:
                peers[kind] = peer[ISSUE_PEER][0]
            took = ", ".join(f"{label.split(', ')[1].split(' (')[0]} {wall:.1f} s" for label, (_, wall) in peer.items())
            print(f"{kind}: FIGAROH peer fitted, wall ({took})")
    rows["reference: FIGAROH physically consistent, the issue's figures (not computed here)"] = np.array(
        FIGAROH_PHYSICAL_RMS_NM
    )
    if args.quick:
        args.max_iters = 2
    own: dict[str, dict] = {}
    versus: dict[str, tuple] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in [] if args.no_identify else args.bases.split(","):
            data = save_npz(Path(tmp) / f"panda_{kind}.npz", time_base(kind, time_ns, q, v, tau))
            doc = problem(model_path, data, span_s, args.max_iters)
            t0 = time.perf_counter()
            result = identify(problem_from_dict(doc, Path(tmp)))
            out = Path(args.keep) / kind if args.keep else Path(tmp) / f"out_{kind}"
            paths = write_results(result, out, force=True)
            on_bound = sum("rests on its" in w for w in result.warnings)
            space = result.torque_space
            against = "start_values" if "window_fit" in result.metrics else "window_fit"  # the window fit not run
            print(
                f"{kind}: identified in {time.perf_counter() - t0:.0f} s, verdict {result.verdict}, "
                f"{len(result.warnings)} warnings ({on_bound} values on bounds); the MJCF carries the "
                f"{result.metrics.get('identified_model')}"
                + (
                    f" (torque-space fit: chosen at {space[f'training_torque_ratio_to_{against}']:.2f}x the "
                    f"{against.replace('_', ' ')}' torque over {space.get('cross_validation_folds')} time-blocked "
                    "folds of the training rows, "
                    f"{space[f'held_out_torque_ratio_to_{against}']:.2f}x on the held-out rows, "
                    f"filter window {space['filter_window_s']} s, {space['form']} form (the full form's folds at "
                    f"{space['full_form_ratio'] or float('nan'):.2f}x the problem form's), "
                    f"{len(space['projected_onto_physical'])} bodies projected; friction bands "
                    + " ".join(f"{b:g}" for b in space["friction_band_rad_s"].values())
                    + f" rad/s; velocity read {1e3 * space['velocity_lag_s']:.1f} ms earlier)"
                    if space
                    else ""
                )
            )
            identified = scorer.inverse(mujoco.MjModel.from_xml_path(str(paths["mjcf"])))
            rows[f"identified MJCF ({kind})"] = scorer.rms(identified)
            if kind in peers:
                versus[kind] = scorer.rms_difference(identified, peers[kind])
            fit = result_friction_fit(doc, Path(tmp))
            if fit is not None:
                rows[f"regression ({kind})"] = scorer.rms(regression_torque(fit, scorer))
            own[kind] = result.metrics.get("held_out_torque_rms_nm", {})
    published_own = rows["published model (this scorer)"]
    print("\nheld-out joint torque RMS, N m (x the published model, this scorer)")
    print("| model | " + " | ".join(JOINTS) + " |")
    print("| --- |" + " --- |" * len(JOINTS))
    for label, rms in rows.items():
        print(f"| {label} | " + " | ".join(f"{r:.3f} ({r / p:.2f}x)" for r, p in zip(rms, published_own)) + " |")
    for kind, (diff, lo, hi) in versus.items():
        each = ", ".join(f"{j} {d:+.4f} [{a:+.4f}, {b:+.4f}]" for j, d, a, b in zip(JOINTS, diff, lo, hi))
        print(f"\nidentified MJCF less issue 32's peer ({kind}), N m, 95 % block-bootstrap interval (0.5 s): {each}")
    for kind, table in own.items():
        print(
            f"\nthe result's own held-out torque table ({kind}; {table.get('held_out')}, {table.get('samples')} rows)"
        )
        for label in ("nominal", "start_values", "window_fit", "torque_space", "identified", "regression_friction"):
            if label in table:
                print(f"  {label:20s} " + " ".join(f"{table[label][j]:.3f}" for j in JOINTS))
    return 0


def result_friction_fit(doc: dict, base_dir: Path):
    """The regression with friction of this problem's data (the torque check's fit, done again)."""
    problem_ = problem_from_dict(doc, base_dir)
    model = mujoco.MjModel.from_xml_path(str(problem_.model))
    maps = sd.joint_maps(model, problem_.joints, problem_.mapping)
    train = [("train", load_source(src, problem_.joints)) for src in problem_.training]
    val = [("val", load_source(src, problem_.joints)) for src in problem_.validation]
    check = torque_validation(model, maps, train, val)
    return None if check is None else check.friction


if __name__ == "__main__":
    sys.exit(main())
