"""tape_recorder over DDS against sim_robot: tapes played inside the envelope and recorded to rosbag2."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest
import yaml
from std_srvs.srv import SetBool, Trigger

from support.recorder import (
    ENVELOPE,
    KINDS,
    PERIOD_NS,
    RATE_HZ,
    SIM,
    play,
    recorder_params,
    recorder_status,
    start_pair,
    values,
)
from sysid_ros.core import tapes
from sysid_ros.core.bags import command_topics, read_joint_states, read_metadata, read_recording, repair
from sysid_ros.core.tapes import Envelope
from sysid_ros.ros.client import request_play, send_goal, wait_for

pytestmark = pytest.mark.ros


def test_every_tape_kind_recorded_inside_the_envelope(nodes, client, tmp_path):
    _, diagnostics = start_pair(nodes, client, tmp_path)
    envelope = Envelope(**ENVELOPE)
    for kind in KINDS:
        assert all(r.successful for r in client.set_parameters("tape_recorder", {"tape.kind": kind, "tape.seed": 3}))
        status = play(client, diagnostics)
        assert status.message.startswith("finished"), status.message
        bag = Path(values(status)["bag"])
        # Commands on the recorder's own clock (when they were sent), feedback on the robot's stamps.
        recording = read_recording(bag, joints=["hinge"], time_source="record", max_gap_s=60.0)
        meta = recording.metadata
        tape = tapes.Tape.from_dict(meta["tape"])
        assert tape.kind == kind and meta["result"]["completed"] is True
        samples = read_joint_states(bag, joints=["hinge"], time_source="header").samples
        # Feedback: every sample of the play is in the bag (recorded on arrival, none dropped).
        t = samples.time_ns
        assert np.all(np.diff(t) == PERIOD_NS), (kind, np.unique(np.diff(t)))
        assert (meta["result"]["end_ns"] - meta["start_ns"]) * 1e-9 >= tapes.duration_s(tape)
        # Commands in the bag are the tape's own command grid, held: the command due when each was sent.
        [commands] = recording.commands.values()
        expected = tapes.to_commands(tape, meta["start_ns"]).held_at(commands.time_ns)
        assert np.max(np.abs(commands.values - expected)) < 1e-12, kind
        assert (commands.time_ns[-1] - commands.time_ns[0]) * 1e-9 > 0.8 * tapes.duration_s(tape)  # all along
        # The envelope held: positions within travel (+ the recorder's margin), speeds within the limit.
        q = samples.position[:, 0]
        assert np.all(np.abs(q - envelope.origin_rad) <= envelope.travel_rad + 0.05), (kind, np.abs(q).max())


def test_bag_self_describing_and_independently_readable(nodes, client, tmp_path):
    _, diagnostics = start_pair(nodes, client, tmp_path, rec_extra={"tape.kind": "jog"})
    status = play(client, diagnostics)
    bag = Path(values(status)["bag"])
    meta = {}
    for doc in read_metadata(bag):
        meta.update(doc)
    assert meta["joint_names"] == ["hinge"] and meta["model"] == "pendulum"
    assert meta["envelopes"]["hinge"]["travel_rad"] == 0.4 and meta["parameters"]["safety.stale_after_s"] == 0.5
    # the command topic is marked as one (`sysid-ros bag replay-safe` renames it for a safe `ros2 bag play`)
    assert meta["command_topics"] == ["/forward_command_controller/commands"]
    assert command_topics(bag) == ["/forward_command_controller/commands"]
    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["custom_data"]["sysid_ros.command_topics"] == "/forward_command_controller/commands"
    # as `ros2 bag record` writes it: the distro, and the QoS each topic's publishers offered (for `ros2 bag play`)
    assert info["ros_distro"] == "jazzy"
    offered = {
        t["topic_metadata"]["name"]: t["topic_metadata"]["offered_qos_profiles"]
        for t in info["topics_with_message_count"]
    }
    assert [q["reliability"] for q in offered["/joint_states"]] == ["reliable"]  # sim_robot's one publisher
    # (the graph does not carry a publisher's history depth: 0, as rosbag2 records a discovered publisher's)
    assert [q["reliability"] for q in offered["/forward_command_controller/commands"]] == ["reliable"]
    assert offered["/sysid/metadata"][0]["durability"] == "transient_local"
    # An independent reader (the mcap project's own, not rosbags) decodes every message.
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    [mcap_file] = list(bag.glob("*.mcap"))
    with open(mcap_file, "rb") as f:
        topics = {}
        for schema, channel, message, decoded in make_reader(
            f, decoder_factories=[DecoderFactory()]
        ).iter_decoded_messages():
            topics[channel.topic] = topics.get(channel.topic, 0) + 1
    assert topics["/joint_states"] > 500 and topics["/forward_command_controller/commands"] > 100
    assert topics["/sysid/metadata"] == 2 and topics["/tape_recorder/status"] >= 2


def test_best_effort_feedback_is_matched_and_recorded_in_full(nodes, client, tmp_path):
    # A driver publishing joint states BEST_EFFORT (sensor-data QoS): a RELIABLE subscriber never connects to
    # it. feedback_reliability "auto" (the default) subscribes as the publishers need, also when the robot
    # comes up after the recorder was configured.
    _, diagnostics = start_pair(
        nodes, client, tmp_path, sim_extra={"joint_states_reliability": "best_effort"}, rec_extra={"tape.kind": "jog"}
    )
    status = play(client, diagnostics)
    assert status.message.startswith("finished"), status.message
    samples = read_joint_states(Path(values(status)["bag"]), joints=["hinge"], time_source="header").samples
    assert len(samples.time_ns) > 500 and np.all(np.diff(samples.time_ns) == PERIOD_NS)  # every message, in order


def test_abort_on_envelope_breach_stops_within_two_periods(nodes, client, tmp_path):
    # A stiff drive with no damping (zeta < 0.01) rings past the tape's moves and out of the envelope.
    _, diagnostics = start_pair(
        nodes,
        client,
        tmp_path,
        sim_extra={"gains.hinge.p": 80.0, "gains.hinge.d": 0.0},
        rec_extra={"tape.kind": "fast_moves", "safety.speed_margin_frac": 0.0, "safety.travel_margin_rad": 0.0},
    )
    status = play(client, diagnostics)
    assert status.message.startswith("aborted: envelope breach: joint hinge:"), status.message
    bag = Path(values(status)["bag"])
    recording = read_recording(bag, joints=["hinge"])
    assert recording.metadata["result"]["completed"] is False
    assert "envelope breach" in recording.metadata["result"]["abort_reason"]
    [commands] = recording.commands.values()
    samples = recording.samples
    envelope = Envelope(**ENVELOPE)
    outside = np.flatnonzero(
        (np.abs(samples.position[:, 0]) > envelope.travel_rad)
        | (np.abs(samples.velocity[:, 0]) > envelope.max_speed_rad_s)
    )
    assert len(outside), "the test meant to force a breach"
    breach_ns = samples.time_ns[outside[0]]
    # The last command is the hold, sent within two command periods of the breaching sample.
    assert commands.time_ns[-1] - breach_ns <= 2 * PERIOD_NS
    assert commands.values[-1, 0] == pytest.approx(samples.position[outside[0], 0], abs=1e-9)


def test_abort_on_stale_feedback(nodes, client, tmp_path):
    _, diagnostics = start_pair(nodes, client, tmp_path, rec_extra={"tape.kind": "chirp"})
    response = request_play(client)
    assert response.success, response.message
    wait_for(
        lambda: any(
            "progress" in values(s) and float(values(s)["progress"]) > 0.1 for s in recorder_status(diagnostics)
        ),
        what="the tape to get going",
    )
    assert client.call(SetBool, "/sim_robot/pause", SetBool.Request(data=True)).success
    status = wait_for(
        lambda: next((s for s in recorder_status(diagnostics) if s.message.startswith("aborted")), None),
        what="the recorder to notice",
    )
    assert "stale feedback" in status.message
    meta = {}
    for doc in read_metadata(Path(values(status)["bag"])):
        meta.update(doc)
    assert meta["result"]["completed"] is False and "stale feedback" in meta["result"]["abort_reason"]


def test_sigkill_mid_tape_leaves_a_repairable_bag(nodes, client, tmp_path):
    recorder, diagnostics = start_pair(nodes, client, tmp_path, rec_extra={"tape.kind": "plateaus"})
    response = request_play(client)
    assert response.success, response.message
    bag = Path(response.message.rsplit(" into ", 1)[1])
    wait_for(
        lambda: any(float(values(s).get("progress", 0)) > 0.4 for s in recorder_status(diagnostics)),
        what="the tape to pass 40 %",
    )
    last_progress = max(float(values(s).get("progress", 0)) for s in recorder_status(diagnostics))
    recorder.stop(signal.SIGKILL)
    report = repair(bag)
    recording = read_recording(report.repaired, joints=["hinge"])
    tape = tapes.Tape.from_dict(recording.metadata["tape"])
    recorded_s = (recording.samples.time_ns[-1] - recording.metadata["start_ns"]) * 1e-9
    # At most the last second is lost: what was recorded reaches within 1 s of the last reported progress.
    assert recorded_s >= last_progress * tapes.duration_s(tape) - 1.0, (recorded_s, last_progress, report)


def test_tape_outside_the_envelope_refused_before_motion(nodes, client, tmp_path):
    envelope = {"hinge": Envelope(0.0, 1.0, 4.0, 3.0)}  # a tape designed for a wider envelope
    wide = tapes.build("sweep", envelope, RATE_HZ, seed=1)
    tape_file = tmp_path / "wide.yaml"
    tape_file.write_text(yaml.safe_dump(wide.to_dict()))
    _, diagnostics = start_pair(nodes, client, tmp_path, rec_extra={"tape.file": str(tape_file)})
    commands = client.collect(
        __import__("std_msgs.msg", fromlist=["Float64MultiArray"]).Float64MultiArray,
        "/forward_command_controller/commands",
    )
    response = request_play(client)
    assert not response.success
    assert "refused" in response.message and "joint=hinge" in response.message
    assert "limit=travel" in response.message or "limit=speed" in response.message, response.message
    assert commands == [] and not list((tmp_path / "bags").glob("*"))


def test_bad_configuration_and_missing_robot(nodes, client, tmp_path):
    # Unknown joint: configure succeeds (the robot may not be up yet) but play refuses, naming the joint.
    nodes("sim_robot", "sim_robot", SIM)
    nodes(
        "tape_recorder",
        "tape_recorder",
        recorder_params(tmp_path / "bags", joints=["elbow"], **{f"envelope.elbow.{k}": v for k, v in ENVELOPE.items()}),
    )
    assert client.change_state("tape_recorder", "configure") == (True, "inactive")
    assert client.change_state("tape_recorder", "activate") == (True, "active")
    wait_for(lambda: client.node.count_publishers("/joint_states") > 0, what="sim_robot")
    response = request_play(client)
    assert not response.success and "joints ['elbow'] are not in /joint_states" in response.message
    # No controller listening: refused.
    nodes("tape_recorder", "rec_nocontroller", recorder_params(tmp_path / "bags2", forward_controller="nobody"))
    assert client.change_state("rec_nocontroller", "configure") == (True, "inactive")
    assert client.change_state("rec_nocontroller", "activate") == (True, "active")
    response = request_play(client, "rec_nocontroller")
    assert not response.success and "no controller is listening on /nobody/commands" in response.message
    # Output folder not writable, envelope not set: configure fails and the node stays unconfigured.
    blocked = tmp_path / "file_not_folder"
    blocked.write_text("")
    nodes("tape_recorder", "rec_badout", recorder_params(blocked / "bags"))
    assert client.change_state("rec_badout", "configure") == (False, "unconfigured")
    params = recorder_params(tmp_path / "bags3")
    del params["envelope.hinge.max_torque_nm"]
    nodes("tape_recorder", "rec_noenv", params)
    assert client.change_state("rec_noenv", "configure") == (False, "unconfigured")
    # Nothing plays while unconfigured or inactive.
    response = client.call(Trigger, "/rec_noenv/play", Trigger.Request())
    assert not response.success and "not active" in response.message


def test_trajectory_mode_and_effort_stream(nodes, client, tmp_path):
    # A trajectory controller gets the whole tape as one JointTrajectory; the drive tracks it.
    stiff = {"gains.hinge.p": 200.0, "gains.hinge.d": 8.0, "gains.hinge.i": 200.0, "gains.hinge.i_clamp": 1.0}
    _, diagnostics = start_pair(
        nodes, client, tmp_path, sim_extra=stiff, rec_extra={"tape.kind": "jog", "command_mode": "trajectory"}
    )
    status = play(client, diagnostics)
    assert status.message.startswith("finished"), status.message
    recording = read_recording(Path(values(status)["bag"]), joints=["hinge"], time_source="header")
    [setpoints] = recording.commands.values()
    tape = tapes.Tape.from_dict(recording.metadata["tape"])
    start_ns = recording.metadata["start_ns"]
    during = recording.samples.time_ns >= start_ns  # the trajectory is stamped to start at start_ns
    t = recording.samples.time_ns[during]
    q = recording.samples.position[during, 0]
    reference = tapes.sample(tape, (t - start_ns) * 1e-9).position[:, 0]
    assert np.max(np.abs(setpoints.held_at(t)[:, 0] - reference)) < 2e-3  # 100 Hz waypoints, cubic between

    # The robot starts the goal at its stamp (trajectory_lead_s after sending), not when it arrives; the PID
    # drive (wn = sqrt(200 / 0.325) = 25 rad/s, zeta 0.5, an integral clamped at 1 N m) follows the jogs
    # of ~0.1 rad in ~0.5 s with a lag of its own: find it by the best alignment, then check the tracking.
    def error(shift_ns: int) -> float:
        shifted = tapes.sample(tape, (t - start_ns - shift_ns) * 1e-9).position[:, 0]
        return float(np.sqrt(np.mean((q - shifted) ** 2)))

    best = min(np.arange(0, 1_000_000_000, PERIOD_NS), key=error)
    assert error(best) < 0.2 * np.sqrt(np.mean(reference**2)), (best, error(best))


def test_effort_tape_on_an_effort_interface(nodes, client, tmp_path):
    _, diagnostics = start_pair(
        nodes,
        client,
        tmp_path,
        sim_extra={"forward_interface": "effort"},
        rec_extra={"tape.kind": "dither", "forward_interface": "effort"},
    )
    status = play(client, diagnostics)
    assert status.message.startswith("finished"), status.message
    recording = read_recording(Path(values(status)["bag"]), joints=["hinge"], time_source="header")
    [torques] = recording.commands.values()
    assert torques.interface == "effort" and np.max(np.abs(torques.values)) <= ENVELOPE["max_torque_nm"]
    # The robot reports the torque it applied: exactly commanded values, each after the recorder sent it
    # (by the DDS hop between the two processes: a few ms of robot time).
    applied = recording.samples.effort[:, 0]
    sent_at = {}
    for t, v in zip(torques.time_ns, torques.values[:, 0]):
        sent_at.setdefault(v, t)
    moving = applied != 0.0
    assert moving.sum() > 0.5 * len(applied)
    assert all(v in sent_at for v in applied[moving])
    lag_ns = np.array([t - sent_at[v] for t, v in zip(recording.samples.time_ns[moving], applied[moving])])
    assert np.all(lag_ns >= 0) and np.median(lag_ns) < 500_000_000


def test_record_command_line(nodes, tmp_path):
    import subprocess
    import sys

    params = tmp_path / "recorder.yaml"
    params.write_text(yaml.safe_dump({"tape_recorder": {"ros__parameters": recorder_params(tmp_path / "unused")}}))
    # the recorder starts before the robot, as after `ros2 launch` of both: it waits for the robot's feedback
    record = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sysid_ros.cli",
            "record",
            "--params-file",
            str(params),
            "--tape",
            "sweep",
            "--seed",
            "2",
            "--out",
            str(tmp_path / "cli_bags"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    nodes("sim_robot", "sim_robot", SIM)
    stdout, stderr = record.communicate(timeout=120)
    done = subprocess.CompletedProcess(record.args, record.returncode, stdout, stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed" in done.stdout and "100.0%" in done.stdout
    # a normal start-up waits for the robot instead of logging refused plays
    assert "no fresh feedback" not in done.stdout + done.stderr and "[ERROR]" not in done.stderr
    [bag] = list((tmp_path / "cli_bags").iterdir())
    assert bag.name.startswith("sweep-s2") and read_metadata(bag)[-1]["result"]["completed"] is True


def test_cleanup_undoes_configure(tmp_path):
    """configure -> cleanup -> configure -> shutdown, in this process: each transition succeeds and cleanup
    leaves no subscription, watchdog or command publisher behind."""
    import rclpy
    from rclpy.parameter import Parameter

    from sysid_ros.nodes.tape_recorder import TapeRecorderNode

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        params = recorder_params(tmp_path / "bags")
        node = TapeRecorderNode(context=context, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        node.trigger_configure()
        assert node._state_machine.current_state[1] == "inactive"
        assert node.count_publishers("/forward_command_controller/commands") == 1
        node.trigger_cleanup()
        assert node._state_machine.current_state[1] == "unconfigured"
        assert node.count_publishers("/forward_command_controller/commands") == 0
        assert node._feedback_sub is None and node._watchdog is None and node._config is None
        node.trigger_configure()
        assert node._state_machine.current_state[1] == "inactive"
        node.trigger_shutdown()
        assert node._state_machine.current_state[1] == "finalized"
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_record_action_feedback_cancel_and_completion(nodes, client, tmp_path):
    """The `~/record` action: feedback every second with the seconds of motion left; a client's cancel holds at
    once (CANCELED, logged at INFO), the next goal plays the tape to its end and answers with a readable bag."""

    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient
    from sysid_ros_interfaces.action import Record

    recorder, _ = start_pair(nodes, client, tmp_path, rec_extra={"tape.kind": "steps"})
    action = ActionClient(client.node, Record, "tape_recorder/record")
    assert action.wait_for_server(timeout_sec=60.0)

    def run(cancel_after: float | None = None):
        goal, feedback = send_goal(action, Record.Goal())
        assert goal.accepted
        done = goal.get_result_async()
        if cancel_after is not None:
            wait_for(
                lambda: done.done() or any(f.progress >= cancel_after for _, f in feedback),
                180.0,
                "the play to get going",
            )
            assert not done.done(), (
                done.result().result.message,
                [f for _, f in feedback][-3:],
                recorder.log()[-2000:],
            )
            goal.cancel_goal_async()
        return wait_for(lambda: done.result() if done.done() else None, 300.0, "the result"), feedback

    cancelled, feedback = run(cancel_after=0.1)
    assert cancelled.status == GoalStatus.STATUS_CANCELED and not cancelled.result.success
    assert cancelled.result.message == "aborted: cancelled by request"
    assert read_metadata(cancelled.result.bag)[-1]["result"]["abort_reason"] == "cancelled by request"
    lines = [line for line in recorder.log().splitlines() if "cancelled by request" in line]
    assert lines and all("[INFO]" in line for line in lines), lines
    finished, feedback = run()
    assert finished.status == GoalStatus.STATUS_SUCCEEDED, finished.result.message
    playing = [f for _, f in feedback if f.stage == "playing"]
    assert playing and playing[0].seconds_left > playing[-1].seconds_left >= 0.0 and playing[0].play == "steps"
    times = [t for t, _ in feedback]
    assert max(b - a for a, b in zip(times, times[1:])) <= 5.0
    assert read_metadata(finished.result.bag)[-1]["result"]["completed"] is True
    assert len(read_joint_states(finished.result.bag, joints=["hinge"], time_source="header").samples.time_ns) > 0
