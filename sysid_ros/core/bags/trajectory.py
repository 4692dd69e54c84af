"""Expand `trajectory_msgs/JointTrajectory` messages into setpoints over time, as ros2_control's joint
trajectory controller samples them: linear between points without velocities, cubic Hermite with
velocities, quintic with velocities and accelerations.

Pure numpy on integer-nanosecond times; one trajectory at a time, each pre-empting the previous one
from the moment it is received.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from ..signals import grid_points


@dataclass(frozen=True)
class TrajectoryMsg:
    """One received trajectory, already on the bag's time base.

    receipt_ns: when the controller got it; start_ns: header stamp, or receipt when the stamp is 0.
    point_ns: time_from_start of each point (int64, ns); positions/velocities/accelerations:
    (P, len(joints)), velocities / accelerations None when the message does not give them for every point.
    """

    joints: tuple[str, ...]
    receipt_ns: int
    start_ns: int
    point_ns: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None
    accelerations: np.ndarray | None = None


def sample_trajectory(
    msg: TrajectoryMsg, grid_ns: np.ndarray, q0: np.ndarray, v0: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Position and velocity setpoints of `msg` at `grid_ns` (all >= receipt), starting from state (q0, v0).

    Before the first point the controller moves from the state at receipt to the first point; after
    the last point it holds the last point. `q0`/`v0` may hold NaN (unknown): those joints then hold the
    first point until it is due.
    """
    points_ns = (msg.start_ns + msg.point_ns).astype(np.int64)
    if np.any(np.diff(points_ns) <= 0):
        raise DataError("trajectory points are not strictly increasing in time_from_start", receipt_ns=msg.receipt_ns)
    cubic = msg.velocities is not None
    quintic = cubic and msg.accelerations is not None
    zeros = np.zeros((1, len(msg.joints)))
    if points_ns[0] > msg.receipt_ns:  # first move from the state at receipt to the first point
        knots = np.concatenate([[msg.receipt_ns], points_ns]).astype(np.int64)
        pos = np.vstack([np.where(np.isnan(q0), msg.positions[0], q0), msg.positions])
        vel = np.vstack([np.where(np.isnan(v0), 0.0, v0), msg.velocities]) if cubic else None
        acc = np.vstack([zeros, msg.accelerations]) if quintic else None
    else:  # stamped in the past: sample inside the trajectory
        knots, pos, vel, acc = points_ns, msg.positions, msg.velocities, msg.accelerations
    seg = np.maximum(np.searchsorted(knots, grid_ns, side="right") - 1, 0)
    out_q = np.empty((len(grid_ns), len(msg.joints)))
    out_v = np.zeros((len(grid_ns), len(msg.joints)))
    last = len(knots) - 1
    after = seg >= last
    out_q[after] = pos[last]
    if cubic:
        out_v[after] = vel[last]
    inside = ~after
    if inside.any():
        k = seg[inside]
        t0, t1 = knots[k], knots[k + 1]
        h_ns = (t1 - t0).astype(np.float64)
        s = ((grid_ns[inside] - t0).astype(np.float64) / h_ns)[:, None]
        h = (h_ns * 1e-9)[:, None]
        p0, p1 = pos[k], pos[k + 1]
        if quintic:
            out_q[inside], out_v[inside] = _quintic(p0, vel[k], acc[k], p1, vel[k + 1], acc[k + 1], h, s * h)
        elif cubic:
            w0, w1 = vel[k], vel[k + 1]
            s2, s3 = s * s, s * s * s
            out_q[inside] = (
                (2 * s3 - 3 * s2 + 1) * p0 + (s3 - 2 * s2 + s) * h * w0 + (-2 * s3 + 3 * s2) * p1 + (s3 - s2) * h * w1
            )
            out_v[inside] = (
                (6 * s2 - 6 * s) / h * p0
                + (3 * s2 - 4 * s + 1) * w0
                + (-6 * s2 + 6 * s) / h * p1
                + (3 * s2 - 2 * s) * w1
            )
        else:
            out_q[inside] = p0 + s * (p1 - p0)
            out_v[inside] = (p1 - p0) / h
    return out_q, out_v


def _quintic(p0, v0, a0, p1, v1, a1, h, tau) -> tuple[np.ndarray, np.ndarray]:
    """Position and velocity of the quintic matching (p, v, a) at both ends of a segment of length h, at tau."""
    d = p1 - p0
    c3 = (20 * d - (8 * v1 + 12 * v0) * h - (3 * a0 - a1) * h**2) / (2 * h**3)
    c4 = (-30 * d + (14 * v1 + 16 * v0) * h + (3 * a0 - 2 * a1) * h**2) / (2 * h**4)
    c5 = (12 * d - 6 * (v1 + v0) * h - (a0 - a1) * h**2) / (2 * h**5)
    q = p0 + tau * (v0 + tau * (a0 / 2 + tau * (c3 + tau * (c4 + tau * c5))))
    v = v0 + tau * (a0 + tau * (3 * c3 + tau * (4 * c4 + tau * 5 * c5)))
    return q, v


def expand(
    messages: list[TrajectoryMsg], joints: tuple[str, ...], period_ns: int, initial_q: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Setpoints (times, positions, velocities) for `joints` from a sequence of trajectories.

    Each trajectory runs on a grid of `period_ns` from its receipt until the next one is received (the
    last until its final point). Joints a trajectory does not name hold their previous setpoint.
    `initial_q` is the measured position at the first receipt (NaN/None: unknown).
    """
    if period_ns <= 0:
        raise DataError("setpoint period must be positive")
    cols = {name: k for k, name in enumerate(joints)}
    q_prev = np.full(len(joints), np.nan) if initial_q is None else np.asarray(initial_q, float).copy()
    v_prev = np.zeros(len(joints))
    times, qs, vs = [], [], []
    for i, msg in enumerate(messages):
        end = (
            messages[i + 1].receipt_ns
            if i + 1 < len(messages)
            else max(msg.receipt_ns, int(msg.start_ns + msg.point_ns[-1]))
        )
        grid_points(end - msg.receipt_ns, period_ns, "a trajectory's setpoints")
        grid = np.arange(msg.receipt_ns, end, period_ns, dtype=np.int64)
        if i + 1 == len(messages) and (len(grid) == 0 or grid[-1] != end):
            grid = np.append(grid, np.int64(end))
        if len(grid) == 0:
            continue
        idx = np.array([cols[j] for j in msg.joints], dtype=np.intp)
        q_sel, v_sel = sample_trajectory(msg, grid, q_prev[idx], v_prev[idx])
        q_all = np.repeat(q_prev[None, :], len(grid), axis=0)
        v_all = np.zeros((len(grid), len(joints)))
        q_all[:, idx] = q_sel
        v_all[:, idx] = v_sel
        times.append(grid)
        qs.append(q_all)
        vs.append(v_all)
        # State handed to the next trajectory: the setpoint at its receipt time.
        if i + 1 < len(messages):
            nxt = np.array([messages[i + 1].receipt_ns], dtype=np.int64)
            q_next, v_next = sample_trajectory(msg, nxt, q_prev[idx], v_prev[idx])
            q_prev[idx], v_prev[idx] = q_next[0], v_next[0]
        else:
            q_prev, v_prev = q_all[-1].copy(), v_all[-1].copy()
    if not times:
        return np.zeros(0, dtype=np.int64), np.zeros((0, len(joints))), np.zeros((0, len(joints)))
    return np.concatenate(times), np.vstack(qs), np.vstack(vs)
