"""online_estimator over DDS on a 7-joint arm: sim_robot runs pybullet's iiwa tracking a multisine that
tape_recorder plays and records; a 1.5 kg payload is attached, then removed (`physics.payload.mass`).

The estimator node follows the payload (the arm model without it, the residual detector on) and publishes
its events, the accepted payload on a latched topic and as read-only parameters; `sysid-ros online` on the
recorded bag gives the same changes. Simulated time at quarter speed: 2 shared cores run the robot, the
recorder, the estimator and the test (at half speed, a load average of 30 made the estimator drop samples). Skipped
without pybullet.
"""

from __future__ import annotations

import json

import pytest
import yaml

pytest.importorskip("pybullet_data")

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped
from rosgraph_msgs.msg import Clock
from std_msgs.msg import String

from support.online_payload import AMPLITUDE_RAD, GAINS, NOISE, PAYLOAD, POSE_RAD, models
from sysid_ros.cli import main
from sysid_ros.core import tapes
from sysid_ros.core.identify import IIWA_JOINTS, IIWA_TORQUE_LIMITS_NM
from sysid_ros.core.online import FIRST_MOMENTS
from sysid_ros.core.tapes import Envelope
from sysid_ros.demo import activate
from sysid_ros.nodes.online_estimator import PAYLOAD_QOS
from sysid_ros.ros.client import request_play, wait_for

pytestmark = pytest.mark.ros

S = 1_000_000_000
TAPE_S = 16.0  # motion between the 1 s tapers: 1.5 s to 15.5 s of the tape; the changes at about 6 s and 10 s


def robot_params(model: str) -> dict:
    params = {
        "model": model,
        "use_sim_time": True,
        "real_time_factor": 0.25,
        "forward_interface": "position",
        "noise.position_rad": NOISE.position_rad,
        "noise.velocity_rad_s": NOISE.velocity_rad_s,
        "initial_positions": [float(x) for x in POSE_RAD],
        "physics.payload.mass": 0.0,
        "gain_guard.p_max": 1000.0,
        "gain_guard.d_max": 100.0,
    }
    for joint, gains in GAINS.items():
        params.update({f"gains.{joint}.p": float(gains.p), f"gains.{joint}.d": float(gains.d)})
    return params


def recorder_params(tape_file: str, output_dir: str) -> dict:
    params = {
        "joints": list(IIWA_JOINTS),
        "command_mode": "trajectory",
        "command_rate_hz": 500.0,
        "tape.file": tape_file,
        "output_dir": output_dir,
        "safety.stale_after_s": 5.0,
        "trajectory_lead_s": 2.0,
    }  # robot seconds: a loaded machine delivered 0.5 s late
    # the tape spans AMPLITUDE_RAD; the envelope leaves room for the tracking error (a 1.5 kg payload on
    # P-D drives without integral action sags joint 4 beyond a travel equal to the tape's: "envelope breach")
    for joint, (origin, travel, torque) in zip(IIWA_JOINTS, zip(POSE_RAD, AMPLITUDE_RAD, IIWA_TORQUE_LIMITS_NM)):
        params.update(
            {
                f"envelope.{joint}.origin_rad": float(origin),
                f"envelope.{joint}.travel_rad": float(travel) + 0.3,
                f"envelope.{joint}.max_speed_rad_s": 4.0,
                f"envelope.{joint}.max_torque_nm": torque,
            }
        )
    return params


def multisine_tape(path) -> str:
    envelopes = {
        j: Envelope(float(o), float(t), 4.0, lim)
        for j, o, t, lim in zip(IIWA_JOINTS, POSE_RAD, AMPLITUDE_RAD, IIWA_TORQUE_LIMITS_NM)
    }
    tape = tapes.build("multisine", envelopes, 500.0, seed=3, band_hz=(0.2, 1.5), duration_s=TAPE_S)
    path.write_text(yaml.safe_dump(json.loads(json.dumps(tape.to_dict(), default=float))))  # numpy scalars as floats
    return str(path)


