"""The bad-input catalogue: every broken or unusable bag gives a clear `BagError` / `DataError` naming what is
wrong (bag, topic, joint, time), never a crash from deep inside a library and never silently wrong arrays."""

from __future__ import annotations

import hashlib
import os
import re

import numpy as np
import pytest
import yaml

from support.bags import JAZZY, JS, T0_NS, joint_state, sine_states, strip_definitions, write_bag
from sysid_ros.core.bags import inspect_bag, read_commands, read_joint_states
from sysid_ros.core.errors import BagError, DataError

STORAGES = ("mcap", "sqlite3")
MS = 1_000_000


def _bag(tmp_path, storage, seconds=1.0):
    msgs, truth = sine_states(seconds=seconds)
    return write_bag(tmp_path / "bag", msgs, storage), truth


def digest(*paths):
    """One hash over every file (name and bytes) under `paths`, symlinks by their target."""
    h = hashlib.sha256()
    for root in paths:
        for f in sorted(p for p in ([root] if root.is_file() else root.rglob("*")) if p.is_file()):
            h.update(str(f).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _data_file(bag):
    return next(p for p in bag.iterdir() if p.suffix in (".mcap", ".db3"))


@pytest.mark.parametrize("storage", STORAGES)
def test_truncated_file(tmp_path, storage):
    bag, _ = _bag(tmp_path, storage)
    f = _data_file(bag)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(BagError, match=f"bag={bag}") as err:
        read_joint_states(bag)
    assert "cannot open bag" in str(err.value) or "damaged" in str(err.value)


@pytest.mark.parametrize("storage", STORAGES)
def test_corrupted_file(tmp_path, storage):
    """A block of 0xFF bytes in the middle of the data."""
    bag, _ = _bag(tmp_path, storage)
    f = _data_file(bag)
    data = bytearray(f.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 4096] = b"\xff" * 4096
    f.write_bytes(bytes(data))
    with pytest.raises((BagError, DataError), match=f"bag={bag}"):
        read_joint_states(bag)


@pytest.mark.parametrize("storage", STORAGES)
def test_missing_metadata_yaml_points_to_repair(tmp_path, storage):
    bag, _ = _bag(tmp_path, storage)
    (bag / "metadata.yaml").unlink()
    with pytest.raises(BagError, match="no metadata.yaml.*repair"):
        read_joint_states(bag)


@pytest.mark.parametrize("storage", STORAGES)
def test_missing_data_file(tmp_path, storage):
    bag, _ = _bag(tmp_path, storage)
    name = _data_file(bag).name
    _data_file(bag).unlink()
    with pytest.raises(BagError, match=f"missing: \\['{name}'\\]"):
        read_joint_states(bag)


@pytest.mark.parametrize("version", [3, 10])
def test_unsupported_metadata_version(tmp_path, version):
    bag, _ = _bag(tmp_path, "mcap")
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())
    meta["rosbag2_bagfile_information"]["version"] = version
    (bag / "metadata.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(BagError, match=f"unsupported rosbag2 metadata version {version}"):
        read_joint_states(bag)


def test_garbage_metadata_and_not_a_bag(tmp_path):
    bag, _ = _bag(tmp_path, "mcap")
    (bag / "metadata.yaml").write_text("just: [text")
    with pytest.raises(BagError, match="not valid rosbag2 metadata"):
        read_joint_states(bag)
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(BagError, match="not a bag"):
        read_joint_states(other)
    with pytest.raises(BagError, match="bag not found"):
        read_joint_states(tmp_path / "nope")


@pytest.mark.parametrize("storage", STORAGES)
def test_unknown_message_type(tmp_path, storage):
    """A custom type recorded without its definition cannot be decoded: said so, and JointStates still read."""
    from rosbags.typesys import get_types_from_msg

    store = JAZZY.__class__.__new__(JAZZY.__class__)
    store.__dict__.update(JAZZY.__dict__)
    store.fielddefs = dict(JAZZY.fielddefs)
    store.types = dict(JAZZY.types)
    store.register(get_types_from_msg("float64 x", "my_msgs/msg/Thing"))
    thing = store.types["my_msgs/msg/Thing"](x=1.0)
    msgs, truth = sine_states(seconds=0.2)
    msgs.append(("/thing", "my_msgs/msg/Thing", T0_NS, thing))
    bag = write_bag(tmp_path / "bag", msgs, storage, ts=store)
    strip_definitions(bag)
    summary = inspect_bag(bag)
    (thing_topic,) = [t for t in summary.topics if t.name == "/thing"]
    assert not thing_topic.usable and "cannot decode" in thing_topic.reason
    with pytest.raises(BagError, match="my_msgs/msg/Thing.*topic=/thing"):
        read_commands(bag, "/thing", joint_names=["a"])
    with pytest.raises(BagError, match="not sensor_msgs/msg/JointState.*topic=/thing"):
        read_joint_states(bag, topics=["/thing"])
    np.testing.assert_array_equal(read_joint_states(bag).samples.position, truth["position"])


@pytest.mark.parametrize("storage", STORAGES)
def test_empty_bag(tmp_path, storage):
    from rosbags.rosbag2 import StoragePlugin, Writer

    bag = tmp_path / "empty"
    with Writer(bag, version=9, storage_plugin=StoragePlugin[storage.upper()]) as w:
        w.add_connection("/joint_states", JS, typestore=JAZZY)
    with pytest.raises(DataError, match="no JointState message.*topic=/joint_states"):
        read_joint_states(bag)
    summary = inspect_bag(bag)
    assert not summary.usable and summary.reasons == ("the bag has no messages",)
    bag2 = tmp_path / "nothing"
    with Writer(bag2, version=9, storage_plugin=StoragePlugin[storage.upper()]):
        pass
    with pytest.raises(BagError, match="no sensor_msgs/msg/JointState topic"):
        read_joint_states(bag2)


@pytest.mark.parametrize("storage", STORAGES)
def test_no_motion(tmp_path, storage):
    rng = np.random.default_rng(0)
    msgs = [
        (
            "/js",
            JS,
            T0_NS + i * 5 * MS,
            joint_state(T0_NS + i * 5 * MS, ["a", "b"], 0.3 + 1e-4 * rng.standard_normal(2)),
        )
        for i in range(100)
    ]
    bag = write_bag(tmp_path / "bag", msgs, storage)
    with pytest.raises(DataError, match="no motion.*bag="):
        read_joint_states(bag, min_motion_rad=0.01)
    summary = inspect_bag(bag)
    assert not summary.usable and "no motion" in summary.reasons[0]


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("bad", [np.nan, np.inf, 1e98, -3e160, 1e254])
def test_a_garbage_row_is_dropped_counted_and_named(tmp_path, storage, bad):
    """A real controller's log holds garbage rows (non-finite, or 1e98-1e254 rad): dropped with a count and a
    warning naming when the first came, in the reader and in `inspect` (it passed as "usable: yes")."""
    msgs, truth = sine_states(seconds=0.2)
    t = T0_NS + 7 * 5 * MS
    msgs[7] = ("/joint_states", JS, t, joint_state(t, ["j1", "j2", "j3"], [0.0, bad, 0.0], [0, 0, 0], [0, 0, 0]))
    bag = write_bag(tmp_path / "bag", msgs, storage)
    read = read_joint_states(bag)
    assert read.dropped_rows == 1 and len(read.samples) == 39 and t not in read.samples.time_ns
    assert np.all(np.abs(read.samples.position) < 1.0)
    assert any("1 of 40 joint states dropped as garbage" in w and f"record time {t} ns" in w for w in read.warnings)
    summary = inspect_bag(bag, min_motion_rad=0.0)
    assert any("dropped as garbage" in note for note in summary.notes)
    # a huge velocity or effort is garbage too; a NaN there only means "not measured"
    msgs[9] = (
        "/joint_states",
        JS,
        msgs[9][2],
        joint_state(msgs[9][2], ["j1", "j2", "j3"], [0.0, 0.1, 0.0], [0, np.inf, 0], [np.nan, 0, 0]),
    )
    msgs[11] = (
        "/joint_states",
        JS,
        msgs[11][2],
        joint_state(msgs[11][2], ["j1", "j2", "j3"], [0.0, 0.1, 0.0], [0, 0, 0], [np.nan, np.nan, np.nan]),
    )
    assert read_joint_states(write_bag(tmp_path / "bag2", msgs, storage)).dropped_rows == 2


@pytest.mark.parametrize("storage", STORAGES)
def test_a_record_that_is_mostly_garbage_is_refused_in_one_line(tmp_path, storage):
    msgs, _ = sine_states(seconds=0.2)
    for i in range(0, 40, 2):  # half of the rows, and one more
        t = msgs[i][2]
        msgs[i] = ("/joint_states", JS, t, joint_state(t, ["j1", "j2", "j3"], [1e98, 0.0, 0.0], [0, 0, 0], [0, 0, 0]))
    t = msgs[1][2]
    msgs[1] = ("/joint_states", JS, t, joint_state(t, ["j1", "j2", "j3"], [np.nan, 0.0, 0.0], [0, 0, 0], [0, 0, 0]))
    bag = write_bag(tmp_path / "bag", msgs, storage)
    with pytest.raises(DataError, match=r"^mostly garbage: 21 of 40 joint states .*\(bag="):
        read_joint_states(bag)
    summary = inspect_bag(bag)
    assert not summary.usable and "mostly garbage" in summary.reasons[0]


@pytest.mark.parametrize("storage", STORAGES)
def test_missing_joint_or_topic(tmp_path, storage):
    bag, _ = _bag(tmp_path, storage, seconds=0.2)
    with pytest.raises(DataError, match=r"never appear.*\['elbow'\].*joint=elbow"):
        read_joint_states(bag, joints=["j1", "elbow"])
    with pytest.raises(BagError, match="topic not in bag.*topic=/arm/joint_states"):
        read_joint_states(bag, topics=["/arm/joint_states"])
    with pytest.raises(BagError, match="topic not in bag.*topic=/effort_controller/commands"):
        read_commands(bag, "/effort_controller/commands", joint_names=["j1"])


@pytest.mark.parametrize("storage", STORAGES)
def test_inconsistent_array_lengths(tmp_path, storage):
    t = T0_NS
    msgs = [("/js", JS, t, joint_state(t, ["a", "b"], [1.0, 2.0], [1.0]))]
    bag = write_bag(tmp_path / "bag", msgs, storage)
    with pytest.raises(DataError, match=f"velocity has 1 values for 2 names.*topic=/js, record_ns={t}"):
        read_joint_states(bag)
    msgs = [("/js", JS, t, joint_state(t, ["a", "a"], [1.0, 2.0]))]
    with pytest.raises(DataError, match=r"repeat within one message: \['a'\]"):
        read_joint_states(write_bag(tmp_path / "bag2", msgs, storage))


# --- bag repair: never changes a byte of the original (issue 12, section 2) ---------------------------------


def _aged(bag):
    """Every file of `bag` last changed long ago (a finished recording, not one being written)."""
    for p in [bag, *bag.iterdir()]:
        os.utime(p, (1e9, 1e9), follow_symlinks=False)
    return bag


def _repair_cli(capsys, *argv):
    from sysid_ros.cli import main

    code = main(["bag", "repair", *map(str, argv)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 1, err
    return code, out, err


def _one_chunk_bag(tmp_path, seconds=1.0):
    """A killed recording whose only chunk is cut in the middle (BagWriter's chunk holds ~1 s at 200 Hz)."""
    msgs, truth = sine_states(seconds=seconds)
    bag = write_bag(tmp_path / "rec", msgs, "mcap")
    (bag / "metadata.yaml").unlink()
    f = _data_file(bag)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    return _aged(bag), truth


def test_repair_recovers_the_records_of_a_cut_chunk(tmp_path, capsys):
    bag, truth = _one_chunk_bag(tmp_path)
    before = digest(bag)
    code, out, _ = _repair_cli(capsys, bag)
    assert code == 0 and digest(bag) == before  # every input byte kept, nothing added to the bag
    repaired = tmp_path / "rec_repaired"
    s = read_joint_states(repaired).samples
    # about half the chunk was there: every message in it, exactly the recorded prefix
    assert 0.4 * len(truth["position"]) < len(s) < len(truth["position"])
    np.testing.assert_array_equal(s.position, truth["position"][: len(s)])
    assert f"recovered {len(s)} messages" in out and "/joint_states" in out
    assert re.search(r"lost: \d+ bytes at the end .*the last chunk is cut: \d+ complete records recovered", out), out
    assert f"the original {bag} is untouched" in out
    code, _, err = _repair_cli(capsys, bag)  # a second run does not overwrite the first one's output
    assert code != 0 and "exists already" in err and digest(bag) == before


def test_repair_with_nothing_recoverable_fails_and_writes_nothing(tmp_path, capsys):
    bag, _ = _one_chunk_bag(tmp_path)
    f = _data_file(bag)
    f.write_bytes(f.read_bytes()[:40])  # magic, header, the start of the chunk's header
    _aged(bag)
    before = digest(bag)
    code, _, err = _repair_cli(capsys, bag)
    assert code != 0 and "nothing could be recovered" in err
    assert digest(bag) == before and sorted(p.name for p in tmp_path.iterdir()) == ["rec"]


@pytest.mark.parametrize("storage", STORAGES)
def test_repair_leaves_a_complete_bag_alone(tmp_path, capsys, storage):
    bag, _ = _bag(tmp_path, storage)
    before = digest(bag)
    code, out, _ = _repair_cli(capsys, bag)
    assert code == 0 and "already opens" in out and digest(bag) == before
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())
    meta["rosbag2_bagfile_information"]["version"] = 10  # newer than this reader: complete, not damaged
    (bag / "metadata.yaml").write_text(yaml.safe_dump(meta))
    before = digest(bag)
    code, _, err = _repair_cli(capsys, bag)
    assert code != 0 and "repair leaves the bag as it is" in err and "version 10" in err
    assert digest(bag) == before and sorted(p.name for p in tmp_path.iterdir()) == ["bag"]


def test_repair_refuses_a_bag_being_recorded(tmp_path, capsys):
    from sysid_ros.core.bags import BagWriter

    msgs, _ = sine_states(seconds=0.2)
    with BagWriter(tmp_path / "live") as w:  # open for writing by this (live) process
        for topic, msgtype, t, msg in msgs:
            w.write_message(topic, msgtype, t, msg)
        w.flush()
        _aged(tmp_path / "live")
        before = digest(tmp_path / "live")
        code, _, err = _repair_cli(capsys, tmp_path / "live")
        assert code != 0 and f"being recorded by process {os.getpid()}" in err
        assert digest(tmp_path / "live") == before
    # another recorder (no lock file of ours): a file changed a moment ago
    bag, _ = _one_chunk_bag(tmp_path)
    _data_file(bag).touch()
    code, _, err = _repair_cli(capsys, bag)
    assert code != 0 and "may still be recording" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live", "rec"]


def test_repair_refuses_a_concurrent_repair(tmp_path, capsys):
    from sysid_ros.core.bags.repair import _repair_lock

    bag, _ = _one_chunk_bag(tmp_path)
    before = digest(bag)
    with _repair_lock(bag):  # another repair holds the bag
        code, _, err = _repair_cli(capsys, bag)
    assert code != 0 and "another repair of this bag is running" in err
    assert digest(bag) == before and sorted(p.name for p in tmp_path.iterdir()) == ["rec"]


def test_repair_with_a_symlinked_metadata_yaml(tmp_path, capsys):
    bag, _ = _one_chunk_bag(tmp_path)
    elsewhere = tmp_path / "kept" / "metadata.yaml"
    elsewhere.parent.mkdir()
    elsewhere.write_text("not: [valid")
    (bag / "metadata.yaml").symlink_to(elsewhere)
    _aged(bag)
    before = digest(bag, elsewhere)
    code, out, _ = _repair_cli(capsys, bag)
    assert code == 0 and digest(bag, elsewhere) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "rec", "rec_repaired"]  # no temp dir left
    assert len(read_joint_states(tmp_path / "rec_repaired").samples) > 0


def test_repair_sqlite3_with_a_hot_journal_works_on_a_copy(tmp_path, capsys):
    bag, truth = _bag(tmp_path, "sqlite3")
    (bag / "metadata.yaml").unlink()
    db = _data_file(bag)
    (db.parent / (db.name + "-journal")).write_bytes(b"")  # an (empty) journal left by a killed writer
    _aged(bag)
    before = digest(bag)
    code, out, _ = _repair_cli(capsys, bag, "--out", tmp_path / "fixed")
    assert code == 0 and digest(bag) == before
    np.testing.assert_array_equal(read_joint_states(tmp_path / "fixed").samples.position, truth["position"])


def test_a_continuous_joints_accumulated_angle_is_not_garbage(tmp_path):
    """A wheel or a turntable accumulates its angle: 5,000 rad after 500 s at 10 rad/s is a measurement, kept."""
    msgs = []
    for k in range(40):
        t = T0_NS + k * 5 * MS
        msgs.append(("/joint_states", JS, t, joint_state(t, ["wheel"], [5000.0 + 0.05 * k], [10.0], [0.2])))
    read = read_joint_states(write_bag(tmp_path / "bag", msgs, "mcap"))
    assert read.dropped_rows == 0 and len(read.samples) == 40 and read.samples.position[0, 0] == 5000.0
