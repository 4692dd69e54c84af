"""Command topics of a bag -> `JointCommands`: `std_msgs/Float64MultiArray` (position, velocity or effort
forward commands, joint order from config) and `trajectory_msgs/JointTrajectory` (expanded to setpoints).

Times go on the same `TimeBase` as the joint states, so feedback and commands never misalign.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BagError, ConfigError, DataError
from ..signals import JointCommands, JointSamples
from .fastcdr import f64_array_decoder
from .read import BagSource
from .timing import TimeBase
from .trajectory import TrajectoryMsg, expand

FLOAT64_ARRAY = "std_msgs/msg/Float64MultiArray"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
COMMAND_TYPES = (FLOAT64_ARRAY, JOINT_TRAJECTORY)
NS = 1_000_000_000


@dataclass(frozen=True)
class TrajectorySetpoints:
    """Position setpoints expanded from trajectories, and the velocity setpoints that go with them."""

    position: JointCommands
    velocity: JointCommands


def guess_interface(topic: str) -> str | None:
    """`effort`, `velocity` or `position` from a ros2_control controller's topic name, else None."""
    lowered = topic.lower()
    for interface in ("effort", "velocity", "position"):
        if interface in lowered:
            return interface
    return None


def read_commands(
    bag: str | Path,
    topic: str,
    *,
    joint_names: list[str] | tuple[str, ...] | None = None,
    interface: str | None = None,
    time_base: TimeBase | None = None,
    setpoint_period_s: float = 0.001,
    initial_positions: JointSamples | None = None,
    distro: str | None = None,
) -> JointCommands:
    """Read one command topic. Float64MultiArray needs `joint_names` (the controller's joint order);
    a JointTrajectory is expanded into position setpoints (see `read_trajectory`).

    `time_base` should be the one the joint states were read on (`JointStateRead.timing.time_base`);
    without it record times are used.
    """
    with BagSource(bag, distro=distro) as src:
        (conn,) = src.connections_for([topic])[:1]
        msgtype = conn.msgtype
    if msgtype == JOINT_TRAJECTORY:
        return read_trajectory(
            bag,
            topic,
            joint_names=joint_names,
            time_base=time_base,
            setpoint_period_s=setpoint_period_s,
            initial_positions=initial_positions,
            distro=distro,
        ).position
    if msgtype != FLOAT64_ARRAY:
        raise BagError(
            f"unsupported command type {msgtype} (supported: {', '.join(COMMAND_TYPES)})", bag=str(bag), topic=topic
        )
    return read_array_commands(
        bag, topic, joint_names=joint_names, interface=interface, time_base=time_base, distro=distro
    )


def read_array_commands(
    bag: str | Path,
    topic: str,
    *,
    joint_names: list[str] | tuple[str, ...] | None,
    interface: str | None = None,
    time_base: TimeBase | None = None,
    distro: str | None = None,
) -> JointCommands:
    """Forward commands (`Float64MultiArray`, one value per joint in `joint_names` order), held until the next."""
    interface = interface or guess_interface(topic)
    if interface is None:
        raise ConfigError("cannot tell the command interface from the topic name; pass interface=", topic=topic)
    if not joint_names:
        raise ConfigError(
            "Float64MultiArray commands carry no joint names: configure joint_names (the controller's joint order)",
            topic=topic,
            bag=str(bag),
        )
    base = time_base or TimeBase("record")
    n_joints = len(joint_names)
    with BagSource(bag, distro=distro) as src:
        conns = src.connections_for([topic])
        if conns[0].msgtype != FLOAT64_ARRAY:
            raise BagError(f"topic has type {conns[0].msgtype}, not {FLOAT64_ARRAY}", bag=str(bag), topic=topic)
        deserialize = src.decoder(FLOAT64_ARRAY, topic=topic)
        total = min(max(sum(c.msgcount for c in conns), 1), 1 << 16)  # metadata's claim; grows below
        record = np.zeros(total, dtype=np.int64)
        values = np.full((total, n_joints), np.nan)
        n = 0
        decode = None
        for _conn, record_ns, raw in src.messages(conns):
            if decode is None:
                decode = f64_array_decoder(deserialize, FLOAT64_ARRAY, raw, allow_fast=not src.is_ros1)
            try:
                data = decode(raw)
            except Exception as exc:
                raise BagError(
                    f"cannot decode {FLOAT64_ARRAY}: {exc}", bag=str(bag), topic=topic, record_ns=record_ns
                ) from None
            if len(data) != n_joints:
                raise DataError(
                    f"command has {len(data)} values for {n_joints} configured joints",
                    bag=str(bag),
                    topic=topic,
                    record_ns=record_ns,
                )
            if n == len(record):
                record = np.concatenate([record, np.zeros_like(record)])
                values = np.concatenate([values, np.full_like(values, np.nan)])
            record[n] = record_ns
            values[n] = data
            n += 1
    if n == 0:
        raise DataError("command topic has no messages", bag=str(bag), topic=topic)
    values = values[:n]
    bad = np.argwhere(np.isinf(values))
    if len(bad):  # NaN may mean "no command"; an infinite command is an error
        row, col = bad[0]
        raise DataError(
            "infinite command", bag=str(bag), topic=topic, joint=joint_names[col], record_ns=int(record[row])
        )
    times = base.from_record(record[:n])
    order = np.argsort(times, kind="stable")
    return JointCommands(tuple(joint_names), times[order], values[order], interface, source=f"{bag}:{topic}")


