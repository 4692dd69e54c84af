"""Make a killed recording readable again, without touching a byte of it: the repaired bag is a new folder
next to the original (`<bag>_repaired`), the original stays exactly as it was.

After SIGKILL rosbags leaves no `metadata.yaml`; the mcap file keeps every chunk written so far but has no
summary or footer (and its last chunk may be cut), and a sqlite3 file keeps what was committed plus a hot
journal to roll back. mcap: every record of every complete chunk, and every complete record of a cut chunk
(mcap's record reader over the chunk's bytes), is written into a fresh indexed bag. sqlite3: the file and
its journal are copied, the copy rolled back, and `metadata.yaml` written from its tables.

Refused: a bag still being recorded (our `BagWriter`'s lock file names a live process, or a file changed
in the last `busy_s` seconds), a second repair of the same bag at the same time (a lock), a bag that is not
damaged, and a bag where nothing could be recovered.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from ..errors import BagError
from ..files import STALE, process_alive
from .mcap_salvage import MAGIC, mcap_records
from .read import BagSource
from .write import LOCK_NAME

BUSY_S = 5.0


@dataclass(frozen=True)
class RepairReport:
    """What `repair` recovered (messages per topic, time span) and lost (bytes of the data file)."""

    bag: str
    storage: str
    messages: int
    topics: dict[str, int] = field(default_factory=dict)
    start_ns: int | None = None
    end_ns: int | None = None
    dropped_bytes: int = 0
    note: str = ""
    repaired: str | None = None  # the new bag folder (None: nothing written)

    def __str__(self) -> str:
        if self.repaired is None:
            return f"{self.bag}: {self.note}"
        span = (
            f", {self.start_ns} .. {self.end_ns} ns ({(self.end_ns - self.start_ns) * 1e-9:.3f} s)"
            if self.start_ns is not None and self.end_ns is not None
            else ""
        )
        topics = ", ".join(f"{t} {n}" for t, n in self.topics.items())
        return (
            f"repaired {self.storage} bag written to {self.repaired} (the original {self.bag} is untouched)\n"
            f"recovered {self.messages} messages{span}: {topics or 'none'}\n"
            f"lost: {self.dropped_bytes} bytes at the end of the data file (an incomplete record)"
            f"{'; ' + self.note if self.note else ''}"
        )


def repair(bag_dir: str | Path, out: str | Path | None = None, *, busy_s: float = BUSY_S) -> RepairReport:
    """Rebuild a killed rosbag2 recording into `out` (default `<bag>_repaired` next to it).

    A bag that opens is left alone (report with `repaired=None`); `BagError` when it is being recorded,
    already being repaired, complete but unreadable for another reason, or when nothing can be recovered.
    """
    path = Path(bag_dir)
    if not path.is_dir():
        raise BagError("repair needs a rosbag2 bag directory", bag=str(path))
    try:
        names = sorted(p.name for p in path.iterdir())
    except OSError as exc:
        raise BagError(f"cannot list the bag folder: {exc.strerror}", bag=str(path)) from None
    data = [path / n for n in names if n.endswith((".mcap", ".db3"))]
    _refuse_if_recording(path, names, busy_s)
    if "metadata.yaml" in names:
        try:
            with BagSource(path) as src:
                count = sum(t.count for t in src.topics.values())
            return RepairReport(str(path), "", count, note=f"bag already opens ({count} messages); nothing repaired")
        except BagError as exc:
            if len(data) == 1 and _complete(data[0]):
                raise BagError(
                    f"the data file is complete and metadata.yaml present, so repair leaves the bag "
                    f"as it is; it does not open because: {exc}",
                    bag=str(path),
                ) from None
    if len(data) != 1:
        raise BagError(
            f"repair needs exactly one .mcap or .db3 file in the bag, found {[p.name for p in data]}", bag=str(path)
        )
    target = Path(out) if out is not None else path.with_name(f"{path.name}_repaired")
    with _repair_lock(path):
        if target.exists() or target.is_symlink():
            raise BagError(
                f"{target} exists already (an earlier repair?): remove it or pass another output", bag=str(path)
            )
        for stale in target.parent.glob(f".{target.name}.partial-*"):  # a repair killed mid-write (under the lock)
            if STALE.match(stale.name) and not process_alive(int(STALE.match(stale.name).group(1))):
                shutil.rmtree(stale, ignore_errors=True)
        work = target.with_name(f".{target.name}.partial-{os.getpid()}")
        try:  # written aside and renamed into place whole: a kill leaves nothing at the output path
            work.mkdir()
            if data[0].suffix == ".mcap":
                report = _repair_mcap(path, data[0], work / target.name)
            else:
                report = _repair_sqlite3(path, data[0], work / target.name)
            os.rename(work / target.name, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return replace(report, repaired=str(target))


def _refuse_if_recording(path: Path, names: list[str], busy_s: float) -> None:
    if LOCK_NAME in names:
        try:
            pid_text, host = (path / LOCK_NAME).read_text().split()[:2]
            pid = int(pid_text)
        except (OSError, ValueError):
            pid, host = -1, ""
        if host == socket.gethostname() and process_alive(pid):
            raise BagError(
                f"the bag is being recorded by process {pid} ({LOCK_NAME}): stop the recorder first", bag=str(path)
            )
        if host and host != socket.gethostname():
            raise BagError(
                f"the bag was opened for writing on host {host} ({LOCK_NAME}); repair it there, or "
                f"remove {LOCK_NAME} once that recorder has stopped",
                bag=str(path),
            )
        return  # our recorder died: the lock is stale
    if "metadata.yaml" in names:
        return  # written on close
    newest = max(((path / n).lstat().st_mtime for n in names), default=0.0)
    age = time.time() - newest
    if age < busy_s:
        raise BagError(
            f"the bag changed {age:.1f} s ago and has no metadata.yaml: it may still be recording; "
            f"stop the recorder (or wait {busy_s:g} s) and try again",
            bag=str(path),
        )


@contextmanager
def _repair_lock(path: Path) -> Iterator[None]:
    """One repair of a bag at a time: an exclusive lock on a file next to it (never inside it)."""
    lock = path.with_name(f".{path.name}.repair.lock")
    try:
        handle = os.fdopen(os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644), "a")
    except OSError as exc:
        raise BagError(f"cannot create the repair lock {lock}: {exc.strerror}", bag=str(path)) from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BagError("another repair of this bag is running", bag=str(path)) from None
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)


def _complete(data_file: Path) -> bool:
    """The data file ends as a closed recording does (mcap footer magic; sqlite3 without a hot journal)."""
    try:
        if data_file.suffix == ".mcap":
            size = data_file.stat().st_size
            with data_file.open("rb") as f:
                head = f.read(8)
                f.seek(max(size - 8, 0))
                return size >= 16 and head == MAGIC and f.read(8) == MAGIC
        if any(data_file.with_name(data_file.name + s).exists() for s in ("-journal", "-wal")):
            return False
        con = sqlite3.connect(f"file:{data_file}?mode=ro", uri=True)
        try:
            return con.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        finally:
            con.close()
    except (OSError, sqlite3.Error):
        return False


def _rihs01(msgtype: str, encoding: str, text: str) -> tuple[str, str]:
    """(definition, RIHS01 hash) of a schema; falls back to the jazzy typestore for empty schemas."""
    from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

    store = get_typestore(Stores.EMPTY)
    if text:
        types = get_types_from_idl(text) if encoding.endswith("idl") else get_types_from_msg(text, msgtype)
        store.register(types)
        return text, store.hash_rihs01(msgtype)
    jazzy = get_typestore(Stores.ROS2_JAZZY)
    if msgtype in jazzy.fielddefs:
        return jazzy.generate_msgdef(msgtype, ros_version=2)[0], jazzy.hash_rihs01(msgtype)
    raise BagError(f"cannot rebuild definition of {msgtype}: no schema in the file and not a jazzy type")


def _custom_data(path: Path) -> dict[str, str]:
    """`custom_data` of the original metadata.yaml, when it is there and readable (else none)."""
    try:
        info = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        return {str(k): str(v) for k, v in (info.get("custom_data") or {}).items()}
    except (OSError, yaml.YAMLError, TypeError, KeyError, AttributeError):
        return {}


def _repair_mcap(path: Path, src_file: Path, target: Path) -> RepairReport:
    """Stream the readable records of a summary-less mcap into a fresh, indexed bag at `target`."""
    from mcap.records import Channel, Message, Schema
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.rosbag2.metadata import parse_qos

    schemas: dict[int, Schema] = {}
    conns: dict[int, object] = {}
    topics: dict[str, int] = {}
    start, end, count = None, None, 0
    records, status = mcap_records(src_file)
    with Writer(target, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for key, value in _custom_data(path).items():  # e.g. the recorder's command-topic mark
            writer.set_custom_data(key, value)
        for record in records:
            if isinstance(record, Schema):
                schemas[record.id] = record
            elif isinstance(record, Channel) and record.id not in conns:
                schema = schemas.get(record.schema_id)
                msgtype = schema.name if schema else ""
                msgdef, digest = _rihs01(
                    msgtype, schema.encoding if schema else "", schema.data.decode() if schema else ""
                )
                qos = parse_qos(record.metadata.get("offered_qos_profiles", ""))
                conns[record.id] = writer.add_connection(
                    record.topic,
                    msgtype,
                    msgdef=msgdef,
                    rihs01=digest,
                    serialization_format=record.message_encoding,
                    offered_qos_profiles=qos,
                )
            elif isinstance(record, Message) and record.channel_id in conns:
                conn = conns[record.channel_id]
                writer.write(conn, record.log_time, record.data)
                topics[conn.topic] = topics.get(conn.topic, 0) + 1
                count += 1
                start = record.log_time if start is None else min(start, record.log_time)
                end = record.log_time if end is None else max(end, record.log_time)
    if count == 0:
        raise BagError(
            f"nothing could be recovered ({status['note'] or 'no complete message'}); the original is untouched",
            bag=str(path),
        )
    dropped = max(src_file.stat().st_size - status["good_offset"], 0)
    return RepairReport(str(path), "mcap", count, topics, start, end, dropped, status["note"], str(target))


def _repair_sqlite3(path: Path, db_file: Path, target: Path) -> RepairReport:
    """Copy the sqlite3 file (and its journal), roll the copy back, write `metadata.yaml` from its tables."""
    target.mkdir(parents=True)
    copy = target / f"{target.name}_0.db3"
    shutil.copyfile(db_file, copy)
    for suffix in ("-journal", "-wal"):
        side = db_file.with_name(db_file.name + suffix)
        if side.exists():
            shutil.copyfile(side, copy.with_name(copy.name + suffix))
    try:
        con = sqlite3.connect(copy)
        try:
            ok = con.execute("PRAGMA integrity_check").fetchone()[0]
            if ok != "ok":
                raise BagError(f"sqlite3 file is damaged beyond repair: {ok}", bag=str(path))
            have = {row[1] for row in con.execute("PRAGMA table_info(topics)")}
            qos = "offered_qos_profiles" if "offered_qos_profiles" in have else "''"
            digest = "type_description_hash" if "type_description_hash" in have else "''"
            topics = con.execute(
                f"SELECT topics.id, name, type, serialization_format, {qos}, {digest}, count(messages.id) "
                "FROM topics LEFT JOIN messages ON topics.id = messages.topic_id "
                "GROUP BY topics.id ORDER BY topics.id"
            ).fetchall()
            first, last, count = con.execute("SELECT MIN(timestamp), MAX(timestamp), COUNT(*) FROM messages").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise BagError(f"sqlite3 file cannot be repaired: {exc}", bag=str(path)) from None
    if not count:
        raise BagError(
            "nothing could be recovered: the sqlite3 file holds no committed message; the original is untouched",
            bag=str(path),
        )
    start, duration = int(first), int(last) - int(first)
    info = {
        "version": 9,
        "storage_identifier": "sqlite3",
        "relative_file_paths": [copy.name],
        "duration": {"nanoseconds": duration},
        "starting_time": {"nanoseconds_since_epoch": start},
        "message_count": int(count),
        "topics_with_message_count": [
            {
                "topic_metadata": {
                    "name": name,
                    "type": msgtype,
                    "serialization_format": fmt,
                    "offered_qos_profiles": qos or "",
                    "type_description_hash": digest or "",
                },
                "message_count": int(n),
            }
            for _, name, msgtype, fmt, qos, digest, n in topics
        ],
        "compression_format": "",
        "compression_mode": "",
        "files": [
            {
                "path": copy.name,
                "starting_time": {"nanoseconds_since_epoch": start},
                "duration": {"nanoseconds": duration},
                "message_count": int(count),
            }
        ],
        "custom_data": _custom_data(path) or None,
        "ros_distro": "rosbags",
    }
    (target / "metadata.yaml").write_text(yaml.safe_dump({"rosbag2_bagfile_information": info}, sort_keys=False))
    return RepairReport(
        str(path),
        "sqlite3",
        int(count),
        {t[1]: int(t[6]) for t in topics},
        start,
        int(last),
        0,
        "rolled back the uncommitted transaction (in the copy); wrote metadata.yaml",
        str(target),
    )
