"""`inspect_bag` says what a bag holds and what identification can use (with reasons); arrays survive a round
trip through `.npz` and CSV exactly."""

from __future__ import annotations

import numpy as np
import pytest

from support.bags import F64, JAZZY, JS, T0_NS, TRAJ, float64_array, joint_state, sine_states, trajectory, write_bag
from sysid_ros.core.bags import (
    BagWriter,
    export_csv,
    load_csv_samples,
    load_npz,
    read_joint_states,
    read_recording,
    save_npz,
)
from sysid_ros.core.bags import inspect_bag as inspect
from sysid_ros.core.errors import DataError
from sysid_ros.core.signals import JointCommands

STORAGES = ("mcap", "sqlite3")
MS = 1_000_000


@pytest.mark.parametrize("storage", STORAGES)
def test_inspect_reports_topics_rates_joints_and_usability(tmp_path, storage):
    msgs, truth = sine_states(seconds=1.0, rate_hz=200)
    msgs += [
        ("/effort_controller/commands", F64, T0_NS + i * 10 * MS, float64_array([0.0, 1.0])) for i in range(100)
    ]  # 2 values, but 3 joints measured
    msgs += [("/jtc/joint_trajectory", TRAJ, T0_NS, trajectory(0, ["j1"], [(1.0, [0.5], None)]))]
    msgs += [("/chatter", "std_msgs/msg/String", T0_NS, JAZZY.types["std_msgs/msg/String"](data="hi"))]
    bag = write_bag(tmp_path / "bag", sorted(msgs, key=lambda m: m[2]), storage)
    summary = inspect(bag)
    by_name = {t.name: t for t in summary.topics}
    assert summary.usable and summary.reasons == ()
    assert summary.joints == ("j1", "j2", "j3")
    assert summary.storage == storage and summary.metadata_version == 9
    js = by_name["/joint_states"]
    assert js.role == "feedback" and js.usable and js.count == 200
    assert js.rate_hz == pytest.approx(200.0, rel=1e-9)  # stamps exactly 5 ms apart
    eff = by_name["/effort_controller/commands"]
    assert eff.role == "effort commands" and not eff.usable and "2 values per message for 3 joints" in eff.reason
    assert by_name["/jtc/joint_trajectory"].usable
    assert not by_name["/chatter"].usable and "not used for identification" in by_name["/chatter"].reason
    assert summary.duration_s == pytest.approx(0.995, abs=1e-6)
    text = summary.format()
    assert "usable for identification: yes" in text and "/chatter" in text


def test_inspect_explains_unusable_feedback(tmp_path):
    msgs = [("/js", JS, T0_NS + i * 5 * MS, joint_state(T0_NS + i * 5 * MS, ["a"], [], [], [1.0])) for i in range(50)]
    summary = inspect(write_bag(tmp_path / "bag", msgs, "mcap"))
    assert not summary.usable
    assert "carry no positions" in summary.reasons[0]
    only_cmds = [("/effort_controller/commands", F64, T0_NS, float64_array([1.0]))]
    summary = inspect(write_bag(tmp_path / "bag2", only_cmds, "mcap"))
    assert not summary.usable and "no sensor_msgs/JointState topic" in summary.reasons[0]


def test_npz_roundtrip_is_exact(tmp_path):
    bag = tmp_path / "rec"
    msgs, truth = sine_states(seconds=0.5)
    with BagWriter(bag) as w:
        w.write_metadata({"joint_names": ["j1", "j2", "j3"], "note": "npz"}, T0_NS)
        for topic, msgtype, t, msg in msgs:
            w.write_message(topic, msgtype, t, msg)
            w.write_message("/effort_controller/commands", F64, t, float64_array([1.0, 2.0, 3.0]))
    rec = read_recording(bag)
    path = save_npz(tmp_path / "arrays.npz", rec.samples, rec.commands, rec.metadata)
    samples, commands, metadata = load_npz(path)
    for f in ("position", "velocity", "effort"):
        np.testing.assert_array_equal(getattr(samples, f), getattr(rec.samples, f))
    np.testing.assert_array_equal(samples.time_ns, truth["time_ns"])
    assert samples.time_ns.dtype == np.int64
    ((name, cmd),) = commands.items()
    assert name == "/effort_controller/commands" and cmd.interface == "effort"
    np.testing.assert_array_equal(cmd.values, rec.commands[name].values)
    assert metadata == {"joint_names": ["j1", "j2", "j3"], "note": "npz"}


def test_npz_user_arrays_are_checked(tmp_path):
    path = tmp_path / "user.npz"
    np.savez(
        path,
        feedback_joint_names=np.array(["a"]),
        feedback_time_ns=np.arange(5) * 1.0,
        feedback_position=np.zeros((5, 1)),
    )
    with pytest.raises(DataError, match="integer nanoseconds"):
        load_npz(path)
    np.savez(
        path,
        feedback_joint_names=np.array(["a", "b"]),
        feedback_time_ns=np.arange(5),
        feedback_position=np.zeros((5, 1)),
    )
    with pytest.raises(DataError, match=r"position has shape \(5, 1\), expected \(5, 2\)"):
        load_npz(path)


def test_csv_export_and_import_are_exact(tmp_path):
    msgs, truth = sine_states(seconds=0.3)
    s = read_joint_states(write_bag(tmp_path / "bag", msgs, "mcap")).samples
    back = load_csv_samples(export_csv(tmp_path / "s.csv", s))
    assert back.joint_names == s.joint_names
    np.testing.assert_array_equal(back.time_ns, s.time_ns)  # integer ns survive (no float seconds)
    np.testing.assert_array_equal(back.position, s.position)  # repr() of a float64 round-trips exactly
    np.testing.assert_array_equal(back.effort, s.effort)
    cmd = JointCommands(("a", "b"), np.array([1, 2]), np.array([[1.0, 2.0], [3.0, 4.0]]), "effort")
    text = export_csv(tmp_path / "c.csv", cmd).read_text().splitlines()
    assert text == ["time_ns,a.effort_cmd,b.effort_cmd", "1,1.0,2.0", "2,3.0,4.0"]