def read_trajectory(
    bag: str | Path,
    topic: str,
    *,
    joint_names: list[str] | tuple[str, ...] | None = None,
    time_base: TimeBase | None = None,
    setpoint_period_s: float = 0.001,
    initial_positions: JointSamples | None = None,
    distro: str | None = None,
) -> TrajectorySetpoints:
    """Expand a JointTrajectory topic into position and velocity setpoints every `setpoint_period_s`.

    Interpolation as the joint trajectory controller: linear (positions only), cubic Hermite (with
    velocities), quintic (with velocities and accelerations).
    A header stamp of 0 starts the trajectory when received; joints are matched by name (any order,
    partial goals hold the other joints). `initial_positions` (the joint states) give the state the
    first trajectory starts from; without them it holds its first point until that point is due.
    """
    base = time_base or TimeBase("record")
    msgs: list[TrajectoryMsg] = []
    names: list[str] = list(joint_names) if joint_names else []
    with BagSource(bag, distro=distro) as src:
        conns = src.connections_for([topic])
        if conns[0].msgtype != JOINT_TRAJECTORY:
            raise BagError(f"topic has type {conns[0].msgtype}, not {JOINT_TRAJECTORY}", bag=str(bag), topic=topic)
        deserialize = src.decoder(JOINT_TRAJECTORY, topic=topic)
        for _conn, record_ns, raw in src.messages(conns):
            msg = deserialize(raw, JOINT_TRAJECTORY)
            parsed = _parse(msg, base, record_ns, names, joint_names is not None, str(bag), topic)
            if parsed is not None:
                msgs.append(parsed)
    if not msgs:
        raise DataError("no trajectory with points", bag=str(bag), topic=topic)
    msgs.sort(key=lambda m: m.receipt_ns)
    initial = None
    if initial_positions is not None and initial_positions.position is not None:
        idx = np.searchsorted(initial_positions.time_ns, msgs[0].receipt_ns, side="right") - 1
        if idx >= 0:
            initial = np.array(
                [
                    initial_positions.column("position", j)[idx] if j in initial_positions.joint_names else np.nan
                    for j in names
                ]
            )
    period_ns = int(round(setpoint_period_s * NS))
    times, q, v = expand(msgs, tuple(names), period_ns, initial)
    source = f"{bag}:{topic}"
    return TrajectorySetpoints(
        JointCommands(tuple(names), times, q, "position", source=source),
        JointCommands(tuple(names), times, v, "velocity", source=source),
    )


def _parse(
    msg: Any, base: TimeBase, record_ns: int, names: list[str], fixed: bool, bag: str, topic: str
) -> TrajectoryMsg | None:
    """One JointTrajectory message as a `TrajectoryMsg` on the time base (None if it has no points)."""
    where = {"bag": bag, "topic": topic, "record_ns": record_ns}
    joints = list(msg.joint_names)
    if not msg.points:
        return None
    if len(set(joints)) != len(joints):
        raise DataError(f"trajectory names a joint twice: {joints}", **where)
    unknown = [j for j in joints if j not in names]
    if unknown and fixed:
        raise DataError(f"trajectory names joints not in the configured joint_names: {unknown}", **where)
    names.extend(unknown)
    stamp_ns = msg.header.stamp.sec * NS + msg.header.stamp.nanosec
    receipt = int(base.from_record(record_ns))
    start = int(base.from_header(stamp_ns)) if stamp_ns else receipt
    point_ns, positions, velocities, accelerations = [], [], [], []
    has_vel = all(len(p.velocities) == len(joints) for p in msg.points)
    has_acc = has_vel and all(len(p.accelerations) == len(joints) for p in msg.points)
    for k, point in enumerate(msg.points):
        if len(point.positions) != len(joints):
            raise DataError(
                f"trajectory point {k} has {len(point.positions)} positions for {len(joints)} joints", **where
            )
        if not np.all(np.isfinite(point.positions)):
            raise DataError(f"trajectory point {k} has a non-finite position", **where)
        point_ns.append(point.time_from_start.sec * NS + point.time_from_start.nanosec)
        positions.append(np.asarray(point.positions, dtype=np.float64))
        if has_vel:
            velocities.append(np.asarray(point.velocities, dtype=np.float64))
        if has_acc:
            accelerations.append(np.asarray(point.accelerations, dtype=np.float64))
    return TrajectoryMsg(
        tuple(joints),
        receipt,
        start,
        np.asarray(point_ns, dtype=np.int64),
        np.vstack(positions),
        np.vstack(velocities) if has_vel else None,
        np.vstack(accelerations) if has_acc else None,
    )
