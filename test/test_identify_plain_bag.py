"""Bring your own robot: a pendulum from a plain `ros2 bag record` bag and the user's own model files.

The bag is what `ros2 bag record -a` of a ros2_control robot gives: no recorder metadata, epoch header
stamps, JointState at 250 Hz on /joint_states, the commanded state echoed as a second JointState topic
(same joint: the two clash), and effort commands as Float64MultiArray at 100 Hz, each held until the
next. The model is a hand-written MJCF whose mass comes from its geom (no <inertial>), used unedited, and
the same pendulum as a URDF. Hidden truth: mass 1.3 kg, damping 0.08 N m s/rad, friction loss 0.05 N m
(the model files say 1.0, 0.05, 0.02). Feedback noise 0.5 mrad and 5 mrad/s.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import yaml

from support.bags import F64, JS, NOETIC, float64_array, joint_state, sine_states, write_bag, write_ros1_bag
from support.synthetic import multisine, record_effort
from sysid_ros.cli import main
from sysid_ros.core.bags import inspect_bag
from sysid_ros.core.errors import ConfigError
from sysid_ros.core.identify import DataSource, identify, load_source, problem_from_dict, write_results
from sysid_ros.core.sim import FeedbackNoise, SimRobot

TRUTH = {"pole_mass": 1.3, "hinge_damping": 0.08, "hinge_frictionloss": 0.05}
PHYSICS = {"pole.mass": 1.3, "hinge.damping": 0.08, "hinge.frictionloss": 0.05}
NOISE = FeedbackNoise(position_rad=5e-4, velocity_rad_s=5e-3)
EPOCH_NS = 1_764_590_400_123_456_789
COMMANDS = "/effort_controller/commands"
ECHO = "/joint_states_desired"
# a sphere on a massless rod: the mass (and inertia) come from the geom, as in most hand-written models
MJCF = """<mujoco model="my_pendulum">
  <option timestep="0.002"/>
  <worldbody>
    <body name="pole" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05" frictionloss="0.02"/>
      <geom type="sphere" pos="0 0 -0.5" size="0.05" mass="1.0" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator><motor name="hinge_motor" joint="hinge"/></actuator>
</mujoco>
"""
# the same pendulum as a URDF (a sphere of 1 kg, radius 0.05 m: 2/5 m r^2 = 0.001 kg m^2)
URDF = """<robot name="my_pendulum">
  <link name="base"/>
  <link name="pole">
    <inertial><origin xyz="0 0 -0.5" rpy="0 0 0"/><mass value="1.0"/>
      <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial>
  </link>
  <joint name="hinge" type="continuous"><parent link="base"/><child link="pole"/>
    <origin xyz="0 0 1" rpy="0 0 0"/><axis xyz="0 1 0"/><dynamics damping="0.05" friction="0.02"/></joint>
</robot>
"""
PARAMETERS = [  # no start: the model's (compiled) values
    {"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0},
    {"name": "hinge_damping", "kind": "joint_damping", "joint": "hinge", "min": 0.0, "max": 1.0},
    {"name": "hinge_frictionloss", "kind": "joint_frictionloss", "joint": "hinge", "min": 0.0, "max": 1.0},
]


def plain_bag(path, model, seed: int, seconds: float):
    """SimRobot with the hidden physics: commands at 100 Hz (held), feedback at 250 Hz, then rosbags' Writer."""
    robot = SimRobot(
        str(model),
        physics=PHYSICS,
        noise=NOISE,
        seed=seed,
        start_time_ns=EPOCH_NS + seed * 10**9,
        command_rate_hz=100.0,
        publish_rate_hz=250.0,
    )
    t = np.arange(0, seconds + 1e-9, 0.01)
    u = multisine(t, [0.2, 0.7, 1.3, 2.1, 3.0], 2.5, seed=seed)
    samples, commands = record_effort(robot, lambda ts: [u[int(round(ts / 0.01))]], seconds)
    messages = []
    for k, ns in enumerate(samples.time_ns.tolist()):
        record_ns = ns + 150_000  # received 0.15 ms after the stamp
        messages.append(
            (
                "/joint_states",
                JS,
                record_ns,
                joint_state(ns, ["hinge"], samples.position[k], samples.velocity[k], samples.effort[k]),
            )
        )
        messages.append((ECHO, JS, record_ns + 1000, joint_state(ns, ["hinge"], samples.position[k] + 0.1)))
    for ns, value in zip(commands.time_ns.tolist(), commands.values):
        messages.append((COMMANDS, F64, ns + 50_000, float64_array(value)))
    messages.sort(key=lambda m: m[2])
    return write_bag(path, messages)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("plain")
    (d / "my_pendulum.xml").write_text(MJCF)
    (d / "my_pendulum.urdf").write_text(URDF)
    return (
        d,
        plain_bag(d / "train", d / "my_pendulum.xml", 1, 10.0),
        plain_bag(d / "heldout", d / "my_pendulum.xml", 2, 5.0),
    )


