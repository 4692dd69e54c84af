"""Time bases for bag data: header stamps vs record times, clock offsets, duplicates, reordering, gaps.

All arithmetic is in int64 nanoseconds. Pure functions over arrays; no bag access here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DataError

CLOCK_OFFSET_WARN_NS = 1_000_000_000
"""A median |header - record| above this is reported as a clock offset."""
CLOCK_DRIFT_LIMIT_NS = 100_000_000
"""A spread (95th - 5th percentile) of header - record above this means the clocks drift: use record times."""
MIN_GAP_NS = 20_000_000
"""The default gap threshold is 10 periods, never less than this."""


@dataclass(frozen=True)
class TimeBase:
    """Which clock stamps the data: `header` (sensor time) or `record` (when the recorder received it).

    `header_minus_record_ns` is the measured median clock offset (0 when unknown); it maps stamps of
    the other clock onto this one, so topics with and without headers share one time base.
    """

    source: str
    header_minus_record_ns: int = 0

    def from_record(self, record_ns: np.ndarray | int) -> np.ndarray:
        """Record times expressed on this time base."""
        shift = self.header_minus_record_ns if self.source == "header" else 0
        return np.asarray(record_ns, dtype=np.int64) + np.int64(shift)

    def from_header(self, header_ns: np.ndarray | int) -> np.ndarray:
        """Header stamps expressed on this time base."""
        shift = 0 if self.source == "header" else -self.header_minus_record_ns
        return np.asarray(header_ns, dtype=np.int64) + np.int64(shift)


@dataclass(frozen=True)
class Gap:
    """No sample of `topic` from `start_ns` to `end_ns` (both on the chosen time base)."""

    topic: str
    start_ns: int
    end_ns: int

    @property
    def length_s(self) -> float:
        return (self.end_ns - self.start_ns) * 1e-9


@dataclass(frozen=True)
class TimingReport:
    """What reading did to time: the base chosen, the clock offset seen, and what was fixed or split."""

    time_base: TimeBase
    clock_offset_s: float
    clock_offset_spread_s: float
    duplicates_dropped: int
    reordered: int
    conflicting_duplicates: int
    gaps: tuple[Gap, ...]
    warnings: tuple[str, ...]


def choose_time_base(
    header_ns: np.ndarray,
    record_ns: np.ndarray,
    topic_idx: np.ndarray,
    topics: tuple[str, ...],
    requested: str = "auto",
    max_backstep_ns: int = MIN_GAP_NS,
) -> tuple[TimeBase, float, float, list[str]]:
    """Pick the time base for messages with these header and record stamps (in record order).

    `auto` takes header stamps when every message has one, they do not jump backwards by more than
    `max_backstep_ns`, and header - record is steady; otherwise record times. Returns the base, the
    median clock offset and its spread (seconds, NaN without headers) and warnings.
    """
    if requested not in ("auto", "header", "record"):
        raise DataError(f"time_source must be auto, header or record, not {requested!r}")
    warnings: list[str] = []
    has_header = header_ns > 0
    offset_s = spread_s = float("nan")
    offset_ns = 0
    if has_header.any():
        diff = header_ns[has_header] - record_ns[has_header]
        offset_ns = int(np.median(diff))
        lo, hi = np.percentile(diff, [5, 95]) if len(diff) > 1 else (diff[0], diff[0])
        offset_s, spread_s = offset_ns * 1e-9, float(hi - lo) * 1e-9
    if requested == "record":
        return TimeBase("record", offset_ns), offset_s, spread_s, warnings
    if not has_header.all():
        first = int(np.argmin(has_header))
        if requested == "header":
            raise DataError(
                "message without header stamp (stamp 0) but time_source='header'",
                topic=topics[topic_idx[first]],
                record_ns=int(record_ns[first]),
            )
        if has_header.any():
            warnings.append(f"{int((~has_header).sum())} messages have no header stamp: using record times")
        return TimeBase("record", offset_ns), offset_s, spread_s, warnings
    back = _largest_backstep(header_ns, topic_idx)
    if back is not None and back[0] > max_backstep_ns:
        step, k = back
        text = (
            f"header stamps jump back by {step * 1e-9:.3f} s on {topics[topic_idx[k]]} at record time "
            f"{int(record_ns[k])} ns"
        )
        if requested == "header":
            raise DataError(
                text + "; read with time_source='record'", topic=topics[topic_idx[k]], record_ns=int(record_ns[k])
            )
        warnings.append(text + ": using record times")
        return TimeBase("record", offset_ns), offset_s, spread_s, warnings
    if requested == "auto" and spread_s * 1e9 > CLOCK_DRIFT_LIMIT_NS:
        warnings.append(
            f"header - record time varies by {spread_s:.3f} s (clocks drift or the recorder lagged): using record times"
        )
        return TimeBase("record", offset_ns), offset_s, spread_s, warnings
    if abs(offset_ns) > CLOCK_OFFSET_WARN_NS:
        warnings.append(
            f"clock offset: header stamps are {offset_s:+.3f} s from record times; using header "
            "stamps, topics without headers are shifted by the same offset"
        )
    return TimeBase("header", offset_ns), offset_s, spread_s, warnings


def _largest_backstep(times: np.ndarray, topic_idx: np.ndarray) -> tuple[int, int] | None:
    """The largest backwards step of `times` within any one topic (in given order) and where it is."""
    best: tuple[int, int] | None = None
    for t in np.unique(topic_idx):
        rows = np.flatnonzero(topic_idx == t)
        if len(rows) < 2:
            continue
        steps = times[rows[:-1]] - times[rows[1:]]
        k = int(np.argmax(steps))
        if steps[k] > 0 and (best is None or steps[k] > best[0]):
            best = (int(steps[k]), int(rows[k + 1]))
    return best


def sort_and_merge(
    time_ns: np.ndarray, topic_idx: np.ndarray, fields: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], dict[str, int]]:
    """Sort rows by time, drop same-topic duplicate stamps, and merge rows of equal time by joint.

    `fields` hold (N, J) arrays with NaN where a row does not measure a joint. Returns the unique
    times, the set of topics contributing each unique row (as a bitmask), the merged fields, and
    counts: `reordered`, `duplicates_dropped`, `conflicting_duplicates`.
    """
    n = len(time_ns)
    arrival = np.arange(n)
    reordered = int(np.count_nonzero(np.diff(time_ns) < 0)) if n > 1 else 0
    order = np.lexsort((arrival, topic_idx, time_ns))
    t, tp = time_ns[order], topic_idx[order]
    keep = np.ones(n, dtype=bool)
    if n > 1:
        keep[1:] = (t[1:] != t[:-1]) | (tp[1:] != tp[:-1])
    duplicates = int(n - keep.sum())
    conflicts = 0
    if duplicates:  # same topic, same stamp: keep the first received, count values that disagree
        kept_row = order[keep][np.cumsum(keep)[~keep] - 1]
        dropped_row = order[~keep]
        for values in fields.values():
            a, b = values[kept_row], values[dropped_row]
            conflicts += int(np.count_nonzero((a != b) & ~np.isnan(a) & ~np.isnan(b)))
    order, t, tp = order[keep], t[keep], tp[keep]
    starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]]) if len(t) else np.zeros(0, dtype=np.intp)
    merged: dict[str, np.ndarray] = {}
    for name, values in fields.items():
        rows = values[order]
        if len(rows) == 0:
            merged[name] = rows
            continue
        if len(starts) == len(rows):
            merged[name] = rows
            continue
        valid = ~np.isnan(rows)
        big = np.iinfo(np.int64).max
        idx = np.where(valid, np.arange(len(rows))[:, None], big)
        first = np.minimum.reduceat(idx, starts, axis=0)
        out = np.full((len(starts), rows.shape[1]), np.nan)
        ok = first != big
        out[ok] = rows[first[ok], np.nonzero(ok)[1]]
        hi = np.fmax.reduceat(rows, starts, axis=0)
        lo = np.fmin.reduceat(rows, starts, axis=0)
        conflicts += int(np.count_nonzero(hi != lo) - np.count_nonzero(np.isnan(hi) & np.isnan(lo)))
        merged[name] = out
    mask = np.bitwise_or.reduceat(np.left_shift(np.int64(1), tp.astype(np.int64)), starts) if len(t) else tp
    counts = {"reordered": reordered, "duplicates_dropped": duplicates, "conflicting_duplicates": conflicts}
    return t[starts] if len(t) else t, mask, merged, counts


def find_gaps(
    time_ns: np.ndarray, topic_mask: np.ndarray, topics: tuple[str, ...], max_gap_ns: int | None = None
) -> list[Gap]:
    """Intervals longer than the gap threshold with no sample of some topic (per topic).

    The default threshold is 10 median periods of that topic, at least `MIN_GAP_NS`.
    """
    gaps: list[Gap] = []
    for k, topic in enumerate(topics):
        times = time_ns[(topic_mask >> k) & 1 == 1]
        if len(times) < 2:
            continue
        dt = np.diff(times)
        limit = max_gap_ns if max_gap_ns is not None else max(10 * int(np.median(dt)), MIN_GAP_NS)
        for i in np.flatnonzero(dt > limit):
            gaps.append(Gap(topic, int(times[i]), int(times[i + 1])))
    gaps.sort(key=lambda g: g.start_ns)
    return gaps


def common_span(time_ns: np.ndarray, topic_mask: np.ndarray, n_topics: int) -> tuple[int, int]:
    """Row range [start, stop) where every topic has started and none has ended."""
    first, last = [], []
    for k in range(n_topics):
        rows = np.flatnonzero((topic_mask >> k) & 1 == 1)
        if len(rows):
            first.append(rows[0])
            last.append(rows[-1])
    if not first:
        return 0, 0
    return int(max(first)), int(min(last)) + 1


def split_at_gaps(time_ns: np.ndarray, gaps: list[Gap]) -> list[tuple[int, int]]:
    """Row ranges [start, stop) between gaps; rows strictly inside a gap are left out."""
    ranges: list[tuple[int, int]] = []
    start = 0
    for gap in sorted(gaps, key=lambda g: g.start_ns):
        stop = int(np.searchsorted(time_ns, gap.start_ns, side="right"))
        if stop > start:
            ranges.append((start, stop))
        start = max(start, int(np.searchsorted(time_ns, gap.end_ns, side="left")))
    if start < len(time_ns):
        ranges.append((start, len(time_ns)))
    return ranges
