"""Hardening round 4 (issue 34), data silently lost or refused whole: a damaged chunk in the middle of an mcap
file, one NaN in one joint's effort. Bags written here (rosbag2 mcap through the project's writer), the
pendulum of test_identify_pendulum (mass 1.3 kg, damping 0.08, friction loss 0.05; 0.5 mrad noise).

A damaged chunk whose bytes were overwritten with zeros ends rosbags' chunk reader without an error: before,
the read stopped there in silence (issue 34: `identify` used the first 58 % of the record, `inspect` said
"usable: yes"). Now the reader compares what it read with what the bag lists (`BagSource.shortfalls`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from mcap.reader import make_reader

from support.synthetic import EFFORT_TOPIC, write_effort_bag
from sysid_ros.cli import main
from sysid_ros.core.bags import inspect_bag, read_joint_states
from sysid_ros.core.errors import DataError
from sysid_ros.core.identify import identify, load_source, problem_from_dict
from sysid_ros.core.identify.problem.file import DataSource
from sysid_ros.core.signals.arrays import JointSamples
from sysid_ros.core.sim.robot import FeedbackNoise
from test_identify_pendulum import TRUTH, _record


def damage_chunk(bag: Path, which: int) -> tuple[int, int]:
    """Overwrite the middle half of the records of chunk `which` (uncompressed) of the bag's mcap file with zeros,
    from one record's start to another's, the first 9 bytes read as a record of opcode 0 spanning the damage
    (rosbags skips a record of an unknown opcode, and so the messages there vanish without an error, as zeros
    whose length is a multiple of 9 do). Returns (chunks in the file, messages lost)."""
    f = next(bag.glob("*.mcap"))
    with f.open("rb") as stream:
        chunks = make_reader(stream).get_summary().chunk_indexes
    c = chunks[which]
    assert c.compression == ""
    data = bytearray(f.read_bytes())
    o = c.chunk_start_offset + 1 + 8 + 8 + 8 + 8 + 4
    o += 4 + int.from_bytes(data[o:o + 4], "little")  # the compression string
    end = o + 8 + int.from_bytes(data[o:o + 8], "little")
    bounds, kinds, at = [], [], o + 8
    while at < end:
        bounds.append(at)
        kinds.append(data[at])
        at += 9 + int.from_bytes(data[at + 1:at + 9], "little")
    middle = [k for k in range(len(bounds)) if o + (end - o) // 4 <= bounds[k] <= o + 3 * (end - o) // 4]
    a, b = middle[0], middle[-1]
    data[bounds[a]:bounds[b]] = bytes(bounds[b] - bounds[a])
    data[bounds[a] + 1:bounds[a] + 9] = (bounds[b] - bounds[a] - 9).to_bytes(8, "little")
    f.write_bytes(bytes(data))
    return len(chunks), sum(1 for k in kinds[a:b] if k == 0x05)


def problem_doc(bag: Path, **extra) -> dict:
    doc = {"model": "pendulum", "joints": ["hinge"], "training": [str(bag)], "noise": {"position_rad": 5e-4},
           "parameters": [
               {"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0, "start": 1.0},
               {"name": "hinge_damping", "kind": "joint_damping", "joint": "hinge", "min": 0.0, "max": 1.0,
                "start": 0.02},
               {"name": "hinge_frictionloss", "kind": "joint_frictionloss", "joint": "hinge", "min": 0.0,
                "max": 1.0, "start": 0.02}]}
    doc.update(extra)
    return doc


@pytest.fixture(scope="module")
def record():
    return _record(3, 12.0, FeedbackNoise(position_rad=5e-4))


@pytest.fixture(scope="module")
def damaged(tmp_path_factory, record):
    """A 12 s bag (five chunks) with a hole of zeros in its third chunk."""
    bag = write_effort_bag(tmp_path_factory.mktemp("damaged") / "bag", *record)
    chunks, lost = damage_chunk(bag, 2)
    assert chunks >= 4 and lost > 100
    return bag


def test_a_damaged_chunk_is_a_warning_with_the_fraction_read_in_the_reader_and_inspect(damaged, record):
    samples, _ = record
    read = read_joint_states(damaged)
    first, second = read.segments  # the hole is a gap: two segments, without an error
    n = len(first) + len(second)
    assert 0.5 * len(samples) < n < 0.95 * len(samples)
    assert len(read.shortfalls) == 1 and read.fraction_read == pytest.approx(n / len(samples), abs=2e-3)
    line = read.shortfalls[0]
    t0 = samples.time_ns[0]
    hole = f"nothing from {(first.time_ns[-1] - t0) * 1e-9:.3f} to {(second.time_ns[0] - t0) * 1e-9:.3f} s"
    assert f"only {n} of the {len(samples)} messages" in line and f"({100 * n / len(samples):.1f} %" in line
    assert hole in line, line
    summary = inspect_bag(damaged)
    assert summary.usable and summary.warnings and summary.fraction_read < 0.9
    text = summary.format()
    assert "usable for identification: yes, with" in text and "% of its messages read" in text
    assert "WARNING: /joint_states: only" in text


def test_identify_on_a_damaged_chunk_is_suspect_and_says_how_much_and_from_where(damaged, tmp_path, capsys):
    problem = tmp_path / "problem.yaml"
    problem.write_text(yaml.safe_dump(problem_doc(damaged, optimizer={"max_iters": 5})))
    assert main(["identify", str(problem), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    result = yaml.safe_load((tmp_path / "out" / "identified.yaml").read_text())
    assert result["verdict"] == "suspect"
    assert any("/joint_states: only" in w and "messages the bag lists could be read" in w and "nothing from" in w
               for w in result["warnings"]), result["warnings"]
    report = (tmp_path / "out" / "report.html").read_text()
    assert "messages the bag lists could be read" in report
    # the undamaged bag reads whole: no such warning
    capsys.readouterr()


def test_a_whole_bag_has_no_shortfall(tmp_path, record):
    bag = write_effort_bag(tmp_path / "bag", *record)
    read = read_joint_states(bag)
    assert read.shortfalls == () and read.fraction_read == 1.0
    summary = inspect_bag(bag)
    assert summary.usable and summary.warnings == () and "WARNING" not in summary.format()


def with_effort(samples: JointSamples, effort: np.ndarray) -> JointSamples:
    return JointSamples(samples.joint_names, samples.time_ns, samples.position, samples.velocity, effort,
                        samples.source)


def test_one_nan_effort_row_is_dropped_counted_and_the_run_goes_on(tmp_path, record):
    """Issue 34: one NaN in one joint's effort (one row of 1,435) refused the whole record. Measured effort
    replayed (`control: effort`): the row is dropped with a count, the missed tick filled (effort held), and
    the estimates stay within the clean record's tolerance."""
    samples, commands = record
    effort = samples.effort.copy()
    k = 2000
    effort[k, 0] = np.nan
    bag = write_effort_bag(tmp_path / "bag", with_effort(samples, effort), commands)
    warnings, notes = [], []
    parts = load_source(DataSource(bag, control="effort"), ["hinge"], warnings, notes)
    seg = parts[0][0]
    assert np.isfinite(seg.effort).all() and len(seg) == len(samples)  # dropped, then the tick filled
    assert any(f"1 of {len(samples)} rows dropped (1 non-finite effort, the first at {k * 0.002:.4f} s; joint hinge)"
               in w for w in warnings), warnings
    result = identify(problem_from_dict(problem_doc(bag, training=[{"path": str(bag), "control": "effort"}])))
    assert result.verdict == "suspect" and any("rows dropped" in w for w in result.warnings)
    for p in result.parameters:  # within 5 %: the clean fit is within 1 % (test_identify_pendulum)
        assert p.value[0] == pytest.approx(TRUTH[p.name], rel=0.05), (p.name, p.value)


def test_a_record_whose_effort_is_mostly_nan_is_refused(tmp_path, record):
    samples, commands = record
    effort = samples.effort.copy()
    effort[::2, 0] = np.nan
    effort[1, 0] = np.nan
    bag = write_effort_bag(tmp_path / "bag", with_effort(samples, effort), commands)
    with pytest.raises(DataError, match=r"^mostly non-finite: \d+ of \d+ rows \(\d+ non-finite effort; joint hinge"):
        load_source(DataSource(bag, control="effort"), ["hinge"], [], [])
    # replaying the commands instead, the effort is not used: nothing is dropped
    warnings: list[str] = []
    load_source(DataSource(bag, command_topic=EFFORT_TOPIC), ["hinge"], warnings, [])
    assert not any("rows dropped" in w for w in warnings)
