"""Fast, allocation-light CDR decoders for `sensor_msgs/JointState` and `std_msgs/Float64MultiArray`.

It follows rosbags' CDR rules (strings 4-aligned, float64 sequences 8-aligned only when non-empty) and
returns numpy views on the raw bytes. Each is checked against rosbags on the first message of every topic,
with a fall back to rosbags' deserializer for anything else (ROS 1, XCDR2, custom definitions).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from ..errors import BagError

_U32 = {True: struct.Struct("<I").unpack_from, False: struct.Struct(">I").unpack_from}
_STAMP = {True: struct.Struct("<iI").unpack_from, False: struct.Struct(">iI").unpack_from}
_F64 = {True: np.dtype("<f8"), False: np.dtype(">f8")}
NS = 1_000_000_000

Decoded = tuple[int, object, np.ndarray, np.ndarray, np.ndarray]
"""(header stamp ns, names key, position, velocity, effort)."""


def decode_cdr(raw: bytes | memoryview) -> Decoded:
    """Decode a CDR JointState; the names key is `(little_endian, names_bytes)`, see `names_from_key`."""
    kind = raw[1]
    if raw[0] != 0 or kind > 1:
        raise ValueError(f"unsupported CDR encapsulation {bytes(raw[:2]).hex()}")
    le = kind == 1
    u32 = _U32[le]
    sec, nsec = _STAMP[le](raw, 4)
    pos = 12 + u32(raw, 12)[0] + 4  # absolute offset after frame_id; data is aligned relative to byte 4
    pos = ((pos - 4 + 3) & -4) + 4
    start = pos
    count = u32(raw, pos)[0]
    if count * 5 > len(raw):
        raise ValueError(f"name count {count} exceeds message size {len(raw)}")
    pos += 4
    for _ in range(count):
        pos = ((pos - 4 + 3) & -4) + 4
        pos += 4 + u32(raw, pos)[0]
    key = (le, bytes(raw[start:pos]))
    dtype = _F64[le]
    arrays = []
    for _ in range(3):
        pos = ((pos - 4 + 3) & -4) + 4
        size = u32(raw, pos)[0]
        pos += 4
        if size:
            pos = ((pos - 4 + 7) & -8) + 4
        arrays.append(np.frombuffer(raw, dtype=dtype, count=size, offset=pos))
        pos += 8 * size
    return sec * NS + nsec, key, arrays[0], arrays[1], arrays[2]


def decode_f64_array_cdr(raw: bytes | memoryview) -> np.ndarray:
    """The `data` of a CDR `std_msgs/Float64MultiArray` (a view on `raw`); the layout is skipped."""
    kind = raw[1]
    if raw[0] != 0 or kind > 1:
        raise ValueError(f"unsupported CDR encapsulation {bytes(raw[:2]).hex()}")
    le = kind == 1
    u32 = _U32[le]
    n_dims = u32(raw, 4)[0]
    if n_dims * 13 > len(raw):
        raise ValueError(f"dimension count {n_dims} exceeds message size {len(raw)}")
    pos = 8
    for _ in range(n_dims):  # label (string), size, stride
        pos = ((pos - 4 + 3) & -4) + 4
        pos += 4 + u32(raw, pos)[0]
        pos = ((pos - 4 + 3) & -4) + 4 + 8
    pos = ((pos - 4 + 3) & -4) + 4 + 4  # data_offset
    size = u32(raw, pos)[0]
    pos += 4
    if size:
        pos = ((pos - 4 + 7) & -8) + 4
    return np.frombuffer(raw, dtype=_F64[le], count=size, offset=pos)


def f64_array_decoder(
    deserialize: Callable, msgtype: str, raw: bytes, allow_fast: bool
) -> Callable[[bytes], np.ndarray]:
    """The fast Float64MultiArray decoder if it agrees with rosbags on `raw`, else rosbags' own."""

    def generic(data: bytes) -> np.ndarray:
        return np.asarray(deserialize(data, msgtype).data, dtype=np.float64)

    if allow_fast:
        try:
            if np.array_equal(decode_f64_array_cdr(raw), generic(raw), equal_nan=True):
                return decode_f64_array_cdr
        except Exception:
            pass
    return generic


def names_from_key(key: object) -> list[str]:
    """The joint names behind a names key of either decoder."""
    if isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], bytes):
        le, data = key
        u32 = _U32[le]
        count, pos, names = u32(data, 0)[0], 4, []
        for _ in range(count):
            pos = (pos + 3) & -4
            length = u32(data, pos)[0]
            names.append(data[pos + 4 : pos + 4 + length - 1].decode())
            pos += 4 + length
        return names
    return list(key)  # type: ignore[call-overload]


def generic_decoder(deserialize: Callable, msgtype: str) -> Callable[[bytes], Decoded]:
    """Wrap a rosbags deserializer into the `Decoded` shape (names key = tuple of names)."""

    def decode(raw: bytes) -> Decoded:
        msg = deserialize(raw, msgtype)
        stamp = msg.header.stamp
        return (
            stamp.sec * NS + stamp.nanosec,
            tuple(msg.name),
            np.asarray(msg.position, dtype=np.float64),
            np.asarray(msg.velocity, dtype=np.float64),
            np.asarray(msg.effort, dtype=np.float64),
        )

    return decode


class JointStateDecoder:
    """Per-topic choice of the fast decoder, verified against rosbags on each topic's first message."""

    def __init__(self, deserialize: Callable, msgtype: str, allow_fast: bool, bag: str) -> None:
        self.generic = generic_decoder(deserialize, msgtype)
        self.allow_fast = allow_fast
        self.bag = bag
        self.by_topic: dict[str, Callable[[bytes], Decoded]] = {}

    def for_topic(self, topic: str, raw: bytes) -> Callable[[bytes], Decoded]:
        """The decoder to use for `topic`, chosen by comparing both decoders on `raw`."""
        choice = self.generic
        if self.allow_fast:
            try:
                fast, slow = decode_cdr(raw), self.generic(raw)
                same = (
                    fast[0] == slow[0]
                    and names_from_key(fast[1]) == list(slow[1])
                    and all(np.array_equal(a, b, equal_nan=True) for a, b in zip(fast[2:], slow[2:]))
                )
            except Exception:
                same = False
            if same:
                choice = decode_cdr
        self.by_topic[topic] = choice
        return choice


def decode_error(exc: Exception, bag: str, topic: str, record_ns: int) -> BagError:
    """A `BagError` for a message that cannot be decoded."""
    return BagError(f"cannot decode JointState: {type(exc).__name__}: {exc}", bag=bag, topic=topic, record_ns=record_ns)
