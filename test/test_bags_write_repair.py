"""`BagWriter` writes bags others can read (rosbags, and the independent `mcap` + `mcap-ros2-support` reader),
carries the recording metadata, and a recorder killed with SIGKILL loses at most its last flush period once
`repair` has rebuilt the bag."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml
from rosbags.highlevel import AnyReader

from support.bags import JAZZY, JS, T0_NS, joint_state, sine_states
from sysid_ros.core.bags import BagWriter, read_joint_states, read_metadata, repair
from sysid_ros.core.errors import BagError

STORAGES = ("mcap", "sqlite3")
REPO = Path(__file__).resolve().parents[1]


def _write(bag, storage, seconds=0.5):
    msgs, truth = sine_states(seconds=seconds)
    meta = {"joint_names": list(truth["names"]), "tape": np.linspace(0, 1, 5), "envelope": {"j1": [-1.0, 1.0]}}
    with BagWriter(bag, storage=storage) as w:
        w.write_metadata(meta, T0_NS - 1)
        for topic, msgtype, t, msg in msgs:
            w.write_raw(topic, msgtype, t, JAZZY.serialize_cdr(msg, msgtype))
    return truth


@pytest.mark.parametrize("storage", STORAGES)
def test_writer_roundtrip_and_metadata(tmp_path, storage):
    bag = tmp_path / "rec"
    truth = _write(bag, storage)
    s = read_joint_states(bag).samples
    np.testing.assert_array_equal(s.time_ns, truth["time_ns"])
    np.testing.assert_array_equal(s.position, truth["position"])
    (meta,) = read_metadata(bag)
    assert meta == {
        "joint_names": ["j1", "j2", "j3"],
        "tape": [0.0, 0.25, 0.5, 0.75, 1.0],
        "envelope": {"j1": [-1.0, 1.0]},
    }
    with AnyReader([bag]) as reader:  # plain rosbags sees a complete, self-describing bag
        assert {c.topic: c.msgcount for c in reader.connections} == {"/sysid/metadata": 1, "/joint_states": 100}
        assert all(c.msgdef.data for c in reader.connections)


def test_writer_refuses_existing_path_and_unknown_type(tmp_path):
    bag = tmp_path / "rec"
    bag.mkdir()
    with pytest.raises(BagError, match="exists already"):
        BagWriter(bag).open()
    with BagWriter(tmp_path / "rec2") as w:
        with pytest.raises(BagError, match="my_msgs/msg/X unknown.*topic=/x"):
            w.write_raw("/x", "my_msgs/msg/X", T0_NS, b"\x00\x01\x00\x00")
        w.write_raw("/js", JS, T0_NS, JAZZY.serialize_cdr(joint_state(T0_NS, ["a"], [1.0]), JS))
        with pytest.raises(BagError, match="already recorded as sensor_msgs/msg/JointState"):
            w.write_raw("/js", "std_msgs/msg/String", T0_NS, b"")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # mcap_ros2.reader warns about its own module
def test_independent_mcap_reader_reads_bagwriter_output(tmp_path):
    from mcap_ros2.reader import read_ros2_messages

    bag = tmp_path / "rec"
    truth = _write(bag, "mcap")
    positions, stamps, meta_text = [], [], None
    for m in read_ros2_messages(str(next(bag.glob("*.mcap")))):
        if m.channel.topic == "/joint_states":
            positions.append(list(m.ros_msg.position))
            stamps.append(m.ros_msg.header.stamp.sec * 1_000_000_000 + m.ros_msg.header.stamp.nanosec)
        else:
            meta_text = m.ros_msg.data
    np.testing.assert_array_equal(np.array(positions), truth["position"])
    np.testing.assert_array_equal(np.array(stamps), truth["time_ns"])
    assert "joint_names" in meta_text


CHILD = textwrap.dedent("""
    import sys, time
    sys.path[:0] = [{repo!r}, {test!r}]
    from support.bags import JAZZY, JS, T0_NS, joint_state
    from sysid_ros.core.bags import BagWriter
    w = BagWriter(sys.argv[1], storage=sys.argv[2], flush_period_s=0.25)
    w.open()
    w.write_metadata({{"joint_names": ["a", "b"]}}, T0_NS)
    start = time.monotonic_ns()
    i = 0
    while True:
        t = T0_NS + (time.monotonic_ns() - start)  # record time follows the wall clock
        msg = joint_state(t, ["a", "b"], [float(i), -float(i)])
        w.write_raw("/joint_states", JS, t, JAZZY.serialize_cdr(msg, JS))
        if i % 50 == 0:
            print(i, t, flush=True)
        i += 1
        time.sleep(0.002)
