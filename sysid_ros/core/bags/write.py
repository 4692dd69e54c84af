"""`BagWriter`: record raw serialized (CDR) messages into a rosbag2 bag as they arrive, crash-tolerant.

rosbags writes `metadata.yaml` only on close and keeps up to 1 MiB of mcap messages in memory; this
wrapper closes the pending mcap chunk (or commits sqlite3) every `flush_period_s` or `chunk_bytes`, so a
killed recorder loses at most that much and `repair()` rebuilds the rest. The recording's metadata (tape,
joint names, envelope, parameters) travels inside the bag as YAML on a `std_msgs/String` topic.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import yaml
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

from ..errors import BagError
from .read import BagSource, typestore_for

METADATA_TOPIC = "/sysid/metadata"
COMMANDS_KEY = "sysid_ros.command_topics"  # metadata.yaml custom_data: the topics that command a robot
LOCK_NAME = ".recording.lock"  # "<pid> <host>" while the bag is open for writing (see repair)
STRING = "std_msgs/msg/String"
INFINITE = QosTime(9223372036, 854775807)  # rmw's "infinite" duration, as rosbag2 writes it


def offered_qos(
    reliability: str = "reliable", durability: str = "volatile", depth: int = 10, history: str = "keep_last"
) -> Qos:
    """A publisher's QoS profile as rosbag2 records it in `offered_qos_profiles` (what `ros2 bag play` offers
    again): no deadline or lifespan, automatic liveliness."""
    return Qos(
        QosHistory[history.upper()],
        int(depth),
        QosReliability[reliability.upper()],
        QosDurability[durability.upper()],
        INFINITE,
        INFINITE,
        QosLiveliness.AUTOMATIC,
        INFINITE,
        False,
    )


def _plain(value: Any) -> Any:
    """`value` with numpy arrays/scalars, tuples and paths turned into YAML-safe builtins."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value


def metadata_yaml(data: dict) -> str:
    """The YAML text stored on the metadata topic."""
    return yaml.safe_dump(_plain(data), sort_keys=False)


