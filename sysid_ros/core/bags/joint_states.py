"""`sensor_msgs/JointState` topics of a bag -> `JointSamples`, joint by name, on one consistent time base.

Messages are decoded one at a time straight into preallocated numpy buffers (no message is kept).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import BagError, DataError
from ..signals import MAX_ABS_POSITION, MAX_ABS_RATE, JointSamples
from . import timing
from .fastcdr import JointStateDecoder, decode_error, names_from_key
from .read import BagSource

log = logging.getLogger(__name__)

JOINT_STATE = "sensor_msgs/msg/JointState"
FIELDS = ("position", "velocity", "effort")


@dataclass(frozen=True)
class JointStateRead:
    """Joint feedback read from a bag: one `JointSamples` per gap-free segment, and what was done to time."""

    bag: str
    topics: tuple[str, ...]
    segments: tuple[JointSamples, ...]
    timing: timing.TimingReport
    warnings: tuple[str, ...] = field(default=())
    dropped_rows: int = 0  # garbage rows (non-finite or physically impossible values) left out
    shortfalls: tuple[str, ...] = ()  # topics read short of what the bag lists (a damaged chunk): one line each
    fraction_read: float = 1.0  # messages read over messages the bag lists, over the topics read

    @property
    def samples(self) -> JointSamples:
        """The samples when the bag has no gap; a `DataError` naming the gaps otherwise."""
        if len(self.segments) == 1:
            return self.segments[0]
        where = "; ".join(f"{g.topic} {g.length_s:.3f} s from {g.start_ns} ns" for g in self.timing.gaps)
        raise DataError(
            f"joint states split into {len(self.segments)} segments at gaps ({where}); use .segments or .longest",
            bag=self.bag,
        )

    @property
    def longest(self) -> JointSamples:
        return max(self.segments, key=len)


INITIAL_ROWS = 1 << 16
MOSTLY_GARBAGE = 0.5
"""A record whose garbage rows exceed this fraction of its rows is refused."""


def _garbage(picked: list) -> bool:
    """Whether one message's values are not a measurement: a position that is not finite or beyond
    `MAX_ABS_POSITION`, a velocity or effort beyond `MAX_ABS_RATE` (+-inf included; NaN there means missing)."""
    q = picked[0]
    if q is not None and not (-MAX_ABS_POSITION <= q.min() and q.max() <= MAX_ABS_POSITION):
        return True
    return any(v is not None and len(v) and (v.max() > MAX_ABS_RATE or v.min() < -MAX_ABS_RATE) for v in picked[1:])


class _Buffers:
    """Growable (N, J) buffers for the three fields plus per-row times and topic."""

    def __init__(self, rows: int, cols: int) -> None:
        rows = max(rows, 16)
        self.n = 0
        self.header = np.zeros(rows, dtype=np.int64)
        self.record = np.zeros(rows, dtype=np.int64)
        self.topic = np.zeros(rows, dtype=np.int16)
        self.values = {f: np.full((rows, cols), np.nan) for f in FIELDS}
        self.seen = dict.fromkeys(FIELDS, False)
        self.garbage = 0  # rows dropped by `_garbage`
        self.first_garbage_ns = 0

    def grow_rows(self) -> None:
        size = 2 * len(self.header)
        for name in ("header", "record", "topic"):
            old = getattr(self, name)
            new = np.zeros(size, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)
        for f, old in self.values.items():
            new = np.full((size, old.shape[1]), np.nan)
            new[: len(old)] = old
            self.values[f] = new

    def add_column(self) -> None:
        for f, old in self.values.items():
            self.values[f] = np.concatenate([old, np.full((len(old), 1), np.nan)], axis=1)


def _mapping(
    names: list[str], columns: dict[str, int], fixed: bool, buffers: _Buffers, where: dict
) -> tuple[np.ndarray, np.ndarray]:
    """Source and destination column indices for one message's name list."""
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise DataError(f"joint names repeat within one message: {dup}", **where)
    src, dst = [], []
    for k, name in enumerate(names):
        col = columns.get(name)
        if col is None and not fixed:
            col = columns[name] = len(columns)
            buffers.add_column()
        if col is not None:
            src.append(k)
            dst.append(col)
    return np.asarray(src, dtype=np.intp), np.asarray(dst, dtype=np.intp)


