"""rclpy messages to CDR bytes that strict readers accept.

`rclpy.serialization.serialize_message` can return a buffer with trailing bytes past the message (seen
for `trajectory_msgs/JointTrajectory` on Jazzy: 92 bytes for an 84-byte message); DDS readers ignore
them, rosbags refuses the message ("CDR message size mismatch"). Messages written into bags by sysid_ros
are therefore converted to the bag's typestore and serialized there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_DTYPES = {
    "double": np.float64,
    "float": np.float32,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "octet": np.uint8,
    "byte": np.uint8,
    "char": np.uint8,
    "boolean": np.bool_,
}


def msgtype_of(msg: Any) -> str:
    """`pkg/msg/Name` of an rclpy message instance."""
    return f"{type(msg).__module__.split('.')[0]}/msg/{type(msg).__name__}"


def _element(type_name: str) -> str:
    inner = type_name[type_name.index("<") + 1 : type_name.rindex(">")] if "<" in type_name else type_name
    return inner.split(",")[0].strip()


def to_typestore(msg: Any, typestore: Any) -> Any:
    """The same message as an instance of the typestore's class (recursively)."""
    cls = typestore.types[msgtype_of(msg)]
    fields = {}
    for name, type_name in msg.get_fields_and_field_types().items():
        value = getattr(msg, name)
        if hasattr(value, "get_fields_and_field_types"):
            fields[name] = to_typestore(value, typestore)
        elif isinstance(value, (list, tuple)) and value and hasattr(value[0], "get_fields_and_field_types"):
            fields[name] = [to_typestore(v, typestore) for v in value]
        elif ("sequence" in type_name or type_name.endswith("]")) and _element(type_name.split("[")[0]) in _DTYPES:
            fields[name] = np.asarray(value, dtype=_DTYPES[_element(type_name.split("[")[0])])
        elif isinstance(value, (list, tuple)):
            fields[name] = list(value)
        elif isinstance(value, bytes) and len(value) == 1:  # a `byte` field: rclpy bytes, rosbags int
            fields[name] = value[0]
        else:
            fields[name] = value
    return cls(**fields)


def to_cdr(msg: Any, typestore: Any) -> bytes:
    """CDR bytes of exactly the message's length, as rosbags and ros2 bag write them."""
    return bytes(typestore.serialize_cdr(to_typestore(msg, typestore), msgtype_of(msg)))


_F64_HEADER = b"\x00\x01\x00\x00" + (0).to_bytes(4, "little") * 2  # CDR little endian; no layout dims, offset 0


def float64_array_cdr(values: Any) -> bytes:
    """CDR of a `std_msgs/Float64MultiArray` with an empty layout: the hot path of streamed commands."""
    data = np.asarray(values, dtype="<f8")
    return _F64_HEADER + len(data).to_bytes(4, "little") + (b"\x00" * 4 if len(data) else b"") + data.tobytes()
