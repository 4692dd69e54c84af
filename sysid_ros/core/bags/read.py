"""Open any bag rosbags can read (rosbag2 mcap / sqlite3, metadata 4-9, ROS 1) and stream its messages.

Every failure becomes a `BagError` naming the bag (and the topic and record time when known).
"""

from __future__ import annotations

import logging
import sqlite3
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from ..errors import BagError
from ..files import load_yaml

if TYPE_CHECKING:
    from rosbags.highlevel import AnyReader
    from rosbags.interfaces import Connection
    from rosbags.rosbag1 import Reader as Reader1
    from rosbags.typesys.store import Typestore

log = logging.getLogger(__name__)

SUPPORTED_METADATA_VERSIONS = range(4, 10)
"""rosbag2 `metadata.yaml` versions this reader is tested with (rosbags reads 1-9)."""

DEFAULT_DISTRO = "jazzy"
_DISTROS = ("dashing", "eloquent", "foxy", "galactic", "humble", "iron", "jazzy", "kilted", "lyrical")


@dataclass(frozen=True)
class Shortfall:
    """A topic the bag claims more messages of than a complete read gave (a damaged chunk read as its end), and
    the longest stretch of record time the read messages leave empty (where the lost ones were)."""

    topic: str
    read: int
    claimed: int
    missing_from_ns: int
    missing_to_ns: int

    @property
    def fraction(self) -> float:
        return self.read / self.claimed if self.claimed else 1.0

    def describe(self, start_ns: int | None = None) -> str:
        """One line: how much was read and where the lost messages were (seconds from `start_ns` when known)."""
        t0 = self.missing_from_ns if start_ns is None else start_ns
        return (
            f"{self.topic}: only {self.read} of the {self.claimed} messages the bag lists could be read "
            f"({100 * self.fraction:.1f} %; a damaged chunk?): nothing from {(self.missing_from_ns - t0) * 1e-9:.3f} "
            f"to {(self.missing_to_ns - t0) * 1e-9:.3f} s of the record (record time {self.missing_from_ns} to "
            f"{self.missing_to_ns} ns)"
        )


@dataclass(frozen=True)
class TopicInfo:
    """One topic of a bag: its message type and message count."""

    name: str
    msgtype: str
    count: int


def typestore_for(distro: str | None) -> Typestore:
    """The rosbags typestore of a ROS distro name (`jazzy`, `humble`, `noetic`, ...)."""
    from rosbags.typesys import Stores, get_typestore

    name = (distro or DEFAULT_DISTRO).lower()
    if name in ("noetic", "ros1", "ros1_noetic"):
        return get_typestore(Stores.ROS1_NOETIC)
    if name not in _DISTROS:
        raise BagError(f"unknown ROS distro {name!r}; expected one of {', '.join(_DISTROS)} or noetic")
    return get_typestore(Stores[f"ROS2_{name.upper()}"])


def _preflight_rosbag2(path: Path) -> dict:
    """Check a rosbag2 directory before rosbags opens it: metadata present and supported, data files present."""
    meta_path = path / "metadata.yaml"
    if not meta_path.is_file():
        data = sorted(p.name for p in path.iterdir() if p.suffix in (".mcap", ".db3"))
        hint = (
            f"; data files {data} are present: a recording that was killed can be rebuilt with "
            "sysid_ros.core.bags.repair(bag)"
            if data
            else "; no .mcap or .db3 file either"
        )
        raise BagError(f"no metadata.yaml in the bag directory{hint}", bag=str(path))
    try:
        meta = load_yaml(meta_path, "metadata.yaml")["rosbag2_bagfile_information"]
        version = int(meta["version"])
        files = [Path(p).name for p in meta["relative_file_paths"]]
    except Exception as exc:  # malformed YAML or keys
        raise BagError(f"metadata.yaml is not valid rosbag2 metadata: {exc}", bag=str(path)) from None
    if version not in SUPPORTED_METADATA_VERSIONS:
        raise BagError(f"unsupported rosbag2 metadata version {version} (supported: 4 to 9)", bag=str(path))
    missing = [name for name in files if not (path / name).is_file()]
    if missing:
        raise BagError(f"data file(s) listed in metadata.yaml are missing: {missing}", bag=str(path))
    return meta


def _is_ros1(path: Path) -> bool:
    return path.is_file() and path.suffix == ".bag"


