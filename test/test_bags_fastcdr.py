"""The fast CDR decoders agree with rosbags' deserializer on every layout: any frame_id and name lengths
(alignment), empty and filled arrays, both byte orders, Float64MultiArray with labelled dimensions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from support.bags import F64, JAZZY, JS, joint_state
from sysid_ros.core.bags import decode_cdr, decode_f64_array_cdr, names_from_key

text = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", max_size=9)
floats = st.floats(allow_nan=False, width=64)


@settings(max_examples=200, deadline=None)
@given(
    frame=text,
    names=st.lists(text, max_size=5),
    stamp=st.integers(0, 2**31 * 10**9 - 1),
    fill=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    little=st.booleans(),
    data=st.data(),
)
def test_joint_state_decoder_matches_rosbags(frame, names, stamp, fill, little, data):
    n = len(names)
    arrays = [data.draw(st.lists(floats, min_size=n, max_size=n)) if f else [] for f in fill]
    msg = joint_state(stamp, names, *arrays)
    msg.header.frame_id = frame
    raw = bytes(JAZZY.serialize_cdr(msg, JS, little_endian=little))
    ref = JAZZY.deserialize_cdr(raw, JS)
    stamp_ns, key, pos, vel, eff = decode_cdr(raw)
    assert stamp_ns == ref.header.stamp.sec * 1_000_000_000 + ref.header.stamp.nanosec
    assert names_from_key(key) == ref.name
    for mine, theirs in zip((pos, vel, eff), (ref.position, ref.velocity, ref.effort)):
        np.testing.assert_array_equal(mine, theirs)


@settings(max_examples=100, deadline=None)
@given(
    labels=st.lists(text, max_size=3),
    values=st.lists(floats, max_size=8),
    little=st.booleans(),
    offset=st.integers(0, 7),
)
def test_float64_multiarray_decoder_matches_rosbags(labels, values, little, offset):
    dim = JAZZY.types["std_msgs/msg/MultiArrayDimension"]
    layout = JAZZY.types["std_msgs/msg/MultiArrayLayout"](
        dim=[dim(label=lab, size=k + 1, stride=2 * k + 1) for k, lab in enumerate(labels)], data_offset=offset
    )
    msg = JAZZY.types[F64](layout=layout, data=np.asarray(values, dtype=np.float64))
    raw = bytes(JAZZY.serialize_cdr(msg, F64, little_endian=little))
    np.testing.assert_array_equal(decode_f64_array_cdr(raw), JAZZY.deserialize_cdr(raw, F64).data)
