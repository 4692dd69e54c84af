"""Two robots on one graph, each stack in its own namespace: nothing crosses between them.

FACTS: an absolute name does not move with `__ns`, so a node with `/joint_states` in its code would put two
robots on one topic. Here every name is relative: `/r1/...` and `/r2/...` each have exactly their own robot's
publisher and subscriber, the root has none, a play on r1 commands r1 only (a subscriber per namespace
counts), and `/diagnostics` (global) names the robot in every status.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from support.recorder import SIM, recorder_params
from sysid_ros.cli.commands import split_ros_args
from sysid_ros.core.bags import read_metadata, read_recording
from sysid_ros.ros.client import play_tape, ros_arguments, wait_for

pytestmark = pytest.mark.ros

ROBOTS = {"r1": 0.8, "r2": 1.6}  # each its own hidden pole mass
COMMANDS = "forward_command_controller/commands"


def test_two_namespaced_robots_do_not_cross_talk(nodes, client, tmp_path):
    for ns, mass in ROBOTS.items():
        nodes("sim_robot", "sim_robot", {**SIM, "physics.pole.mass": mass}, namespace=ns)
    nodes(
        "tape_recorder",
        "tape_recorder",
        recorder_params(tmp_path / "r1_bags", **{"tape.kind": "sweep"}),
        namespace="r1",
    )
    # relative names from the root client: /, /r1, /r2
    heard = {ns: client.collect(JointState, f"{ns}/joint_states".lstrip("/")) for ns in ("", *ROBOTS)}
    commanded = {ns: client.collect(Float64MultiArray, f"{ns}/{COMMANDS}".lstrip("/"), 10) for ns in ("", *ROBOTS)}
    diagnostics = client.collect(DiagnosticArray, "/diagnostics", 1000)
    assert client.change_state("r1/tape_recorder", "configure") == (True, "inactive")
    assert client.change_state("r1/tape_recorder", "activate") == (True, "active")
    node = client.node
    wait_for(
        lambda: (
            all(node.count_publishers(f"/{ns}/joint_states") for ns in ROBOTS)
            and node.count_publishers(f"/r1/{COMMANDS}")
        ),
        what="both robots and r1's recorder on the graph",
    )

    # plays come as files on a shared disk: a path the recorder cannot read is refused when it is set
    [refused] = client.set_parameters("r1/tape_recorder", {"tape.file": str(tmp_path / "not_here.yaml")})
    assert not refused.successful and "cannot read tape.file" in refused.reason

    status = play_tape(client, diagnostics, "r1/tape_recorder", 120.0)
    assert status.message.startswith("finished"), status.message

    # each namespaced topic has its own robot's node only; nothing at the root
    def on(infos) -> set[str]:  # the nodes at a topic's end, but this test's own client
        return {f"{i.node_namespace.rstrip('/')}/{i.node_name}" for i in infos if i.node_name != "test_client"}

    for ns in ROBOTS:
        assert on(node.get_publishers_info_by_topic(f"/{ns}/joint_states")) == {f"/{ns}/sim_robot"}
        assert on(node.get_subscriptions_info_by_topic(f"/{ns}/{COMMANDS}")) == {f"/{ns}/sim_robot"}
    assert on(node.get_publishers_info_by_topic("/joint_states")) == set()
    assert on(node.get_subscriptions_info_by_topic(f"/{COMMANDS}")) == set()
    assert not heard[""] and not commanded[""], "something still speaks at the root"
    # r1 was commanded, r2 heard no command (a slow test client may miss some of r1's: depth 10); both reported
    assert commanded["r1"] and not commanded["r2"]
    assert all(heard[ns] for ns in ROBOTS)
    # the bag names r1's own topics
    meta = read_metadata(status_value_bag(status))[0]
    assert meta["command_topic"] == f"/r1/{COMMANDS}" and meta["recorder"] == "/r1/tape_recorder"
    assert set(read_recording(status_value_bag(status), joints=["hinge"]).feedback.topics) == {"/r1/joint_states"}
    # /diagnostics is global and every status names its robot
    statuses = [s for a in diagnostics for s in a.status]
    assert statuses and all(s.hardware_id == s.name.split("/")[1] for s in statuses)
    assert all(next(kv.value for kv in s.values if kv.key == "robot") == s.hardware_id for s in statuses)

    # `sysid-ros record --namespace r2` records r2, and r1 hears nothing of it
    before = len(commanded["r1"])
    params = tmp_path / "recorder.yaml"
    params.write_text(yaml.safe_dump({"/**/tape_recorder": {"ros__parameters": recorder_params(tmp_path / "x")}}))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sysid_ros.cli",
            "record",
            "--params-file",
            str(params),
            "--namespace",
            "r2",
            "--tape",
            "sweep",
            "--out",
            str(tmp_path / "r2_bags"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [bag] = list((tmp_path / "r2_bags").iterdir())
    recording = read_recording(bag, joints=["hinge"])
    assert set(recording.feedback.topics) == {"/r2/joint_states"}
    # r2 was commanded on its own topic (its bag holds what its recorder sent: this test's client, discovering that
    # short-lived process late on loaded cores, may hear none of it) and r1 heard nothing of it
    assert set(recording.commands) == {f"/r2/{COMMANDS}"} and len(recording.commands[f"/r2/{COMMANDS}"].time_ns)
    assert len(commanded["r1"]) == before


def status_value_bag(status) -> str:
    return next(kv.value for kv in status.values if kv.key == "bag")


def test_ros_args_on_the_command_line():
    """`--ros-args` rules after a verb's own options go to its node, before `--namespace`'s (the first match wins)."""
    own, rules = split_ros_args(["tune", "--node", "servo_tuner", "--ros-args", "-r", "__ns:=/r3", "--", "--wait", "5"])
    assert own == ["tune", "--node", "servo_tuner", "--wait", "5"] and rules == ["-r", "__ns:=/r3"]
    assert split_ros_args(["tune"]) == (["tune"], [])
    assert ros_arguments("r1", rules) == ["-r", "__ns:=/r3", "-r", "__ns:=/r1", "-r", "/clock:=clock"]
    from sysid_ros.ros.client import RosClient

    placed = RosClient("placed", ros_args=ros_arguments("r1", rules))
    try:
        assert placed.node.get_namespace() == "/r3" and placed.resolve("joint_states") == "/r3/joint_states"
    finally:
        placed.close()
    bad = subprocess.run(
        [sys.executable, "-m", "sysid_ros.cli", "models", "--ros-args", "-r", "__ns:=/r1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "only applies to commands that talk to nodes" in bad.stderr
    assert "Traceback" not in bad.stderr