class BagWriter:
    """Write a rosbag2 bag (mcap by default, sqlite3 on request) from raw CDR bytes.

    Topics are registered on first use with the definition from `typestore` (default: `distro`'s), so the
    bag is self-describing, and with the publishers' QoS profiles given to `set_offered_qos` before the
    topic's first message. `metadata.yaml` names `distro` as the bag's `ros_distro`. Use as a context
    manager or call `open()` / `close()`; thread-safe.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        storage: str = "mcap",
        flush_period_s: float = 0.5,
        chunk_bytes: int = 256 * 1024,
        typestore=None,
        distro: str = "jazzy",
    ) -> None:
        if storage not in ("mcap", "sqlite3"):
            raise BagError(f"storage must be mcap or sqlite3, not {storage!r}", bag=str(path))
        self.path = Path(path)
        self.storage = storage
        self.flush_period_s = flush_period_s
        self.chunk_bytes = chunk_bytes
        self.distro = distro
        self.typestore = typestore or typestore_for(distro)
        self._writer = None
        self._connections: dict[str, Any] = {}
        self._offered_qos: dict[str, list[Qos]] = {}
        self._lock = threading.Lock()
        self._last_flush = time.monotonic()
        self.message_count = 0

    def __enter__(self) -> BagWriter:
        self.open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def open(self) -> None:
        """Create the bag directory (it must not exist)."""
        from rosbags.rosbag2 import StoragePlugin, Writer, WriterError

        plugin = StoragePlugin.MCAP if self.storage == "mcap" else StoragePlugin.SQLITE3
        try:
            writer = Writer(self.path, version=9, storage_plugin=plugin)
            writer.open()
        except WriterError as exc:
            raise BagError(f"cannot create bag: {exc}", bag=str(self.path)) from None
        self._writer = writer
        self._last_flush = time.monotonic()
        # while this file exists and names a live process, `repair` refuses the bag (it is being recorded)
        (self.path / LOCK_NAME).write_text(f"{os.getpid()} {socket.gethostname()}\n")

    def add_topic(self, topic: str, msgtype: str, *, msgdef: str | None = None, rihs01: str | None = None):
        """Register `topic` (done automatically by `write_raw` for types the typestore knows)."""
        with self._lock:
            return self._add_topic(topic, msgtype, msgdef, rihs01)

    def set_offered_qos(self, topic: str, profiles: list[Qos]) -> None:
        """The QoS profiles `topic`'s publishers offer (see `offered_qos`), recorded when the topic is added."""
        with self._lock:
            self._offered_qos[topic] = list(profiles)

    def _add_topic(self, topic: str, msgtype: str, msgdef: str | None, rihs01: str | None):
        if self._writer is None:
            raise BagError("bag writer is not open", bag=str(self.path), topic=topic)
        conn = self._connections.get(topic)
        if conn is not None:
            if conn.msgtype != msgtype:
                raise BagError(
                    f"topic already recorded as {conn.msgtype}, got {msgtype}", bag=str(self.path), topic=topic
                )
            return conn
        if msgdef is None and msgtype not in self.typestore.fielddefs:
            raise BagError(
                f"message type {msgtype} unknown to the typestore: pass msgdef and rihs01 to add_topic",
                bag=str(self.path),
                topic=topic,
            )
        try:
            conn = self._writer.add_connection(
                topic,
                msgtype,
                typestore=self.typestore,
                msgdef=msgdef,
                rihs01=rihs01,
                offered_qos_profiles=self._offered_qos.get(topic, ()),
            )
        except Exception as exc:
            raise BagError(f"cannot add topic: {exc}", bag=str(self.path), topic=topic) from None
        self._connections[topic] = conn
        return conn

    def write_raw(self, topic: str, msgtype: str, timestamp_ns: int, cdr_bytes: bytes | memoryview) -> None:
        """Append one serialized message received at `timestamp_ns`."""
        with self._lock:
            conn = self._connections.get(topic)
            if conn is None or conn.msgtype != msgtype:
                conn = self._add_topic(topic, msgtype, None, None)
            self._writer.write(conn, int(timestamp_ns), bytes(cdr_bytes))  # type: ignore[union-attr]
            self.message_count += 1
            self._maybe_flush()

    def write_message(self, topic: str, msgtype: str, timestamp_ns: int, message: object) -> None:
        """Serialize a rosbags message object with the typestore and append it."""
        self.write_raw(topic, msgtype, timestamp_ns, self.typestore.serialize_cdr(message, msgtype))

    def write_metadata(self, data: dict, timestamp_ns: int, topic: str = METADATA_TOPIC) -> None:
        """Store `data` (tape, joint names, envelope, parameters, ...) as YAML on `topic`, flushed at once."""
        message = self.typestore.types[STRING](data=metadata_yaml(data))
        self.write_message(topic, STRING, timestamp_ns, message)
        self.flush()

    def flush(self) -> None:
        """Hand everything written so far to the operating system (ends the pending mcap chunk)."""
        with self._lock:
            self._flush()

    def _maybe_flush(self) -> None:
        storage = getattr(self._writer, "storage", None)
        pending = getattr(getattr(storage, "chunk", None), "bio", None)
        if (
            pending is not None and pending.tell() >= self.chunk_bytes
        ) or time.monotonic() - self._last_flush >= self.flush_period_s:
            self._flush()

    def _flush(self) -> None:
        storage = getattr(self._writer, "storage", None)
        if storage is None:
            return
        # rosbags 0.11.9 internals: McapWriter keeps the open chunk in `chunk`; Sqlite3Writer has `conn`.
        chunk = getattr(storage, "chunk", None)
        if chunk is not None and hasattr(storage, "close_chunk"):
            if chunk.bio.tell():
                storage.close_chunk()
            storage.bio.flush()
        elif hasattr(storage, "conn"):
            storage.conn.commit()
        self._last_flush = time.monotonic()

    def set_custom_data(self, key: str, value: str) -> None:
        """A string kept in `metadata.yaml` (`custom_data`), written on close."""
        with self._lock:
            if self._writer is None:
                raise BagError("bag writer is not open", bag=str(self.path))
            self._writer.set_custom_data(key, value)

    def mark_commands(self, topics: list[str]) -> None:
        """Mark `topics` as commands to a robot in `metadata.yaml` (see `replay_safe_copy`)."""
        self.set_custom_data(COMMANDS_KEY, ",".join(topics))

    def abort(self) -> None:
        """Give up the bag being written: close what is open and remove its folder."""
        with self._lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:
                pass
        shutil.rmtree(self.path, ignore_errors=True)

    def close(self) -> None:
        """Finish the bag (writes the mcap summary and `metadata.yaml`)."""
        with self._lock:
            if self._writer is None:
                return
            writer, self._writer = self._writer, None
            try:
                writer.close()
                _name_distro(self.path, self.distro)
            except Exception as exc:
                raise BagError(f"cannot close bag: {exc}", bag=str(self.path)) from None
            finally:
                (self.path / LOCK_NAME).unlink(missing_ok=True)


def _name_distro(bag: Path, distro: str) -> None:
    """Put `distro` as `ros_distro` into the closed bag's `metadata.yaml` (rosbags writes "rosbags"), replacing
    the file atomically."""
    path = bag / "metadata.yaml"
    text = path.read_text()
    lines = [f"  ros_distro: {distro}" if line.startswith("  ros_distro: ") else line for line in text.splitlines()]
    staged = path.with_name(f".metadata.yaml.{os.getpid()}")
    staged.write_text("\n".join(lines) + "\n")
    os.replace(staged, path)


def read_metadata(bag: str | Path, topic: str = METADATA_TOPIC, *, distro: str | None = None) -> list[dict]:
    """The YAML documents stored on the metadata topic, in record order (empty if the bag has none)."""
    with BagSource(bag, distro=distro) as src:
        if topic not in src.topics:
            return []
        conns = src.connections_for([topic])
        out = []
        for conn, record_ns, raw in src.messages(conns):
            text = src.deserialize(raw, conn.msgtype, topic=topic, record_ns=record_ns).data
            try:
                out.append(yaml.safe_load(text))
            except yaml.YAMLError as exc:
                raise BagError(
                    f"metadata is not valid YAML: {exc}", bag=str(bag), topic=topic, record_ns=record_ns
                ) from None
        return out
