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

from support.pendulum import TRUTH, _record, problem_doc
from support.synthetic import EFFORT_TOPIC, write_effort_bag
from sysid_ros.cli import main
from sysid_ros.core.bags import inspect_bag, read_joint_states
from sysid_ros.core.errors import DataError
from sysid_ros.core.identify import DataSource, identify, load_source, problem_from_dict
from sysid_ros.core.signals import JointSamples
from sysid_ros.core.sim import FeedbackNoise


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
    o += 4 + int.from_bytes(data[o : o + 4], "little")  # the compression string
    end = o + 8 + int.from_bytes(data[o : o + 8], "little")
    bounds, kinds, at = [], [], o + 8
    while at < end:
        bounds.append(at)
        kinds.append(data[at])
        at += 9 + int.from_bytes(data[at + 1 : at + 9], "little")
    middle = [k for k in range(len(bounds)) if o + (end - o) // 4 <= bounds[k] <= o + 3 * (end - o) // 4]
    a, b = middle[0], middle[-1]
    data[bounds[a] : bounds[b]] = bytes(bounds[b] - bounds[a])
    data[bounds[a] + 1 : bounds[a] + 9] = (bounds[b] - bounds[a] - 9).to_bytes(8, "little")
    f.write_bytes(bytes(data))
    return len(chunks), sum(1 for k in kinds[a:b] if k == 0x05)


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
    assert any(
        "/joint_states: only" in w and "messages the bag lists could be read" in w and "nothing from" in w
        for w in result["warnings"]
    ), result["warnings"]
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
    return JointSamples(
        samples.joint_names, samples.time_ns, samples.position, samples.velocity, effort, samples.source
    )


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
    assert any(
        f"1 of {len(samples)} rows dropped (1 non-finite effort, the first at {k * 0.002:.4f} s; joint hinge)" in w
        for w in warnings
    ), warnings
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


# ---- a robot's own bags in place of the problem's: the entry's settings stay --------------------------------


def plain_bag(path: Path, samples: JointSamples, commands) -> Path:
    """JointState feedback and Float64MultiArray effort commands, no recording metadata: the controller's joint
    order is only in the problem's `command_joints` (rosbags' own writer)."""
    from support.bags import F64, JS, float64_array, joint_state, write_bag

    msgs = []
    for k, t in enumerate(samples.time_ns):
        t = int(t)
        msgs.append(
            (
                "/joint_states",
                JS,
                t,
                joint_state(t, samples.joint_names, samples.position[k], samples.velocity[k], samples.effort[k]),
            )
        )
        msgs.append((EFFORT_TOPIC, F64, t, float64_array(commands.values[k])))
    return write_bag(path, msgs)


def test_a_robots_own_bags_keep_the_problems_command_topic_and_joint_order(tmp_path, record, capsys):
    """Issue 34: `identify --train BAG` and a fleet robot with its own `train:` replaced the problem's training
    entry whole; its command_topic / command_joints were lost ("Float64MultiArray commands need the
    controller's joint order")."""
    from sysid_ros.core.identify import with_data

    samples, commands = record
    first = plain_bag(tmp_path / "first", samples.slice(0, 2501), commands)
    second = plain_bag(tmp_path / "second", samples, commands)
    entry = {"path": str(first), "command_topic": EFFORT_TOPIC, "command_joints": ["hinge"], "end_s": 20.0}
    doc = problem_doc(first, training=[entry], optimizer={"max_iters": 5})
    problem = problem_from_dict(doc)
    replaced = with_data(problem, [second]).training
    assert [s.path for s in replaced] == [second.resolve()]
    assert replaced[0].command_topic == EFFORT_TOPIC and replaced[0].command_joints == ("hinge",)
    assert replaced[0].end_s == 20.0 and replaced[0].control == "auto"
    assert with_data(problem, [second], control="effort").training[0].command_topic is None  # not read then
    # the CLI's --train and a fleet robot's train: both run on the bag with the entry's settings
    (tmp_path / "problem.yaml").write_text(yaml.safe_dump(doc))
    assert (
        main(
            [
                "identify",
                str(tmp_path / "problem.yaml"),
                "--train",
                str(second),
                "--out",
                str(tmp_path / "out"),
                "--quiet",
            ]
        )
        == 0
    ), capsys.readouterr().err
    (tmp_path / "fleet.yaml").write_text(
        yaml.safe_dump({"problem": "problem.yaml", "robots": [{"name": "r2", "train": ["second"]}]})
    )
    assert main(["fleet", "identify", str(tmp_path / "fleet.yaml"), "--out", str(tmp_path / "fleet")]) == 0, (
        capsys.readouterr().err
    )
    fleet = yaml.safe_load((tmp_path / "fleet" / "fleet.yaml").read_text())
    assert fleet["robots"]["r2"]["status"] in ("ok", "suspect"), fleet["robots"]["r2"]


def test_entries_that_disagree_drop_what_they_disagree_on_in_one_line(tmp_path, record, caplog):
    from sysid_ros.core.identify import with_data

    a = DataSource(tmp_path / "a", command_topic="/x", command_joints=("hinge",))
    b = DataSource(tmp_path / "b", command_topic="/y", command_joints=("hinge",))
    problem = problem_from_dict(problem_doc(tmp_path / "a.npz"))
    from dataclasses import replace

    problem = replace(problem, training=(a, b))
    assert [s.command_topic for s in with_data(problem, ["c", "d"]).training] == ["/x", "/y"]  # one each
    with caplog.at_level("WARNING"):
        (only,) = with_data(problem, ["c"]).training
    assert only.command_topic is None and only.command_joints == ("hinge",)
    (line,) = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert "1 new path(s) for 2 entries that differ in command_topic" in line


# ---- efforts beyond the model's actuator limits (issue 32): a warning with the count, never a silent clamp ----


def test_efforts_beyond_the_actuator_limit_are_counted_not_clamped_in_silence(tmp_path, record):
    """The pendulum's motor passes +-3 N m (ctrlrange); a log whose effort peaks at 3.28 N m (the issue's
    numbers) was replayed clamped without a word."""
    samples, commands = record
    effort = samples.effort * (3.28 / np.abs(samples.effort).max())
    bag = write_effort_bag(tmp_path / "bag", with_effort(samples, effort), commands)
    beyond = int(np.sum(np.abs(effort) > 3.0))
    assert beyond > 10
    doc = problem_doc(bag, training=[{"path": str(bag), "control": "effort"}], optimizer={"max_iters": 2})
    result = identify(problem_from_dict(doc))
    assert result.verdict == "suspect"
    (line,) = [w for w in result.warnings if "actuator limit" in w]
    assert line.startswith(
        f"hinge: {beyond} of {len(samples)} replayed efforts are beyond the model's actuator "
        "limit +-3 (by up to 0.28, 9.3 % of the limit"
    )
    # the commands (peak 2.5 N m) replayed instead: inside the limit, no such warning
    doc["training"] = [{"path": str(bag), "command_topic": EFFORT_TOPIC}]
    assert not any("actuator limit" in w for w in identify(problem_from_dict(doc)).warnings)


# ---- a model that couples joints (a URDF <mimic>): no torque-space fit that treats them as independent ------

MIMIC_URDF = """<robot name="gripper">
  <link name="base"/>
  <link name="l1">
    <inertial>
    <origin xyz="0.1 0 0"/>
    <mass value="1"/>
    <inertia ixx="0.001" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
    </inertial>
    </link>
  <link name="l2">
    <inertial>
    <origin xyz="0.05 0 0"/>
    <mass value="0.3"/>
    <inertia ixx="0.001" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/>
    </inertial>
    </link>
  <link name="l3">
    <inertial>
    <origin xyz="0.05 0 0"/>
    <mass value="0.3"/>
    <inertia ixx="0.001" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/>
    </inertial>
    </link>
  <joint name="j1" type="revolute">
    <parent link="base"/>
    <child link="l1"/>
    <axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="3"/>
    </joint>
  <joint name="finger" type="revolute">
    <parent link="l1"/>
    <child link="l2"/>
    <origin xyz="0.2 0 0"/>
    <axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="5" velocity="3"/>
    </joint>
  <joint name="finger_mimic" type="revolute">
    <parent link="l1"/>
    <child link="l3"/>
    <origin xyz="0.2 0.05 0"/>
    <axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="5" velocity="3"/>
    <mimic joint="finger" multiplier="-1" offset="0.1"/>
    </joint>
</robot>
"""


def test_a_urdf_mimic_is_named_as_a_coupling(tmp_path):
    import mujoco

    from sysid_ros.core.identify import coupled_joints, prepare_urdf_spec

    (tmp_path / "gripper.urdf").write_text(MIMIC_URDF)
    spec = mujoco.MjSpec.from_file(str(tmp_path / "gripper.urdf"))
    prepare_urdf_spec(spec)
    assert coupled_joints(spec.compile()) == ["finger_mimic = 0.1 + -1 finger"]


def test_the_torque_space_fit_is_not_run_on_coupled_joints_and_says_why(tmp_path):
    """arm3 with its wrist tied to the elbow (wrist = 0.5 elbow, the equality a URDF <mimic> becomes): before,
    the torque-space fit treated the wrist as independent, said nothing, and was taken."""
    from dataclasses import replace

    from support.arm3 import PHYSICS, arm3_problem
    from support.synthetic import arm3_tracking_record
    from sysid_ros.core.bags import save_npz
    from sysid_ros.core.files import model_path

    data = save_npz(tmp_path / "arm3.npz", arm3_tracking_record(1, 4.0, PHYSICS))
    problem = arm3_problem(data)
    problem = replace(problem, optimizer=replace(problem.optimizer, max_iters=2))
    free = identify(problem)
    assert "identified_model" in free.metrics  # the torque-space fit is considered on the arm as shipped
    xml = (
        model_path("arm3")
        .read_text()
        .replace(
            "</actuator>",
            '</actuator>\n  <equality><joint joint1="wrist" joint2="elbow" polycoef="0 0.5 0 0 0"/></equality>',
        )
    )
    (tmp_path / "arm3_coupled.xml").write_text(xml)
    coupled = identify(replace(problem, model=str(tmp_path / "arm3_coupled.xml")))
    assert "identified_model" not in coupled.metrics and not coupled.torque_space
    assert any(
        "torque-space fit are not run: the model couples joints (wrist = 0 + 0.5 elbow" in n for n in coupled.notes
    ), coupled.notes
