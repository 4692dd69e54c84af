"""Make a killed recording readable again: rebuild `metadata.yaml` (and, for mcap, the index).

After SIGKILL rosbags leaves no `metadata.yaml`; the mcap file keeps every chunk written so far but has no
summary or footer, and a sqlite3 file keeps what was committed (plus a hot journal to roll back).
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import BagError
from .read import BagSource


@dataclass(frozen=True)
class RepairReport:
    """What `repair` recovered: messages per topic, the time span, and the bytes it had to drop."""

    bag: str
    storage: str
    messages: int
    topics: dict[str, int] = field(default_factory=dict)
    start_ns: int | None = None
    end_ns: int | None = None
    dropped_bytes: int = 0
    note: str = ""


def repair(bag_dir: str | Path, *, keep_damaged: bool = True) -> RepairReport:
    """Rebuild a killed rosbag2 recording in place so that rosbags' `AnyReader` opens it.

    mcap: the readable records are streamed into a new, indexed file (the damaged one is kept as
    `<name>.damaged` when `keep_damaged`). sqlite3: the hot journal is rolled back and `metadata.yaml`
    is written from the tables. A bag that already opens is left alone.
    """
    path = Path(bag_dir)
    if not path.is_dir():
        raise BagError("repair needs a rosbag2 bag directory", bag=str(path))
    if (path / "metadata.yaml").is_file():
        try:
            with BagSource(path) as src:
                count = sum(t.count for t in src.topics.values())
            return RepairReport(str(path), "", count, note="bag already opens; nothing repaired")
        except BagError:
            pass  # rebuild below
    data = sorted(p for p in path.iterdir() if p.suffix in (".mcap", ".db3"))
    if len(data) != 1:
        raise BagError(f"repair needs exactly one .mcap or .db3 file in the bag, found {[p.name for p in data]}",
                       bag=str(path))
    if data[0].suffix == ".mcap":
        return _repair_mcap(path, data[0], keep_damaged)
    return _repair_sqlite3(path, data[0])


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


def _repair_mcap(path: Path, src_file: Path, keep_damaged: bool) -> RepairReport:
    """Stream the readable records of a summary-less mcap into a fresh bag, then swap it in."""
    from mcap.records import Channel, Message, Schema
    from mcap.stream_reader import StreamReader
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.rosbag2.metadata import parse_qos

    tmp_dir = path.parent / f".{path.name}.repair"
    if tmp_dir.exists():
        shutil.rmtree(tmp_dir)
    schemas: dict[int, Schema] = {}
    conns: dict[int, object] = {}
    topics: dict[str, int] = {}
    start, end, count, good_offset = None, None, 0, 0
    note = ""
    with src_file.open("rb") as stream, Writer(tmp_dir, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        records = iter(StreamReader(stream, record_size_limit=1 << 30).records)
        while True:
            try:
                record = next(records)
            except StopIteration:
                break
            except Exception as exc:  # the torn tail of a killed recording ends here
                note = f"stopped at the damaged tail: {type(exc).__name__}: {exc}"
                break
            if isinstance(record, Schema):
                schemas[record.id] = record
            elif isinstance(record, Channel) and record.id not in conns:
                schema = schemas.get(record.schema_id)
                msgtype = schema.name if schema else ""
                msgdef, digest = _rihs01(msgtype, schema.encoding if schema else "",
                                         schema.data.decode() if schema else "")
                qos = parse_qos(record.metadata.get("offered_qos_profiles", ""))
                conns[record.id] = writer.add_connection(record.topic, msgtype, msgdef=msgdef, rihs01=digest,
                                                         serialization_format=record.message_encoding,
                                                         offered_qos_profiles=qos)
            elif isinstance(record, Message) and record.channel_id in conns:
                conn = conns[record.channel_id]
                writer.write(conn, record.log_time, record.data)
                topics[conn.topic] = topics.get(conn.topic, 0) + 1
                count += 1
                start = record.log_time if start is None else min(start, record.log_time)
                end = record.log_time if end is None else max(end, record.log_time)
            good_offset = stream.tell()
    size = src_file.stat().st_size
    new_file = next(tmp_dir.glob("*.mcap"))
    damaged = src_file.with_name(src_file.name + ".damaged")
    src_file.replace(damaged)
    new_file.replace(src_file)
    meta = yaml.safe_load((tmp_dir / "metadata.yaml").read_text())
    info = meta["rosbag2_bagfile_information"]
    info["relative_file_paths"] = [src_file.name]
    for entry in info.get("files") or []:
        entry["path"] = src_file.name
    (path / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    shutil.rmtree(tmp_dir)
    if not keep_damaged:
        damaged.unlink()
    return RepairReport(str(path), "mcap", count, topics, start, end, max(size - good_offset, 0), note)


def _repair_sqlite3(path: Path, db_file: Path) -> RepairReport:
    """Roll back the hot journal of a killed sqlite3 recording and write `metadata.yaml` from its tables."""
    try:
        con = sqlite3.connect(db_file)
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
                "GROUP BY topics.id ORDER BY topics.id").fetchall()
            first, last, count = con.execute("SELECT MIN(timestamp), MAX(timestamp), COUNT(*) FROM messages").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise BagError(f"sqlite3 file cannot be repaired: {exc}", bag=str(path)) from None
    start, duration = (int(first), int(last) - int(first)) if count else (0, 0)
    info = {
        "version": 9,
        "storage_identifier": "sqlite3",
        "relative_file_paths": [db_file.name],
        "duration": {"nanoseconds": duration},
        "starting_time": {"nanoseconds_since_epoch": start},
        "message_count": int(count),
        "topics_with_message_count": [
            {"topic_metadata": {"name": name, "type": msgtype, "serialization_format": fmt,
                                "offered_qos_profiles": qos or "", "type_description_hash": digest or ""},
             "message_count": int(n)}
            for _, name, msgtype, fmt, qos, digest, n in topics],
        "compression_format": "",
        "compression_mode": "",
        "files": [{"path": db_file.name, "starting_time": {"nanoseconds_since_epoch": start},
                   "duration": {"nanoseconds": duration}, "message_count": int(count)}],
        "custom_data": None,
        "ros_distro": "rosbags",
    }
    (path / "metadata.yaml").write_text(yaml.safe_dump({"rosbag2_bagfile_information": info}, sort_keys=False))
    return RepairReport(str(path), "sqlite3", int(count), {t[1]: int(t[6]) for t in topics},
                        start if count else None, int(last) if count else None, 0,
                        "rolled back the uncommitted transaction; wrote metadata.yaml")
