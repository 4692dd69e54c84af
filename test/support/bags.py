"""Helpers that write small bags for the bag tests, independently of the code under test (rosbags' own writers).

No tests here; other `test_bags_*` files import these functions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

JAZZY = get_typestore(Stores.ROS2_JAZZY)
NOETIC = get_typestore(Stores.ROS1_NOETIC)
JS = "sensor_msgs/msg/JointState"
F64 = "std_msgs/msg/Float64MultiArray"
TRAJ = "trajectory_msgs/msg/JointTrajectory"
T0_NS = 1_700_000_000_123_456_789  # an epoch-like start, odd nanoseconds on purpose


def stamp(ns: int, ts=JAZZY):
    return ts.types["builtin_interfaces/msg/Time"](sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def header(ns: int, ts=JAZZY):
    if ts is NOETIC:
        return ts.types["std_msgs/msg/Header"](seq=0, stamp=stamp(ns, ts), frame_id="")
    return ts.types["std_msgs/msg/Header"](stamp=stamp(ns, ts), frame_id="")


def joint_state(ns: int, names, position=(), velocity=(), effort=(), ts=JAZZY):
    arr = lambda v: np.asarray(v, dtype=np.float64)  # noqa: E731
    return ts.types[JS](
        header=header(ns, ts), name=list(names), position=arr(position), velocity=arr(velocity), effort=arr(effort)
    )


def float64_array(values, ts=JAZZY):
    layout = ts.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    return ts.types[F64](layout=layout, data=np.asarray(values, dtype=np.float64))


def trajectory(ns: int, names, points, ts=JAZZY):
    """points: list of (time_from_start_s, positions, velocities or None[, accelerations])."""
    P = ts.types["trajectory_msgs/msg/JointTrajectoryPoint"]
    D = ts.types["builtin_interfaces/msg/Duration"]
    empty = np.zeros(0)
    pts = []
    for tfs, pos, vel, *acc in points:
        tfs_ns = int(round(tfs * 1e9))
        pts.append(
            P(
                positions=np.asarray(pos, float),
                velocities=empty if vel is None else np.asarray(vel, float),
                accelerations=np.asarray(acc[0], float) if acc else empty,
                effort=empty,
                time_from_start=D(sec=tfs_ns // 1_000_000_000, nanosec=tfs_ns % 1_000_000_000),
            )
        )
    return ts.types[TRAJ](header=header(ns, ts), joint_names=list(names), points=pts)


def write_bag(path: Path, messages, storage: str = "mcap", ts=JAZZY) -> Path:
    """Write (topic, msgtype, record_ns, message) tuples into a rosbag2 bag with rosbags' Writer."""
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    conns = {}
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        for topic, msgtype, record_ns, msg in messages:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=ts)
            writer.write(conns[topic], record_ns, bytes(ts.serialize_cdr(msg, msgtype)))
    return path


def write_ros1_bag(path: Path, messages, old_header: bool = False) -> Path:
    """A ROS 1 bag; `old_header` writes JointState definitions whose Header is the pre-Hydro roslib/Header."""
    from rosbags.rosbag1 import Writer as Writer1

    conns = {}
    with Writer1(path) as writer:
        for topic, msgtype, record_ns, msg in messages:
            if topic not in conns:
                msgdef, md5 = NOETIC.generate_msgdef(msgtype)
                if old_header:
                    msgdef = msgdef.replace("std_msgs/Header header", "Header header").replace(
                        "MSG: std_msgs/Header", "MSG: roslib/Header"
                    )
                conns[topic] = writer.add_connection(topic, msgtype, msgdef=msgdef, md5sum=md5)
            writer.write(conns[topic], record_ns, bytes(NOETIC.serialize_ros1(msg, msgtype)))
    return path


def sine_states(
    seconds: float = 2.0,
    rate_hz: float = 200.0,
    names=("j1", "j2", "j3"),
    t0_ns: int = T0_NS,
    header_offset_ns: int = 0,
    topic: str = "/joint_states",
    ts=JAZZY,
    order=None,
):
    """JointState messages of a known motion: q_k(t) = 0.3 (k+1) sin(2 pi 0.5 t + k); returns (msgs, truth)."""
    period_ns = int(round(1e9 / rate_hz))
    n = int(round(seconds * rate_hz))
    times = t0_ns + period_ns * np.arange(n, dtype=np.int64)
    ts_s = (times - t0_ns) * 1e-9
    q = np.stack([0.3 * (k + 1) * np.sin(2 * np.pi * 0.5 * ts_s + k) for k in range(len(names))], axis=1)
    qd = np.stack([0.3 * (k + 1) * np.pi * np.cos(2 * np.pi * 0.5 * ts_s + k) for k in range(len(names))], axis=1)
    tau = 0.1 * q
    msgs = []
    for i, t in enumerate(times):
        perm = list(range(len(names))) if order is None else order(i)
        nm = [names[p] for p in perm]
        msgs.append(
            (
                topic,
                JS,
                int(t),
                joint_state(int(t) + header_offset_ns, nm, q[i, perm], qd[i, perm], tau[i, perm], ts=ts),
            )
        )
    return msgs, {
        "time_ns": times + header_offset_ns,
        "record_ns": times,
        "position": q,
        "velocity": qd,
        "effort": tau,
        "names": tuple(names),
    }


def set_metadata_version(bag: Path, version: int) -> None:
    """Rewrite metadata.yaml as an older rosbag2 version would have written it."""
    meta_path = bag / "metadata.yaml"
    doc = yaml.safe_load(meta_path.read_text())
    info = doc["rosbag2_bagfile_information"]
    info["version"] = version
    for topic in info["topics_with_message_count"]:
        md = topic["topic_metadata"]
        if version < 9:
            md["offered_qos_profiles"] = ""
        if version < 7:
            md.pop("type_description_hash", None)
    if version < 8:
        info.pop("ros_distro", None)
    if version < 6:
        info.pop("custom_data", None)
    if version < 5:
        info.pop("files", None)
    meta_path.write_text(yaml.safe_dump(doc))


def strip_definitions(bag: Path) -> None:
    """Remove the embedded message definitions, as bags from older recorders lack them."""
    db3 = list(bag.glob("*.db3"))
    if db3:
        import sqlite3

        con = sqlite3.connect(db3[0])
        con.execute("DELETE FROM message_definitions")
        con.commit()
        con.close()
        return
    from mcap.reader import make_reader
    from mcap.writer import Writer as McapWriter

    src = next(bag.glob("*.mcap"))
    tmp = src.with_suffix(".tmp")
    with src.open("rb") as fin, tmp.open("wb") as fout:
        reader = make_reader(fin)
        writer = McapWriter(fout)
        writer.start(profile="ros2", library="test")
        schema_ids, channel_ids = {}, {}
        for schema, channel, message in reader.iter_messages(log_time_order=False):
            if schema.name not in schema_ids:
                schema_ids[schema.name] = writer.register_schema(schema.name, "", b"")
            if channel.id not in channel_ids:
                channel_ids[channel.id] = writer.register_channel(
                    channel.topic, channel.message_encoding, schema_ids[schema.name], channel.metadata
                )
            writer.add_message(channel_ids[channel.id], message.log_time, message.data, message.publish_time)
        writer.finish()
    tmp.replace(src)
