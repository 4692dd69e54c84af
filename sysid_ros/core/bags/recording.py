"""`read_recording`: feedback, commands and metadata of one bag on one consistent time base."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..signals import JointCommands, JointSamples
from .commands import COMMAND_TYPES, JOINT_TRAJECTORY, guess_interface, read_array_commands, read_trajectory
from .joint_states import JointStateRead, read_joint_states
from .read import BagSource
from .write import METADATA_TOPIC, read_metadata


@dataclass(frozen=True)
class Recording:
    """Everything identification needs from a bag; commands share the feedback's time base."""

    bag: str
    feedback: JointStateRead
    commands: dict[str, JointCommands]
    metadata: dict

    @property
    def samples(self) -> JointSamples:
        return self.feedback.samples


def read_recording(
    bag: str | Path,
    *,
    joints: list[str] | tuple[str, ...] | None = None,
    joint_state_topics: list[str] | None = None,
    command_topics: list[str] | None = None,
    command_joint_names: list[str] | tuple[str, ...] | None = None,
    time_source: str = "auto",
    max_gap_s: float | None = None,
    on_gap: str = "split",
    setpoint_period_s: float = 0.001,
    distro: str | None = None,
    command_interfaces: tuple[str, ...] | None = None,
) -> Recording:
    """Read feedback and every command topic (default: all Float64MultiArray / JointTrajectory topics;
    with `command_interfaces`, only those whose interface is one of them, e.g. `("effort",)`).

    The controller's joint order for Float64MultiArray comes from `command_joint_names`, else from the
    recorded metadata (`command_joint_names` or `joint_names` key); never guessed.
    """
    docs = read_metadata(bag, METADATA_TOPIC, distro=distro)
    metadata: dict = {}
    for doc in docs:
        if isinstance(doc, dict):
            metadata.update(doc)
    feedback = read_joint_states(
        bag,
        topics=joint_state_topics,
        joints=joints,
        time_source=time_source,
        max_gap_s=max_gap_s,
        on_gap=on_gap,
        distro=distro,
    )
    base = feedback.timing.time_base
    with BagSource(bag, distro=distro) as src:
        types = {name: info.msgtype for name, info in src.topics.items()}
    topics = (
        command_topics
        if command_topics is not None
        else sorted(
            name
            for name, msgtype in types.items()
            if msgtype in COMMAND_TYPES
            and (command_interfaces is None or _interface(name, msgtype, metadata) in command_interfaces)
        )
    )
    order = command_joint_names or metadata.get("command_joint_names") or metadata.get("joint_names")
    commands: dict[str, JointCommands] = {}
    for topic in topics:
        if types.get(topic) == JOINT_TRAJECTORY:
            start = _joined(feedback)
            commands[topic] = read_trajectory(
                bag,
                topic,
                joint_names=order,
                time_base=base,
                setpoint_period_s=setpoint_period_s,
                initial_positions=start,
                distro=distro,
            ).position
        else:
            if not order:
                raise ConfigError(
                    "Float64MultiArray commands need the controller's joint order: give it as "
                    "command_joints (problem file) or --command-joints, or replay the measured "
                    "effort (control: effort)",
                    bag=str(bag),
                    topic=topic,
                )
            commands[topic] = read_array_commands(
                bag,
                topic,
                joint_names=list(order),
                time_base=base,
                interface=metadata.get("command_interface"),
                distro=distro,
            )
    return Recording(str(bag), feedback, commands, metadata)


def _interface(topic: str, msgtype: str, metadata: dict) -> str | None:
    if msgtype == JOINT_TRAJECTORY:
        return "position"
    return metadata.get("command_interface") or guess_interface(topic)


def _joined(feedback: JointStateRead) -> JointSamples:
    """All feedback segments as one sample set (for looking up the measured state at a time)."""
    segs = [s for s in feedback.segments if len(s)]
    if len(segs) == 1:
        return segs[0]

    def join(f):
        return None if getattr(segs[0], f) is None else np.vstack([getattr(s, f) for s in segs])

    return JointSamples(
        segs[0].joint_names,
        np.concatenate([s.time_ns for s in segs]),
        join("position"),
        join("velocity"),
        join("effort"),
        source=feedback.bag,
    )