class BagSource:
    """An open bag: topics, the typestore that decodes them, and a raw message stream.

    Use as a context manager. `distro` chooses the typestore for bags without embedded message
    definitions (default: the bag's `ros_distro`, else jazzy); ROS 1 bags whose definitions rosbags
    cannot parse (old `roslib/Header`) fall back to the ROS 1 reader with the Noetic typestore.
    """

    def __init__(self, path: str | Path, *, distro: str | None = None) -> None:
        self.path = Path(path)
        self.distro = distro
        self.metadata: dict = {}
        self.notes: list[str] = []
        self.shortfalls: list[Shortfall] = []  # filled when `messages` reads to the end and finds less than claimed
        self._reader: AnyReader | Reader1 | None = None
        self.typestore: Typestore | None = None

    # -- opening ---------------------------------------------------------------------------------
    def __enter__(self) -> BagSource:
        self.open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def open(self) -> None:
        """Open the bag or raise `BagError` saying why it cannot be read."""
        from rosbags.highlevel import AnyReader

        if not self.path.exists():
            raise BagError("bag not found", bag=str(self.path))
        if self.path.is_dir():
            self.metadata = _preflight_rosbag2(self.path)
        elif self.path.suffix not in (".bag", ".mcap", ".db3"):
            raise BagError(
                "not a bag: expected a rosbag2 directory, .mcap, .db3 or ROS 1 .bag file", bag=str(self.path)
            )
        distro = self.distro or self._bag_distro()
        default = typestore_for("noetic" if _is_ros1(self.path) else distro)
        reader = AnyReader([self.path], default_typestore=default)
        try:
            reader.open()
        except Exception as exc:  # rosbags raises several types (AnyReaderError, ReaderError, OSError, ...)
            if _is_ros1(self.path) and "unknown" in str(exc).lower():
                self._open_ros1_fallback(exc)
                return
            hint = ""
            if "end magic" in str(exc) and self.path.is_dir():
                hint = (
                    "; the mcap file is cut short (a killed recording?): sysid_ros.core.bags.repair(bag) "
                    "recovers its complete chunks"
                )
            raise BagError(f"cannot open bag: {_describe(exc)}{hint}", bag=str(self.path)) from None
        self._reader = reader
        self.typestore = reader.typestore
        embedded = [c for c in reader.connections if c.msgdef.data]
        if reader.connections and not embedded:
            self.notes.append(f"bag has no embedded message definitions; decoded with the {distro} typestore")
        lacking = sorted(
            {
                c.msgtype
                for c in reader.connections
                if c.msgtype not in reader.typestore.fielddefs and c.msgtype in default.fielddefs
            }
        )
        if lacking:  # some definitions embedded, others not: take the missing ones from the distro
            store = reader.typestore
            store.register({k: v for k, v in default.fielddefs.items() if k not in store.fielddefs})
            self.notes.append(f"definitions of {lacking} not in the bag; taken from the {distro} typestore")
        for note in self.notes:
            log.info("%s: %s", self.path, note)

    def _bag_distro(self) -> str:
        distro = str(self.metadata.get("ros_distro") or "").lower()
        return distro if distro in _DISTROS else DEFAULT_DISTRO

    def _open_ros1_fallback(self, cause: Exception) -> None:
        from rosbags.rosbag1 import Reader as Reader1

        reader = Reader1(self.path)
        try:
            reader.open()
        except Exception as exc:
            raise BagError(f"cannot open ROS 1 bag: {_describe(exc)}", bag=str(self.path)) from None
        self._reader = reader
        self.typestore = typestore_for("noetic")
        self.notes.append(f"ROS 1 definitions not usable ({cause}); decoded with the Noetic typestore")
        log.info("%s: %s", self.path, self.notes[-1])

    def close(self) -> None:
        """Close the bag (safe to call twice)."""
        if self._reader is not None:
            try:
                self._reader.close()
            finally:
                self._reader = None

    # -- contents --------------------------------------------------------------------------------
    @property
    def is_ros1(self) -> bool:
        return _is_ros1(self.path)

    @property
    def storage(self) -> str:
        """`mcap`, `sqlite3` or `rosbag1`."""
        if self.is_ros1:
            return "rosbag1"
        if self.path.is_dir():
            return str(self.metadata.get("storage_identifier", ""))
        return "mcap" if self.path.suffix == ".mcap" else "sqlite3"

    @property
    def connections(self) -> list[Connection]:
        assert self._reader is not None, "bag not open"
        return list(self._reader.connections)

    @property
    def topics(self) -> dict[str, TopicInfo]:
        """Topic name -> `TopicInfo` (a topic recorded with several types reports the first)."""
        out: dict[str, TopicInfo] = {}
        for conn in self.connections:
            prev = out.get(conn.topic)
            count = conn.msgcount + (prev.count if prev else 0)
            out[conn.topic] = TopicInfo(conn.topic, prev.msgtype if prev else conn.msgtype, count)
        return out

    def has_type(self, msgtype: str) -> bool:
        """Whether the typestore can decode `msgtype`."""
        return self.typestore is not None and msgtype in self.typestore.fielddefs

    def connections_for(self, topics: Iterable[str]) -> list[Connection]:
        """The connections of `topics`; raises `BagError` for a topic the bag lacks."""
        wanted = list(topics)
        have = {c.topic for c in self.connections}
        for topic in wanted:
            if topic not in have:
                raise BagError(f"topic not in bag (topics: {sorted(have)})", bag=str(self.path), topic=topic)
        return [c for c in self.connections if c.topic in wanted]

    def messages(self, connections: list[Connection]) -> Iterator[tuple[Connection, int, bytes]]:
        """(connection, record time ns, raw bytes) in record-time order; damage raises `BagError`.

        A read that ends without an error but with fewer messages of a connection than the bag lists (rosbags
        stops silently inside a chunk whose records were overwritten) is recorded in `shortfalls`."""
        assert self._reader is not None, "bag not open"
        last_topic, last_ns, count = None, None, 0
        seen: dict[int, list[int]] = {}  # id(connection) -> [count, first ns, previous ns, gap from, gap to]
        try:
            for conn, record_ns, raw in self._reader.messages(connections=connections):
                last_topic, last_ns = conn.topic, record_ns
                count += 1
                track = seen.get(id(conn))
                if track is None:
                    seen[id(conn)] = [1, record_ns, record_ns, 0, 0]
                else:
                    track[0] += 1
                    if record_ns - track[2] > track[4] - track[3]:
                        track[3], track[4] = track[2], record_ns
                    track[2] = record_ns
                yield conn, record_ns, raw
        except Exception as exc:  # ReaderError, SerdeError, apsw errors, struct errors on damage
            raise BagError(
                f"bag is damaged after {count} messages: {_describe(exc)}",
                bag=str(self.path),
                topic=last_topic,
                record_ns=last_ns,
            ) from None
        self.shortfalls = self._shortfalls(connections, seen)

    def _shortfalls(self, connections: list[Connection], seen: dict[int, list[int]]) -> list[Shortfall]:
        """Per topic, what a complete read gave against what the bag lists, where fewer."""
        start, end = self.start_ns, self.end_ns
        by_topic: dict[str, list] = {}
        for conn in connections:
            count, first, last, gap_from, gap_to = seen.get(id(conn), [0, end or 0, end or 0, 0, 0])
            got = by_topic.setdefault(conn.topic, [0, 0, []])
            got[0] += count
            got[1] += int(conn.msgcount or 0)
            if count:  # the empty stretches: before the first, the longest between two, after the last
                got[2] += [
                    (first - (start or first), start or first, first),
                    (gap_to - gap_from, gap_from, gap_to),
                    ((end or last) - last, last, end or last),
                ]
            elif start is not None and end is not None:
                got[2].append((end - start, start, end))
        out = []
        for topic, (count, claimed, holes) in by_topic.items():
            if count < claimed:
                _, a, b = max(holes, default=(0, 0, 0))
                out.append(Shortfall(topic, count, claimed, int(a), int(b)))
        return out

    def deserialize(
        self, raw: bytes, msgtype: str, *, topic: str | None = None, record_ns: int | None = None
    ) -> object:
        """Decode one raw message (CDR for rosbag2, ROS 1 serialization for .bag)."""
        try:
            if self.is_ros1:
                return self.typestore.deserialize_ros1(raw, msgtype)
            return self.typestore.deserialize_cdr(raw, msgtype)
        except Exception as exc:
            raise BagError(
                f"cannot decode {msgtype}: {_describe(exc)}", bag=str(self.path), topic=topic, record_ns=record_ns
            ) from None

    def decoder(self, msgtype: str, *, topic: str) -> Callable[[bytes, str], object]:
        """The typestore's `(raw, msgtype) -> message` function, after checking it knows `msgtype`."""
        if not self.has_type(msgtype):
            raise BagError(
                f"message type {msgtype} is unknown to the typestore (no definition in the bag "
                "and not in the distro's typestore)",
                bag=str(self.path),
                topic=topic,
            )
        store = self.typestore
        return store.deserialize_ros1 if self.is_ros1 else store.deserialize_cdr

    @property
    def start_ns(self) -> int | None:
        try:
            start = self._reader.start_time  # type: ignore[union-attr]
        except Exception:
            return None
        return None if start >= 2**63 - 1 else int(start)

    @property
    def end_ns(self) -> int | None:
        try:
            end = self._reader.end_time  # type: ignore[union-attr]
        except Exception:
            return None
        return int(end) if end else None


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, (sqlite3.DatabaseError, struct.error)):
        return f"{type(exc).__name__}: {text}"
    return text
