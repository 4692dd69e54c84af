"""Reading bags of every supported kind gives the same, exact arrays: rosbag2 mcap / sqlite3, metadata
versions 4-9, bags without embedded definitions, bare storage files, and ROS 1 bags (old roslib/Header too)."""

from __future__ import annotations

import numpy as np
import pytest

from support.bags import NOETIC, set_metadata_version, sine_states, strip_definitions, write_bag, write_ros1_bag
from sysid_ros.core.bags import BagSource, read_joint_states
from sysid_ros.core.errors import BagError

STORAGES = ("mcap", "sqlite3")


def _assert_exact(read, truth):
    s = read.samples
    assert s.joint_names == truth["names"]
    np.testing.assert_array_equal(s.time_ns, truth["time_ns"])  # integer ns, exact
    # Values go through float64 CDR unchanged: exact equality, no tolerance needed.
    np.testing.assert_array_equal(s.position, truth["position"])
    np.testing.assert_array_equal(s.velocity, truth["velocity"])
    np.testing.assert_array_equal(s.effort, truth["effort"])


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("version", [4, 5, 6, 7, 8, 9])
def test_metadata_versions(tmp_path, storage, version):
    msgs, truth = sine_states(seconds=0.5)
    bag = write_bag(tmp_path / "bag", msgs, storage)
    set_metadata_version(bag, version)
    read = read_joint_states(bag)
    _assert_exact(read, truth)
    with BagSource(bag) as src:
        assert src.metadata["version"] == version
        assert src.storage == storage


@pytest.mark.parametrize("storage", STORAGES)
def test_without_embedded_definitions_uses_distro_typestore(tmp_path, storage):
    msgs, truth = sine_states(seconds=0.5)
    bag = write_bag(tmp_path / "bag", msgs, storage)
    strip_definitions(bag)
    with BagSource(bag) as src:
        assert all(not c.msgdef.data for c in src.connections)
    read = read_joint_states(bag)
    _assert_exact(read, truth)
    assert any("no embedded message definitions" in w for w in read.warnings)
    # An explicit distro is honoured (humble's JointState is the same message).
    _assert_exact(read_joint_states(bag, distro="humble"), truth)
    with pytest.raises(BagError, match="unknown ROS distro"):
        read_joint_states(bag, distro="rolling-nonsense")


@pytest.mark.parametrize("storage", STORAGES)
def test_bare_storage_file(tmp_path, storage):
    msgs, truth = sine_states(seconds=0.5)
    bag = write_bag(tmp_path / "bag", msgs, storage)
    data_file = next(p for p in bag.iterdir() if p.suffix in (".mcap", ".db3"))
    _assert_exact(read_joint_states(data_file), truth)


@pytest.mark.parametrize("old_header", [False, True])
def test_ros1_bag(tmp_path, old_header):
    msgs, truth = sine_states(seconds=0.5, ts=NOETIC)
    bag = write_ros1_bag(tmp_path / "old.bag", msgs, old_header=old_header)
    read = read_joint_states(bag)
    _assert_exact(read, truth)
    with BagSource(bag) as src:
        assert src.storage == "rosbag1"
        assert any("Noetic" in n for n in src.notes) == old_header


def test_ros1_fast_path_not_used_but_same_result(tmp_path):
    """ROS 1 serialization is decoded by rosbags (the fast CDR path must not touch it)."""
    msgs, truth = sine_states(seconds=0.3, ts=NOETIC, order=lambda i: [2, 1, 0] if i % 3 else [0, 1, 2])
    bag = write_ros1_bag(tmp_path / "perm.bag", msgs)
    _assert_exact(read_joint_states(bag), truth)


def test_some_definitions_missing_are_taken_from_distro(tmp_path):
    """One topic recorded with its definition, another without (sqlite3 message_definitions row removed)."""
    import sqlite3

    from support.bags import F64, float64_array

    msgs, truth = sine_states(seconds=0.3, topic="/joint_states")
    msgs += [("/effort_controller/commands", F64, int(t), float64_array([1.0, 2.0, 3.0])) for t in truth["record_ns"]]
    bag = write_bag(tmp_path / "bag", sorted(msgs, key=lambda m: m[2]), "sqlite3")
    con = sqlite3.connect(next(bag.glob("*.db3")))
    con.execute("DELETE FROM message_definitions WHERE topic_type = 'sensor_msgs/msg/JointState'")
    con.commit()
    con.close()
    with BagSource(bag) as src:
        assert any("not in the bag" in n for n in src.notes)
    _assert_exact(read_joint_states(bag), truth)


@pytest.mark.parametrize(
    "storage,mode", [("mcap", "STORAGE"), ("mcap", "MESSAGE"), ("sqlite3", "MESSAGE"), ("mcap", "FILE")]
)
def test_compressed_bags(tmp_path, storage, mode):
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer

    from support.bags import JAZZY

    msgs, truth = sine_states(seconds=0.3)
    bag = tmp_path / "bag"
    writer = Writer(bag, version=9, storage_plugin=StoragePlugin[storage.upper()])
    writer.set_compression(CompressionMode[mode], CompressionFormat.ZSTD)
    with writer:
        conn = writer.add_connection("/joint_states", msgs[0][1], typestore=JAZZY)
        for _, msgtype, t, msg in msgs:
            writer.write(conn, t, bytes(JAZZY.serialize_cdr(msg, msgtype)))
    _assert_exact(read_joint_states(bag), truth)


@pytest.mark.parametrize("storage", STORAGES)
def test_memory_stays_near_the_size_of_the_arrays(tmp_path, storage):
    """No message is kept as an object: the peak Python allocation of a read is the arrays it returns times
    ~2.4 (buffers + one sorted copy) plus rosbags' fixed chunk buffers (mcap: a 1 MiB chunk, read and
    parsed; measured ~3 MB). Keeping the decoded JointState objects (measured 1.5 kB each, 18 MB here)
    would break the bound."""
    import tracemalloc

    msgs, truth = sine_states(seconds=12.0, rate_hz=1000.0, names=tuple(f"j{k}" for k in range(7)))
    bag = write_bag(tmp_path / "bag", msgs, storage)
    del msgs
    read_joint_states(bag)  # warm up: typestore compilation and imports are not the read's memory
    tracemalloc.start()
    try:
        s = read_joint_states(bag).samples
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out = s.time_ns.nbytes + s.position.nbytes + s.velocity.nbytes + s.effort.nbytes
    assert len(s) == 12000
    assert peak < 2.5 * out + 4 * 2**20, (peak, out)
