"""Bags that cannot disturb a robot: command topics marked in the metadata, and a copy with every live topic renamed.

A recording keeps the live topics under their own names: the controller's `.../commands` and
`.../joint_trajectory`, so `ros2 bag play` next to a running robot would drive it, and `/joint_states`
(also `/clock`, `/tf`, ...), whose replayed messages a running robot's state publishers, controllers and
planners would take for its own. The recorder lists the command topics in `metadata.yaml`
(`custom_data: sysid_ros.command_topics`) and on the `/sysid/metadata` topic; `replay_safe_copy` writes a
copy in which every topic but sysid_ros's own `/sysid/...` is renamed under `/sysid/replay/...`, messages
copied byte for byte. The readers find joint states and commands in such a copy as in the original.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import BagError
from .read import BagSource
from .write import COMMANDS_KEY, METADATA_TOPIC, BagWriter, read_metadata

REPLAY_PREFIX = "/sysid/replay"
# Message types a controller takes as commands: recorded topics of these types are renamed even when a bag
# does not say (one from another recorder, or one whose metadata.yaml a crash took).
COMMAND_TYPES = (
    "trajectory_msgs/msg/JointTrajectory",
    "std_msgs/msg/Float64MultiArray",
    "control_msgs/msg/JointJog",
    "geometry_msgs/msg/Twist",
    "geometry_msgs/msg/TwistStamped",
)


def command_topics(bag: str | Path) -> list[str]:
    """The topics in the bag that `ros2 bag play` would send to a robot's controllers: those the recorder
    marked, plus every topic of a command message type, except what is already under /sysid/replay/."""
    with BagSource(bag) as source:
        marked = (source.metadata.get("custom_data") or {}).get(COMMANDS_KEY, "")
        found = {t for t in marked.split(",") if t}
        found |= {c.topic for c in source.connections if c.msgtype in COMMAND_TYPES}
        present = set(source.topics)
    for document in read_metadata(bag) if METADATA_TOPIC in present else []:
        found |= set(document.get("command_topics") or [])
        if document.get("command_topic"):
            found.add(document["command_topic"])
    return sorted(t for t in found & present if not t.startswith(REPLAY_PREFIX + "/"))


def live_topics(bag: str | Path) -> list[str]:
    """Every topic a running robot publishes or listens to: all but sysid_ros's own `/sysid/...` topics."""
    with BagSource(bag) as source:
        return sorted(t for t in source.topics if not t.startswith("/sysid/"))


def replay_name(topic: str) -> str:
    return f"{REPLAY_PREFIX}/{topic.lstrip('/')}"


def replay_safe_copy(bag: str | Path, out: str | Path) -> dict[str, str]:
    """Copy `bag` to the new folder `out` with every live topic renamed; returns {old: new} names, the command
    topics first.

    The copy is marked (custom_data `sysid_ros.replay_safe`), and `out` must not exist: nothing is
    overwritten, and a failure removes the partial copy.
    """
    bag, out = Path(bag), Path(out)
    if out.exists():
        raise BagError(f"{out} exists: not overwritten", bag=str(bag))
    commands = command_topics(bag)
    renamed = {t: replay_name(t) for t in commands + [t for t in live_topics(bag) if t not in commands]}
    with BagSource(bag) as source:
        if source.is_ros1:
            raise BagError("replay-safe copies are written for rosbag2 bags only", bag=str(bag))
        writer = BagWriter(
            out,
            storage=source.storage,
            typestore=source.typestore,
            distro=str(source.metadata.get("ros_distro") or "jazzy"),
        )
        writer.open()
        try:
            for conn in source.connections:
                writer.set_offered_qos(
                    renamed.get(conn.topic, conn.topic), list(getattr(conn.ext, "offered_qos_profiles", ()))
                )
                writer.add_topic(
                    renamed.get(conn.topic, conn.topic),
                    conn.msgtype,
                    msgdef=conn.msgdef.data or None,
                    rihs01=conn.digest if conn.msgdef.data else None,
                )
            for conn, record_ns, raw in source.messages(source.connections):
                writer.write_raw(renamed.get(conn.topic, conn.topic), conn.msgtype, record_ns, raw)
            writer.set_custom_data("sysid_ros.replay_safe", ",".join(f"{a}->{b}" for a, b in renamed.items()))
            writer.close()
        except BaseException:
            writer.abort()
            raise
    return renamed
