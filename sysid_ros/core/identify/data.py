"""Loading a problem's data (bags via read_recording, or .npz arrays) and cutting it into segments."""

from __future__ import annotations

from typing import Sequence

import mujoco
import numpy as np

from ..bags import read_recording
from ..bags.arrays_io import load_npz
from ..bags.logger_clock import regularize
from ..errors import BagError, ConfigError, DataError
from ..signals.arrays import JointCommands, JointSamples
from . import sysid_data as sd
from .problem import DataSource, Problem


def _trim(samples: JointSamples, src: DataSource) -> JointSamples:
    if src.start_s == 0.0 and src.end_s is None:
        return samples
    rel = samples.time_ns - samples.time_ns[0]
    a = int(np.searchsorted(rel, int(round(src.start_s * 1e9))))
    b = len(rel) if src.end_s is None else int(np.searchsorted(rel, int(round(src.end_s * 1e9)), side="right"))
    return samples.slice(a, b)


def _from_first_command(samples: JointSamples, commands: JointCommands) -> JointSamples:
    """The samples from the first command on (finite for every joint of `samples`): before it no command is in
    force to replay (a recorder's feedback starts before its first command)."""
    columns = [commands.joint_names.index(j) for j in samples.joint_names if j in commands.joint_names]
    finite = np.flatnonzero(np.all(np.isfinite(commands.values[:, columns]), axis=1))
    if not len(finite):
        return samples
    return samples.slice(int(np.searchsorted(samples.time_ns, commands.time_ns[finite[0]])), len(samples))


def load_source(src: DataSource, joints: Sequence[str], warnings: list[str] | None = None,
                notes: list[str] | None = None) -> list[tuple[JointSamples, JointCommands | None]]:
    """Contiguous sample sets of a bag or `.npz`, each with the effort commands to replay (None: measured effort).

    Data repairs that may have changed the answer (duplicate stamps with different values, of which the
    reader kept the first; a log resampled without a device clock) are appended to `warnings` as one line
    naming the file; a real logger's time base put right (repeated rows dropped, device clock recovered,
    `bags.logger_clock`) to `notes`.
    """
    if src.kind == "npz":
        samples, commands, _ = load_npz(src.path)
        if samples is None:
            raise DataError("the file holds no joint feedback", bag=str(src.path))
        segments = [samples]
    else:
        topics = None if src.feedback_topic is None else [src.feedback_topic]
        if src.control == "effort":
            wanted, interfaces = [], None  # the measured effort: no command topic is read
        elif src.command_topic is not None:
            wanted, interfaces = [src.command_topic], None
        else:
            wanted, interfaces = None, ("effort",)
        try:
            rec = read_recording(src.path, joints=list(joints), joint_state_topics=topics, command_topics=wanted,
                                 command_joint_names=src.command_joints, command_interfaces=interfaces)
        except (DataError, BagError) as exc:
            raise type(exc)(f"cannot read joints {list(joints)}: {exc}") from exc
        segments = list(getattr(rec.feedback, "segments", None) or [rec.samples])
        if rec.feedback.dropped_rows and warnings is not None:
            warnings.append(f"{src.path}: {rec.feedback.dropped_rows} joint states dropped as garbage (non-finite or "
                            "beyond any physical range)")
        conflicts = rec.feedback.timing.conflicting_duplicates
        if conflicts and warnings is not None:
            warnings.append(f"{src.path}: {conflicts} joint state values stamped twice with different data "
                            "(the reader kept the first of each)")
        commands = rec.commands
    if src.segments == "longest":
        segments = [max(segments, key=len)]
    missing = [j for j in joints if j not in segments[0].joint_names]
    if missing:
        raise DataError(f"the data has no joints {missing}; it has {list(segments[0].joint_names)}",
                        bag=str(src.path))
    efforts = {t: c for t, c in commands.items() if c.interface == "effort"}
    if src.command_topic is not None:
        if src.command_topic not in commands:
            raise DataError(f"no command topic {src.command_topic!r}; the data has {sorted(commands)}",
                            bag=str(src.path), topic=src.command_topic)
        chosen: JointCommands | None = commands[src.command_topic]
    elif src.control == "effort":
        chosen = None
    elif len(efforts) == 1:
        chosen = next(iter(efforts.values()))
    elif len(efforts) > 1:
        raise ConfigError(f"several effort command topics {sorted(efforts)}: name one as command_topic",
                          bag=str(src.path))
    elif src.control == "commands":
        raise DataError("no effort command topic in the data", bag=str(src.path))
    else:
        chosen = None
    if chosen is not None:
        chosen = JointCommands(chosen.joint_names, chosen.time_ns, chosen.values, chosen.interface,
                               source=chosen.source or f"{src.path}:{src.command_topic or 'commands'}")
    out = []
    for k, seg in enumerate(segments):
        seg, fix = regularize(seg.select(list(joints)))
        if fix.kind != "uniform" or fix.repeated_rows:
            line = fix.describe(f"{src.path}" + (f" segment {k}" if len(segments) > 1 else ""))
            target = warnings if fix.kind == "resampled" else notes
            if target is not None:
                target.append(line)
        seg = _trim(seg, src)
        if chosen is not None:
            before = len(seg)
            seg = _from_first_command(seg, chosen)
            if len(seg) < before and notes is not None:
                notes.append(f"{src.path}: {before - len(seg)} joint states before the first command left out "
                             "(no command was in force to replay)")
        if not seg.source:
            seg = JointSamples(seg.joint_names, seg.time_ns, seg.position, seg.velocity, seg.effort, str(src.path))
        if len(seg) >= 3:
            out.append((seg, chosen))
    if not out:
        raise DataError("no usable samples (after trimming)", bag=str(src.path))
    return out


def build_segments(problem: Problem, model: mujoco.MjModel, maps: Sequence[sd.JointMap],
                   data: Sequence[tuple[str, list[tuple[JointSamples, JointCommands | None]]]]) -> list[sd.Segment]:
    """All segments (or windows) of all sources, each starting from its measured state at t = 0."""
    return [seg for seg, _ in segment_sources(problem, model, maps, data)]


def segment_sources(problem: Problem, model: mujoco.MjModel, maps: Sequence[sd.JointMap],
                    data: Sequence[tuple[str, list[tuple[JointSamples, JointCommands | None]]]]
                    ) -> list[tuple[sd.Segment, JointSamples]]:
    """`build_segments`, each segment with the samples it was cut from (for its start state's noise)."""
    out: list[tuple[sd.Segment, JointSamples]] = []
    for name, parts in data:
        for k, (samples, commands) in enumerate(parts):
            out += [(seg, samples) for seg in sd.segments_from_samples(
                model, maps, samples, commands, name=f"{name}_{k}", observe=problem.observe,
                window_s=problem.window_s, smoothing_samples=problem.smoothing_samples or 0,
                start_velocity=problem.start_velocity)]
    return out