def problem(d, model: str, train, val):
    source = {"feedback_topic": "/joint_states", "command_topic": COMMANDS, "command_joints": ["hinge"]}
    return problem_from_dict(
        {
            "model": model,
            "joints": ["hinge"],
            "training": [{"bag": str(train), **source}],
            "validation": [{"bag": str(val), **source}],
            "parameters": PARAMETERS,
            "noise": {"position_rad": NOISE.position_rad},
        },
        d,
    )


def test_inspect_lists_every_joint_state_topic_and_names_the_option(data, capsys):
    _, train, _ = data
    summary = inspect_bag(train)
    assert not summary.usable
    topics = {t.name: t for t in summary.topics}
    assert topics["/joint_states"].joints == ("hinge",) and topics[ECHO].joints == ("hinge",)
    assert any("--feedback-topic" in r for r in summary.reasons), summary.reasons
    assert "nan" not in summary.format()
    chosen = inspect_bag(train, feedback_topic="/joint_states", command_joints=["hinge"])
    assert chosen.usable and chosen.joints == ("hinge",) and chosen.time_source == "header"
    assert {t.name: t.usable for t in chosen.topics} == {"/joint_states": True, ECHO: False, COMMANDS: True}
    assert main(["inspect", str(train), "--feedback-topic", "/joint_states", "--command-joints", "hinge"]) == 0
    out = capsys.readouterr().out
    assert "usable for identification: yes" in out and "joints: hinge" in out


def test_inspect_joints_filters_joints(tmp_path):
    messages = [
        ("/joint_states", JS, 10**9 + k * 10**7, joint_state(10**9 + k * 10**7, ["a", "b"], [0.1 * np.sin(k / 5), 0.0]))
        for k in range(100)
    ]
    bag = write_bag(tmp_path / "two", messages)
    assert inspect_bag(bag, joints=["a"]).joints == ("a",)
    assert inspect_bag(bag).joints == ("a", "b")


def test_ros1_bag_with_two_joint_state_topics(tmp_path):
    """ROS 1 bags hit the same wall: the same listing and the same option."""
    feedback, _ = sine_states(names=("j1", "j2"), ts=NOETIC)
    echo, _ = sine_states(names=("j1", "j2"), ts=NOETIC, topic="/desired_joint_states")
    bag = write_ros1_bag(tmp_path / "robot.bag", sorted(feedback + echo, key=lambda m: m[2]))
    summary = inspect_bag(bag)
    assert not summary.usable and any("--feedback-topic" in r for r in summary.reasons)
    assert {t.name: t.joints for t in summary.topics} == {
        "/joint_states": ("j1", "j2"),
        "/desired_joint_states": ("j1", "j2"),
    }
    assert inspect_bag(bag, feedback_topic="/joint_states").usable


def test_convert_keeps_the_longest_segment_on_request(tmp_path, capsys):
    first, _ = sine_states(seconds=1.0, names=("j1",))
    second, _ = sine_states(seconds=2.0, names=("j1",), t0_ns=first[-1][2] + 10**9)  # 1 s silence: a gap
    bag = write_bag(tmp_path / "gappy", first + second)
    assert main(["convert", str(bag), "--out", str(tmp_path / "all.npz")]) == 2
    assert "--segments longest" in capsys.readouterr().err
    assert not (tmp_path / "all.npz").exists()
    assert main(["convert", str(bag), "--segments", "longest", "--out", str(tmp_path / "longest.npz")]) == 0
    from sysid_ros.core.bags import load_npz

    samples, _, _ = load_npz(tmp_path / "longest.npz")
    assert len(samples) == 400  # the 2 s stretch at 200 Hz
    assert "1 gap(s); the longest (400 samples) is used" in inspect_bag(bag, segments="longest").topics[0].reason


def test_clock_offset_not_printed_without_joint_states(tmp_path):
    bag = write_bag(tmp_path / "cmds", [(COMMANDS, F64, 10**9 + k, float64_array([1.0])) for k in range(3)])
    text = inspect_bag(bag).format()
    assert "nan" not in text and "no sensor_msgs/JointState" in text


def test_control_effort_never_reads_a_command_topic(data):
    _, train, _ = data
    parts = load_source(DataSource(train, control="effort", feedback_topic="/joint_states"), ["hinge"])
    assert all(commands is None for _, commands in parts)
    with pytest.raises(ConfigError, match="command_joints"):  # auto: the effort topic needs its joint order
        load_source(DataSource(train, feedback_topic="/joint_states"), ["hinge"])
    with pytest.raises(ConfigError, match="drop command_topic"):
        problem_from_dict(
            {
                "model": "pendulum",
                "joints": ["hinge"],
                "parameters": PARAMETERS,
                "training": [{"bag": str(train), "control": "effort", "command_topic": COMMANDS}],
            }
        )