def read_joint_states(
    bag: str | Path,
    *,
    topics: list[str] | tuple[str, ...] | None = None,
    joints: list[str] | tuple[str, ...] | None = None,
    joint_order: list[str] | tuple[str, ...] | None = None,
    time_source: str = "auto",
    max_gap_s: float | None = None,
    on_gap: str = "split",
    trim_to_common: bool = True,
    min_motion_rad: float | None = None,
    distro: str | None = None,
) -> JointStateRead:
    """Read JointState topics of `bag` into joint-by-name arrays.

    topics: JointState topics to read (default: every JointState topic); several merge by joint.
    joints: columns wanted, in this order (default: every joint, in order of first appearance).
    joint_order: the names of messages whose `name` array is empty (a warning is logged).
    time_source: `auto`, `header` or `record` (see `timing.choose_time_base`).
    max_gap_s: a longer silence of a topic is a gap (default 10 periods, at least 20 ms).
    on_gap: `split` into segments or `raise` a `DataError` saying where the gap is.
    trim_to_common: keep only the span where every topic has data.
    min_motion_rad: if given, raise `DataError` unless some joint's position range exceeds it.
    """
    if on_gap not in ("split", "raise"):
        raise DataError(f"on_gap must be split or raise, not {on_gap!r}")
    if joints is not None and len(set(joints)) != len(joints):
        raise DataError(f"requested joints repeat: {list(joints)}", bag=str(bag))
    with BagSource(bag, distro=distro) as src:
        chosen = _choose_topics(src, topics)
        conns = src.connections_for(chosen)
        for conn in conns:
            if conn.msgtype != JOINT_STATE:
                raise BagError(f"topic has type {conn.msgtype}, not {JOINT_STATE}", bag=str(src.path), topic=conn.topic)
        if len(chosen) > 62:
            raise BagError(f"{len(chosen)} JointState topics: at most 62 can be merged", bag=str(src.path))
        deserialize = src.decoder(JOINT_STATE, topic=chosen[0])
        topic_names = tuple(chosen)
        buffers, columns, warnings = _fill(src, conns, topic_names, joints, joint_order, deserialize)
        notes = list(src.notes)
        short = tuple(s.describe(src.start_ns) for s in src.shortfalls)
        claimed = sum(int(c.msgcount or 0) for c in conns)
        lost = sum(s.claimed - s.read for s in src.shortfalls)
    for text in short:
        log.warning("%s: %s", bag, text)
    result = _assemble(
        str(bag),
        topic_names,
        buffers,
        columns,
        joints,
        list(short) + warnings + notes,
        time_source,
        max_gap_s,
        on_gap,
        trim_to_common,
        min_motion_rad,
    )
    if not short:
        return result
    return replace(result, shortfalls=short, fraction_read=(claimed - lost) / claimed)


def _choose_topics(src: BagSource, topics: list[str] | tuple[str, ...] | None) -> list[str]:
    if topics:
        return list(topics)
    found = [name for name, info in src.topics.items() if info.msgtype == JOINT_STATE]
    if not found:
        raise BagError(f"no {JOINT_STATE} topic in bag (topics: {sorted(src.topics)})", bag=str(src.path))
    return sorted(found)


Names = list[str] | tuple[str, ...]