""")


@pytest.mark.parametrize("storage", STORAGES)
def test_sigkill_mid_write_then_repair(tmp_path, storage):
    bag = tmp_path / "killed"
    code = CHILD.format(repo=str(REPO), test=str(REPO / "test"))
    proc = subprocess.Popen([sys.executable, "-c", code, str(bag), storage], stdout=subprocess.PIPE, text=True)
    last_i = last_t = -1
    try:
        for line in proc.stdout:  # let it record ~1.5 s, then kill it mid-write
            last_i, last_t = map(int, line.split())
            if last_t - T0_NS > 1_500_000_000:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert last_i > 0
    assert not (bag / "metadata.yaml").exists()
    with pytest.raises(BagError, match="no metadata.yaml.*repair"):
        read_joint_states(bag)
    report = repair(bag)
    assert not (bag / "metadata.yaml").exists()  # the original is untouched; the repaired copy is next to it
    bag = Path(report.repaired)
    s = read_joint_states(bag, max_gap_s=1.0).samples  # wall-clock stamps of a loaded machine jitter by tens of ms
    # What survives is an exact prefix: message k carries position k, no hole, no garbage.
    np.testing.assert_array_equal(s.position[:, 0], np.arange(len(s)))
    np.testing.assert_array_equal(s.position[:, 1], -np.arange(len(s)))
    assert report.topics["/joint_states"] == len(s)
    assert read_metadata(bag) == [{"joint_names": ["a", "b"]}]
    # Everything written up to one flush period (0.25 s) before the last report survives; the brief's bound is 1 s.
    lost_s = (last_t - int(s.time_ns[-1])) * 1e-9
    assert len(s) >= last_i + 1 or lost_s < 1.0, (len(s), last_i, lost_s)
    assert lost_s < 1.0
    print(f"{storage}: recovered {len(s)} messages, last printed {last_i}, lost {max(lost_s, 0):.3f} s before it")
    with AnyReader([bag]) as reader:  # rosbags alone opens the repaired bag
        assert reader.message_count == len(s) + 1
    assert repair(bag).note.startswith("bag already opens")


def test_repair_truncated_mcap_with_metadata_present(tmp_path):
    """A cut-off mcap whose metadata.yaml survived: repair keeps the complete chunks."""
    bag = tmp_path / "rec"
    msgs, truth = sine_states(seconds=2.0, rate_hz=500)
    with BagWriter(bag, chunk_bytes=16 * 1024) as w:
        w.set_custom_data("sysid_ros.command_topics", "/forward_command_controller/commands")
        for topic, msgtype, t, msg in msgs:
            w.write_raw(topic, msgtype, t, JAZZY.serialize_cdr(msg, msgtype))
    f = next(bag.glob("*.mcap"))
    f.write_bytes(f.read_bytes()[: int(f.stat().st_size * 0.7)])
    with pytest.raises(BagError, match="cut short.*repair"):
        read_joint_states(bag)
    report = repair(bag)
    s = read_joint_states(report.repaired).samples
    assert 0.5 * len(msgs) < len(s) < len(msgs) and report.messages == len(s)
    np.testing.assert_array_equal(s.position, truth["position"][: len(s)])
    assert [p.name for p in sorted(Path(report.repaired).iterdir())] == ["metadata.yaml", "rec_repaired.mcap"]
    info = yaml.safe_load((Path(report.repaired) / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["custom_data"] == {"sysid_ros.command_topics": "/forward_command_controller/commands"}


def test_repair_refuses_what_it_cannot_fix(tmp_path):
    bag = tmp_path / "rec"
    _write(bag, "sqlite3")
    (bag / "metadata.yaml").unlink()
    db = next(bag.glob("*.db3"))
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    os.utime(db, (1e9, 1e9))  # long finished: not a bag being recorded
    with pytest.raises(BagError, match="sqlite3 file (cannot be repaired|is damaged).*bag="):
        repair(bag)
    with pytest.raises(BagError, match="needs a rosbag2 bag directory"):
        repair(db)
    empty = tmp_path / "empty"
    empty.mkdir()
    os.utime(empty, (1e9, 1e9))
    with pytest.raises(BagError, match=r"exactly one .mcap or .db3 file.*\[\]"):
        repair(empty)