def test_arm_payload_attached_and_removed_over_dds_and_replayed_from_the_bag(nodes, client, tmp_path):
    robot_model, arm_model = models(str(tmp_path))
    nodes("sim_robot", "sim_robot", robot_params(robot_model))
    nodes(
        "tape_recorder",
        "tape_recorder",
        recorder_params(multisine_tape(tmp_path / "tape.yaml"), str(tmp_path / "bags")),
    )
    nodes("online_estimator", "online_estimator", {"model": arm_model, "payload_hysteresis": 0.02})
    diagnostics = client.collect(DiagnosticArray, "/diagnostics", 1000)
    estimates = client.collect(DiagnosticArray, "/online_estimator/estimate", 1000)
    events = client.collect(String, "/online_estimator/events", 100)
    clock = client.collect(Clock, "/clock", 10)
    payloads = client.collect(InertiaStamped, "/online_estimator/payload", PAYLOAD_QOS)
    for node in ("tape_recorder", "online_estimator"):
        activate(client, node, tmp_path / "logs")

    def now_ns() -> int:
        msg = clock[-1].clock
        return msg.sec * S + msg.nanosec

    def change(mass: float) -> int:
        """Set the hidden payload; the robot time it took effect (sim_robot's diagnostics say)."""
        assert all(r.successful for r in client.set_parameters("sim_robot", {"physics.payload.mass": mass}))
        said = wait_for(
            lambda: next(
                (
                    kv.value
                    for a in reversed(diagnostics)
                    for s in a.status
                    if s.name == "/sim_robot"
                    for kv in s.values
                    if kv.key == "last_physics_change" and kv.value.startswith(f"payload.mass={mass}")
                ),
                None,
            ),
            what="sim_robot to report the change",
        )
        return int(said.split(" at ")[1].split()[0])

    def kinds() -> list[dict]:
        return [yaml.safe_load(e.data) for e in events]

    def settled_mass(count: int) -> int:
        """Robot time of the `count`-th settled mass change (ParameterChange), once it is there."""
        found = wait_for(
            lambda: (lambda c: c[count - 1] if len(c) >= count else None)(
                [k["time_ns"] for k in kinds() if k["type"] == "ParameterChange" and k["parameter"] == "mass_kg"]
            ),
            timeout_s=180,
            what=f"settled mass change {count}",
        )
        return int(found)

    wait_for(lambda: clock, what="the simulated clock")
    seen = len(diagnostics)
    assert request_play(client).success
    # each change once the estimator is ready for it (on a loaded machine the tape starts when it can):
    # attach 1 s of robot time after the first accepted payload (no payload), remove 1 s after it settled
    first = wait_for(lambda: payloads, timeout_s=180, what="the first accepted payload")[0].header.stamp
    wait_for(lambda: now_ns() >= first.sec * S + first.nanosec + S, timeout_s=120, what="the attach time")
    attached_ns = change(PAYLOAD.mass_kg)
    settled_ns = settled_mass(1)
    wait_for(lambda: now_ns() >= settled_ns + S, timeout_s=120, what="the removal time")
    removed_ns = change(0.0)
    settled_mass(2)
    status = wait_for(
        lambda: next(
            (
                s
                for a in diagnostics[seen:]
                for s in a.status
                if s.name == "/tape_recorder" and s.message.startswith(("finished", "aborted"))
            ),
            None,
        ),
        180,
        "the tape's end",
    )
    assert status.message.startswith("finished"), status.message

    alarms = [k for k in kinds() if k["type"] == "ChangeDetected"]
    settled = [k["parameter"] for k in kinds() if k["type"] == "ParameterChange"]
    assert settled.count("mass_kg") == 2 and settled.count("mz_kg_m") == 2, settled
    assert len(alarms) == 2, kinds()  # one per change: no false change over the play
    first_moment = PAYLOAD.mass_kg * PAYLOAD.com_m[2]
    for alarm, at_ns, mass in zip(alarms, (attached_ns, removed_ns), (PAYLOAD.mass_kg, 0.0)):
        delay_s = (alarm["time_ns"] - at_ns) / S
        # the alarm names what stepped in its ~0.1 s of post-change rows (the mass, or its first moments only)
        assert 0 < delay_s <= 0.5 and set(alarm["parameters"]) & set(FIRST_MOMENTS), (delay_s, alarm)
        later = next(e for e in estimates if e.header.stamp.sec * S + e.header.stamp.nanosec >= at_ns + 2 * S)
        values = {kv.key: kv.value for kv in later.status[0].values}
        m, mz = float(values["mass_kg.value"]), float(values["mz_kg_m.value"])
        # the 3 % and 5 %. Measured 2 s after attaching (ten recorded runs): mass within 0.03-0.21 %, m cz
        # within 0.07-0.55 %, where the window then in use reports standard errors of 0.13 % on the mass and 0.4 %
        # on m cz (0.0005 kg m): 3 % and 5 % are over ten of them. (With every joint's equations weighted alike
        # m cz came out 6.7 % low; weighted by each joint's noise but with a 0.2 s derivative window, 2-2.8 %.)
        assert abs(m - mass) < 0.03 * PAYLOAD.mass_kg, (mass, m, kinds())
        assert abs(mz - first_moment * (mass > 0)) < 0.05 * first_moment, (mass, mz)

    # the accepted payload: latched for a late subscriber, and mirrored as read-only parameters
    late = client.collect(InertiaStamped, "/online_estimator/payload", PAYLOAD_QOS)
    wait_for(lambda: late, what="the latched payload")
    assert abs(late[-1].inertia.m) < 0.03 * PAYLOAD.mass_kg and late[-1].header.frame_id == "lbr_iiwa_link_7"
    mass_kg, changed_s = client.get_parameters("online_estimator", ["payload.mass_kg", "payload.last_change_s"])
    assert mass_kg == pytest.approx(late[-1].inertia.m) and changed_s * S >= removed_ns
    [refused] = client.set_parameters("online_estimator", {"payload.mass_kg": 1.0})
    assert not refused.successful and "read-only" in refused.reason

    # the same changes from the recorded bag (its hops start at the bag's first sample, not the node's)
    [bag] = sorted((tmp_path / "bags").iterdir())
    out = tmp_path / "replay.yaml"
    assert main(["online", str(bag), "--model", arm_model, "--out", str(out)]) == 0
    replayed = yaml.safe_load(out.read_text())["events"]
    live = [k for k in kinds() if k["type"] in ("ChangeDetected", "ParameterChange")]
    offline = [k for k in replayed if k["type"] in ("ChangeDetected", "ParameterChange")]
    assert [(k["type"], k.get("parameter")) for k in offline] == [(k["type"], k.get("parameter")) for k in live]
    for a, b in zip(offline, live):  # measured 22 ms apart: the hop grids start 22 ms apart
        assert abs(a["time_ns"] - b["time_ns"]) <= 0.3 * S, (a, b)
        if a["type"] == "ParameterChange":  # the settled values agree (the alarms' rough steps need not)
            assert abs(a["value"] - b["value"]) <= 0.01 + 0.01 * abs(b["value"]), (a, b)