def _fill(
    src: BagSource,
    conns: list,
    topic_names: tuple[str, ...],
    joints: Names | None,
    joint_order: Names | None,
    deserialize: Callable[[bytes, str], object],
) -> tuple[_Buffers, dict[str, int], list[str]]:
    """The hot loop: decode each message and write its values straight into the buffers."""
    fixed = joints is not None
    columns: dict[str, int] = {name: k for k, name in enumerate(joints)} if fixed else {}
    # the counts come from the bag's metadata (a claim, not a fact): start small, the buffers grow
    buffers = _Buffers(min(sum(c.msgcount for c in conns), INITIAL_ROWS), len(columns))
    topic_of = {name: k for k, name in enumerate(topic_names)}
    chooser = JointStateDecoder(deserialize, JOINT_STATE, allow_fast=not src.is_ros1, bag=str(src.path))
    decoders = chooser.by_topic
    cache: dict[object, tuple] = {}
    prev_key: object = None
    prev_topic: str | None = None
    owner: dict[int, str] = {}
    mapping: tuple = ()
    warnings: list[str] = []
    values = [buffers.values[f] for f in FIELDS]
    header, record, topic_col = buffers.header, buffers.record, buffers.topic
    bag = str(src.path)
    for conn, record_ns, raw in src.messages(conns):
        topic = conn.topic
        decode = decoders.get(topic) or chooser.for_topic(topic, raw)
        try:
            stamp_ns, key, *arrays = decode(raw)
        except Exception as exc:
            raise decode_error(exc, bag, topic, record_ns) from None
        if key != prev_key or topic is not prev_topic:
            mapping = cache.get((topic, key))
            if mapping is None:
                mapping = cache[(topic, key)] = _mapping_for(
                    key,
                    joint_order,
                    columns,
                    fixed,
                    buffers,
                    warnings,
                    {"bag": bag, "topic": topic, "record_ns": record_ns},
                )
                _claim(owner, mapping, topic, columns, bag)
                values = [buffers.values[f] for f in FIELDS]
            prev_key, prev_topic = key, topic
        n_names, src_idx, dst_idx, dst_slice = mapping
        if n_names == 0:
            if any(len(a) for a in arrays):
                raise DataError(
                    "JointState has an empty name array; configure joint_order",
                    bag=bag,
                    topic=topic,
                    record_ns=record_ns,
                )
            continue
        if len(dst_idx) == 0:  # none of the requested joints: not a sample
            continue
        i = buffers.n
        if i == len(header):
            buffers.grow_rows()
            values = [buffers.values[f] for f in FIELDS]
            header, record, topic_col = buffers.header, buffers.record, buffers.topic
        picked = []
        for k in range(3):
            arr = arrays[k]
            size = len(arr)
            if size == n_names:
                picked.append(arr if src_idx is None else arr[src_idx])
            elif size:
                raise DataError(
                    f"JointState {FIELDS[k]} has {size} values for {n_names} names",
                    bag=bag,
                    topic=topic,
                    record_ns=record_ns,
                )
            else:
                picked.append(None)
        if not any(p is not None for p in picked):  # a message with names but no values is not a sample
            continue
        if _garbage(picked):
            buffers.garbage += 1
            buffers.first_garbage_ns = buffers.first_garbage_ns or record_ns
            continue
        header[i] = stamp_ns
        record[i] = record_ns
        topic_col[i] = topic_of[topic]
        for k, values_k in enumerate(picked):
            if values_k is None:
                continue
            if dst_slice is not None:
                values[k][i, dst_slice] = values_k
            else:
                values[k][i, dst_idx] = values_k
            buffers.seen[FIELDS[k]] = True
        buffers.n = i + 1
    return buffers, columns, warnings


def _claim(owner: dict[int, str], mapping: tuple, topic: str, columns: dict[str, int], bag: str) -> None:
    """Record which topic measures each column; a joint measured on two topics is an error."""
    dst = mapping[2]
    for col in () if dst is None else dst.tolist():
        other = owner.setdefault(col, topic)
        if other != topic:
            joint = next(name for name, c in columns.items() if c == col)
            raise DataError(
                f"joint is published on both {other} and {topic}: choose one (feedback_topic in a "
                "problem file, --feedback-topic, topics= in Python)",
                bag=bag,
                joint=joint,
            )


def _mapping_for(
    key: object,
    joint_order: Names | None,
    columns: dict[str, int],
    fixed: bool,
    buffers: _Buffers,
    warnings: list[str],
    where: dict,
) -> tuple:
    """(number of names, source indices or None, destination indices, destination slice or None)."""
    names = names_from_key(key)
    if not names and joint_order:
        text = f"{where['topic']}: JointState without names; using the configured joint_order"
        if text not in warnings:
            log.warning(text)
            warnings.append(text)
        names = list(joint_order)
    if not names:
        return 0, None, None, None
    src, dst = _mapping(names, columns, fixed, buffers, where)
    identity = len(src) == len(names) and np.array_equal(src, np.arange(len(names)))
    contiguous = len(dst) > 0 and np.array_equal(dst, np.arange(dst[0], dst[0] + len(dst)))
    dst_slice = slice(int(dst[0]), int(dst[0]) + len(dst)) if identity and contiguous else None
    return len(names), None if identity else src, dst, dst_slice


