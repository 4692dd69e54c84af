"""Recorded command topics are marked as commands, and `sysid-ros bag replay-safe` renames them in a copy."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from rosbags.highlevel import AnyReader

from support.bags import F64, JS, T0_NS, float64_array, joint_state
from sysid_ros.cli import main
from sysid_ros.core.bags import COMMANDS_KEY, BagWriter, command_topics, read_joint_states, read_metadata

COMMANDS = "/forward_command_controller/commands"


def recording(path, storage: str, mark: bool = True):
    """A bag as the tape_recorder writes one: metadata, joint states and a stream of commands."""
    with BagWriter(path, storage=storage) as w:
        if mark:
            w.mark_commands([COMMANDS])
        w.write_metadata({"command_topic": COMMANDS, "command_topics": [COMMANDS]}, T0_NS - 1)
        for k in range(50):
            t = T0_NS + k * 2_000_000
            w.write_message("/joint_states", JS, t, joint_state(t, ["hinge"], [0.01 * k], [0.5], [0.1]))
            w.write_message(COMMANDS, F64, t, float64_array([0.02 * k]))
    return path


@pytest.mark.parametrize("storage", ("mcap", "sqlite3"))
def test_replay_safe_copy_renames_every_live_topic(tmp_path, storage, capsys):
    bag = recording(tmp_path / "rec", storage)
    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["custom_data"][COMMANDS_KEY] == COMMANDS  # marked, for any tool that reads metadata.yaml
    assert main(["bag", "replay-safe", str(bag), "--out", str(tmp_path / "safe")]) == 0
    out = capsys.readouterr().out
    assert f"{COMMANDS} -> /sysid/replay{COMMANDS}   (commands)" in out
    assert "/joint_states -> /sysid/replay/joint_states\n" in out and "1 command topic(s) and 1 other" in out
    with AnyReader([tmp_path / "safe"]) as reader:
        topics = {c.topic: c.msgcount for c in reader.connections}
        commands = [
            reader.deserialize(raw, c.msgtype).data[0]
            for c, _, raw in reader.messages()
            if c.topic == f"/sysid/replay{COMMANDS}"
        ]
    # nothing left on a topic a running robot uses: commands, and joint states its state publishers would take
    assert set(topics) == {f"/sysid/replay{COMMANDS}", "/sysid/replay/joint_states", "/sysid/metadata"}
    assert topics[f"/sysid/replay{COMMANDS}"] == 50 and topics["/sysid/replay/joint_states"] == 50
    assert np.array_equal(commands, 0.02 * np.arange(50))  # the same messages, byte for byte
    original, copy = read_joint_states(bag).samples, read_joint_states(tmp_path / "safe").samples
    assert np.array_equal(original.time_ns, copy.time_ns) and np.array_equal(original.position, copy.position)
    assert read_metadata(tmp_path / "safe") == read_metadata(bag)
    assert command_topics(tmp_path / "safe") == []  # nothing left that drives a robot


def test_unmarked_commands_found_by_type_and_bad_input(tmp_path, capsys):
    bag = recording(tmp_path / "rec", "mcap", mark=False)
    assert command_topics(bag) == [COMMANDS]
    (tmp_path / "taken").mkdir()
    assert main(["bag", "replay-safe", str(bag), "--out", str(tmp_path / "taken")]) == 2
    assert "not overwritten" in capsys.readouterr().err and not any((tmp_path / "taken").iterdir())
    assert main(["bag", "replay-safe", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bag not found" in err and not (tmp_path / "x").exists()