@pytest.fixture(scope="module")
def from_mjcf(data):
    d, train, val = data
    return identify(problem(d, "my_pendulum.xml", train, val))


def check_accuracy(result):
    # the bounds: mass 0.1 %, damping 0.5 %, friction loss 2 %; held-out RMS within 1.1x the noise
    for name, rel in (("pole_mass", 1e-3), ("hinge_damping", 5e-3), ("hinge_frictionloss", 2e-2)):
        assert result.value(name) == pytest.approx(TRUTH[name], rel=rel), (name, result.value(name))
    rms = result.metrics["validation_position_rms_rad"]["hinge"]
    assert 0.9 * NOISE.position_rad < rms < 1.1 * NOISE.position_rad, rms


def test_geom_mass_model_unedited(from_mjcf, data, tmp_path):
    check_accuracy(from_mjcf)
    starts = {p.name: p.start[0] for p in from_mjcf.parameters}
    assert starts["pole_mass"] == pytest.approx(1.0)  # the compiled model's mass, not the spec's 0
    paths = write_results(from_mjcf, tmp_path / "out")
    model = mujoco.MjModel.from_xml_path(str(paths["mjcf"]))
    assert model.body("pole").mass[0] == from_mjcf.value("pole_mass")
    values = yaml.safe_load(paths["values"].read_text())
    assert values["bodies"]["pole"]["mass"] == from_mjcf.value("pole_mass")
    assert values["joints"]["hinge"] == {
        "damping": from_mjcf.value("hinge_damping"),
        "frictionloss": from_mjcf.value("hinge_frictionloss"),
    }
    assert "urdf" not in paths


def test_urdf_model_and_urdf_results(data, tmp_path):
    d, train, val = data
    result = identify(problem(d, "my_pendulum.urdf", train, val))
    check_accuracy(result)
    paths = write_results(result, tmp_path / "out")
    model = mujoco.MjModel.from_xml_path(str(paths["urdf"]))  # loads as a URDF: the identified values in it
    assert model.body("pole").mass[0] == pytest.approx(result.value("pole_mass"), rel=1e-12)
    assert model.body("pole").inertia == pytest.approx(np.full(3, 0.001 * result.value("pole_mass")), rel=1e-9)
    assert model.dof_damping[0] == pytest.approx(result.value("hinge_damping"), rel=1e-12)
    assert model.dof_frictionloss[0] == pytest.approx(result.value("hinge_frictionloss"), rel=1e-12)


def test_feedback_before_the_first_command_is_left_out(data, tmp_path):
    """A recorder's feedback starts before its first command (the demo's bags: joint states from configure on):
    with the commands driving the model (`control: auto` finds the one effort topic), the joint states before
    the first command are left out with a note, instead of "no finite command in force"."""
    d, train, _ = data
    from rosbags.highlevel import AnyReader

    early = []
    with AnyReader([train]) as reader:
        for conn, record_ns, raw in reader.messages():
            early.append((conn.topic, conn.msgtype, record_ns, reader.deserialize(raw, conn.msgtype)))
    # half a second of the robot at rest before the first command, as a recorder hears it after configure
    [(_, _, t0, msg)] = [
        m for m in early if m[0] == "/joint_states" and m[2] == min(x[2] for x in early if x[0] == "/joint_states")
    ]
    stamp0 = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
    rest = [
        (
            "/joint_states",
            JS,
            t0 - k * 4_000_000,
            joint_state(stamp0 - k * 4_000_000, ["hinge"], msg.position, [0.0], [0.0]),
        )
        for k in range(125, 0, -1)
    ]
    bag = write_bag(tmp_path / "early", rest + [m for m in early if m[0] != ECHO])
    notes: list[str] = []
    source = DataSource(path=bag, feedback_topic="/joint_states", command_joints=("hinge",), control="auto")
    [(samples, commands)] = load_source(source, ["hinge"], [], notes)
    assert commands is not None and samples.time_ns[0] >= commands.time_ns[0] - 4_000_000
    assert any("125 joint states before the first command left out" in n for n in notes), notes
    problem = problem_from_dict(
        {
            "model": str(d / "my_pendulum.xml"),
            "joints": ["hinge"],
            "training": [{"bag": str(bag), "feedback_topic": "/joint_states", "command_joints": ["hinge"]}],
            "parameters": PARAMETERS,
            "noise": {"position_rad": NOISE.position_rad},
        },
        d,
    )
    result = identify(problem)
    # the same accuracy as the commands' own test: mass within 1 % of the hidden 1.3 kg (0.5 mrad noise, 10 s)
    assert result.value("pole_mass") == pytest.approx(TRUTH["pole_mass"], rel=0.01)