def _assemble(
    bag: str,
    topic_names: tuple[str, ...],
    buffers: _Buffers,
    columns: dict[str, int],
    joints: Names | None,
    warnings: list[str],
    time_source: str,
    max_gap_s: float | None,
    on_gap: str,
    trim_to_common: bool,
    min_motion_rad: float | None,
) -> JointStateRead:
    n = buffers.n
    if buffers.garbage > MOSTLY_GARBAGE * (n + buffers.garbage):
        raise DataError(
            f"mostly garbage: {buffers.garbage} of {n + buffers.garbage} joint states hold non-finite or "
            f"impossible values (|position| > {MAX_ABS_POSITION:g} rad, |velocity| or |effort| > "
            f"{MAX_ABS_RATE:g})",
            bag=bag,
            topic=",".join(topic_names),
        )
    if n == 0:
        raise DataError(
            "no JointState message with data for the requested joints", bag=bag, topic=",".join(topic_names)
        )
    if buffers.garbage:
        text = (
            f"{buffers.garbage} of {n + buffers.garbage} joint states dropped as garbage (non-finite or "
            f"|position| > {MAX_ABS_POSITION:g} rad, |velocity| or |effort| > {MAX_ABS_RATE:g}; the first at "
            f"record time {buffers.first_garbage_ns} ns)"
        )
        log.warning("%s: %s", bag, text)
        warnings = warnings + [text]
    names = sorted(columns, key=columns.get)
    if joints is not None:
        missing = [j for j in joints if not any(np.isfinite(buffers.values[f][:n, columns[j]]).any() for f in FIELDS)]
        if missing:
            raise DataError(
                f"requested joints never appear in the JointState topics: {missing}",
                bag=bag,
                topic=",".join(topic_names),
                joint=missing[0],
            )
    header, record, topic_idx = buffers.header[:n], buffers.record[:n], buffers.topic[:n]
    base, offset_s, spread_s, tw = timing.choose_time_base(header, record, topic_idx, topic_names, time_source)
    warnings = warnings + tw
    times = header if base.source == "header" else record
    fields = {f: buffers.values[f][:n] for f in FIELDS if buffers.seen[f]}
    t, mask, merged, counts = timing.sort_and_merge(times, topic_idx, fields)
    if counts["conflicting_duplicates"]:
        warnings.append(
            f"{counts['conflicting_duplicates']} values stamped twice with different data: kept the first received"
        )
    if trim_to_common and len(topic_names) > 1:
        lo, hi = timing.common_span(t, mask, len(topic_names))
        if hi <= lo:
            raise DataError(
                "the JointState topics never all have data at the same time; read them separately",
                bag=bag,
                topic=",".join(topic_names),
            )
        t, mask = t[lo:hi], mask[lo:hi]
        merged = {f: v[lo:hi] for f, v in merged.items()}
    max_gap_ns = None if max_gap_s is None else int(round(max_gap_s * 1e9))
    gaps = timing.find_gaps(t, mask, topic_names, max_gap_ns)
    if gaps and on_gap == "raise":
        g = gaps[0]
        raise DataError(
            f"gap of {g.length_s:.3f} s with no JointState ({len(gaps)} gap(s) in all)",
            bag=bag,
            topic=g.topic,
            time_s=round((g.start_ns - int(t[0])) * 1e-9, 6),
            start_ns=g.start_ns,
        )
    ranges = timing.split_at_gaps(t, gaps)
    segments = tuple(
        JointSamples(tuple(names), t[a:b], *(merged[f][a:b] if f in merged else None for f in FIELDS), source=bag)
        for a, b in ranges
    )
    report = timing.TimingReport(
        base,
        offset_s,
        spread_s,
        counts["duplicates_dropped"],
        counts["reordered"],
        counts["conflicting_duplicates"],
        tuple(gaps),
        tuple(warnings),
    )
    for text in tw:
        log.warning("%s: %s", bag, text)
    used = tuple(topic_names[k] for k in np.unique(topic_idx))
    result = JointStateRead(bag, used, segments, report, tuple(warnings), buffers.garbage)
    if min_motion_rad is not None:
        check_motion(result.segments, min_motion_rad, bag=bag)
    return result


def check_motion(
    segments: tuple[JointSamples, ...] | list[JointSamples], min_range_rad: float, bag: str | None = None
) -> None:
    """Raise `DataError` unless some joint's position range exceeds `min_range_rad` in some segment."""
    best, best_joint = 0.0, None
    for seg in segments:
        if seg.position is None or len(seg) == 0:
            continue
        span = np.nanmax(seg.position, axis=0) - np.nanmin(seg.position, axis=0)
        k = int(np.nanargmax(span)) if np.any(np.isfinite(span)) else 0
        if np.isfinite(span[k]) and span[k] > best:
            best, best_joint = float(span[k]), seg.joint_names[k]
    if best <= min_range_rad:
        raise DataError(
            f"no motion: the largest joint position range is {best:.3g} rad (needs > {min_range_rad:g} rad)",
            bag=bag,
            joint=best_joint,
        )
