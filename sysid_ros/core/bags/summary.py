"""`inspect_bag(bag) -> BagSummary`: what a bag holds and what of it can serve identification, with reasons."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..errors import BagError, SysidRosError
from .commands import FLOAT64_ARRAY, JOINT_TRAJECTORY, guess_interface
from .joint_states import JOINT_STATE, check_motion, read_joint_states
from .logger_clock import regularize
from .read import BagSource
from .write import METADATA_TOPIC


@dataclass(frozen=True)
class TopicSummary:
    """One topic: type, count, mean rate over its own span, and whether identification can use it."""

    name: str
    msgtype: str
    count: int
    rate_hz: float
    first_ns: int | None
    last_ns: int | None
    role: str
    usable: bool
    reason: str
    joints: tuple[str, ...] = ()


@dataclass(frozen=True)
class BagSummary:
    """The whole bag at a glance; `usable` says whether identification can start from it, `reasons` why not."""

    path: str
    storage: str
    metadata_version: int | None
    ros_distro: str | None
    start_ns: int | None
    end_ns: int | None
    topics: tuple[TopicSummary, ...]
    joints: tuple[str, ...]
    time_source: str
    clock_offset_s: float
    usable: bool
    reasons: tuple[str, ...]
    notes: tuple[str, ...]
    warnings: tuple[str, ...] = ()  # what makes a usable bag's result suspect (a topic read short: a damaged chunk)
    fraction_read: float = 1.0  # messages read over messages the bag lists

    @property
    def duration_s(self) -> float:
        return 0.0 if self.start_ns is None or self.end_ns is None else (self.end_ns - self.start_ns) * 1e-9

    def format(self) -> str:
        """A human-readable report."""
        lines = [
            f"bag {self.path} ({self.storage}, metadata v{self.metadata_version}, distro {self.ros_distro})",
            f"  span {self.duration_s:.3f} s"
            + (
                f", time source {self.time_source}, clock offset {self.clock_offset_s:+.3f} s"
                if math.isfinite(self.clock_offset_s)
                else ""
            ),
            f"  joints: {', '.join(self.joints) or '-'}",
        ]
        for t in self.topics:
            mark = "ok " if t.usable else "-- "
            lines.append(f"  {mark}{t.name} [{t.msgtype}] {t.count} msgs {t.rate_hz:.1f} Hz, {t.role}: {t.reason}")
            if t.msgtype == JOINT_STATE and t.joints:
                lines.append(f"       joints: {', '.join(t.joints)}")
        usable = "yes" if self.usable else "no"
        if self.usable and self.warnings:
            usable = f"yes, with {len(self.warnings)} warning(s): {100 * self.fraction_read:.1f} % of its messages read"
        lines.append(f"  usable for identification: {usable}")
        lines += [f"    because {r}" for r in self.reasons]
        lines += [f"  WARNING: {w}" for w in self.warnings]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def inspect_bag(
    bag: str | Path,
    *,
    distro: str | None = None,
    joint_names: list[str] | None = None,
    min_motion_rad: float = 0.01,
    joints: list[str] | None = None,
    feedback_topic: str | None = None,
    command_joints: list[str] | None = None,
    segments: str = "all",
) -> BagSummary:
    """Summarize `bag`: every topic, the joints of every JointState topic (even when they clash) and whether
    identification can start from it. `joints` filters the joints taken; `feedback_topic` picks one
    JointState topic; `command_joints` (alias `joint_names`) is the controller's joint order for
    Float64MultiArray; `segments: longest` judges only the longest gap-free stretch."""
    command_joints = command_joints or joint_names
    with BagSource(bag, distro=distro) as src:
        infos = src.topics
        conns = src.connections
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        sizes: dict[str, int] = {}
        names: dict[str, tuple[str, ...]] = {}
        unknown = {name for name, info in infos.items() if not src.has_type(info.msgtype)}
        counted: dict[str, int] = {}  # what the bag holds; metadata.yaml's counts are only claims
        for conn, record_ns, raw in src.messages(conns):
            counted[conn.topic] = counted.get(conn.topic, 0) + 1
            first.setdefault(conn.topic, record_ns)
            last[conn.topic] = record_ns
            if conn.topic in unknown:
                continue
            if conn.msgtype == FLOAT64_ARRAY and conn.topic not in sizes:
                sizes[conn.topic] = len(src.deserialize(raw, conn.msgtype, topic=conn.topic).data)
            elif conn.msgtype == JOINT_STATE and not names.get(conn.topic):
                names[conn.topic] = tuple(src.deserialize(raw, conn.msgtype, topic=conn.topic).name)
        meta = dict(src.metadata)
        notes = list(src.notes)
        shortfalls = list(src.shortfalls)
        warnings = [short.describe(src.start_ns) for short in shortfalls]
        start_ns, end_ns = src.start_ns, src.end_ns
        storage = src.storage
    reasons: list[str] = []
    js_topics = [n for n, i in infos.items() if i.msgtype == JOINT_STATE and n not in unknown]
    if feedback_topic is not None and feedback_topic not in js_topics:
        raise BagError(
            f"--feedback-topic {feedback_topic} is not a JointState topic of the bag "
            f"(JointState topics: {sorted(js_topics) or '-'})",
            bag=str(bag),
        )
    chosen = [feedback_topic] if feedback_topic else js_topics
    found: tuple[str, ...] = ()
    time_source, offset_s = "record", float("nan")
    js_ok, js_reason = False, ""
    clash = _clash(names, chosen, joints)
    if clash:
        js_reason = clash
        reasons.append(f"joint states unusable: {clash}")
    elif chosen:
        try:
            read = read_joint_states(bag, topics=chosen, joints=joints, distro=distro)
            segs = [max(read.segments, key=len)] if segments == "longest" else list(read.segments)
            found = segs[0].joint_names
            time_source, offset_s = read.timing.time_base.source, read.timing.clock_offset_s
            notes += [w for w in read.warnings if w not in read.shortfalls]
            for k, seg in enumerate(segs):
                _, fix = regularize(seg)
                if fix.kind != "uniform" or fix.repeated_rows:
                    notes.append(fix.describe("joint states" + (f" segment {k}" if len(segs) > 1 else "")))
            if all(s.position is None for s in segs):
                raise BagError("JointState messages carry no positions")
            check_motion(segs, min_motion_rad, bag=str(bag))
            js_ok = True
            js_reason = f"{len(found)} joints, {len(read.segments)} segment(s)"
            if read.timing.gaps:
                js_reason += f", {len(read.timing.gaps)} gap(s)"
                if segments == "longest":
                    js_reason += f"; the longest ({len(segs[0])} samples) is used"
        except SysidRosError as exc:
            js_reason = str(exc)
            reasons.append(f"joint states unusable: {exc}")
    else:
        reasons.append("no sensor_msgs/JointState topic (feedback is required)")
    topics = []
    for name, info in sorted(infos.items()):
        count = counted.get(name, 0)
        if count != info.count:
            notes.append(f"{name}: metadata.yaml says {info.count} messages, the bag holds {count}")
        span = (last.get(name, 0) - first.get(name, 0)) * 1e-9
        rate = (count - 1) / span if count > 1 and span > 0 else 0.0
        if info.msgtype == JOINT_STATE and name not in chosen and name not in unknown:
            role, usable, reason = "feedback", False, f"not the chosen --feedback-topic {feedback_topic}"
        else:
            role, usable, reason = _judge(
                name,
                info.msgtype,
                name in unknown,
                js_ok,
                js_reason,
                sizes.get(name),
                len(command_joints or found),
                count,
            )
        topics.append(
            TopicSummary(
                name,
                info.msgtype,
                count,
                rate,
                first.get(name),
                last.get(name),
                role,
                usable,
                reason,
                names.get(name, ()) if info.msgtype == JOINT_STATE else (),
            )
        )
    if not any(counted.values()):
        reasons = ["the bag has no messages"]
    listed = sum(info.count for info in infos.values())
    fraction = 1.0 if not shortfalls or not listed else sum(counted.values()) / listed
    return BagSummary(
        str(bag),
        storage,
        meta.get("version"),
        meta.get("ros_distro"),
        start_ns,
        end_ns,
        tuple(topics),
        found,
        time_source,
        offset_s,
        js_ok and not reasons,
        tuple(reasons),
        tuple(notes),
        tuple(warnings),
        fraction,
    )


def _clash(names: dict[str, tuple[str, ...]], topics: list[str], joints: list[str] | None) -> str:
    """Why these JointState topics cannot be merged (a joint on two of them), naming the option; else ''."""
    owner: dict[str, str] = {}
    for topic in topics:
        for joint in names.get(topic, ()):
            if joints is not None and joint not in joints:
                continue
            if joint in owner:
                return (
                    f"joint {joint} is published on both {owner[joint]} and {topic}: pick one with "
                    f"--feedback-topic (feedback_topic: in a problem file)"
                )
            owner[joint] = topic
    return ""


def _judge(
    name: str, msgtype: str, unknown: bool, js_ok: bool, js_reason: str, size: int | None, n_joints: int, count: int
) -> tuple[str, bool, str]:
    """(role, usable, reason) of one topic."""
    if unknown:
        return "unknown", False, f"no definition for {msgtype}: cannot decode"
    if count == 0:
        return "empty", False, "no messages"
    if msgtype == JOINT_STATE:
        return "feedback", js_ok, js_reason
    if msgtype == FLOAT64_ARRAY:
        interface = guess_interface(name) or "unknown interface"
        if size is not None and n_joints and size != n_joints:
            return f"{interface} commands", False, f"{size} values per message for {n_joints} joints"
        return f"{interface} commands", True, f"{size} values per message; joint order from config"
    if msgtype == JOINT_TRAJECTORY:
        return "trajectory commands", True, "expanded to position setpoints"
    if name == METADATA_TOPIC:
        return "recording metadata", True, "tape, joints and parameters (YAML)"
    return "other", False, f"{msgtype} is not used for identification"
