"""Helpers of `test_tape_recorder_node` that other tests and benches use too:
tape_recorder over DDS against sim_robot: tapes played inside the envelope and recorded to rosbag2.
"""

from __future__ import annotations

from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

from sysid_ros.core import tapes
from sysid_ros.ros.client import play_tape, wait_for

RTF = 2.0


ENVELOPE = {"origin_rad": 0.0, "travel_rad": 0.4, "max_speed_rad_s": 2.0, "max_torque_nm": 3.0}


RATE_HZ = 250.0


PERIOD_NS = int(1e9 / RATE_HZ)


SIM = {
    "use_sim_time": True,
    "real_time_factor": RTF,
    "forward_interface": "position",
    "publish_rate_hz": RATE_HZ,
    "command_rate_hz": RATE_HZ,
    "gains.hinge.p": 40.0,
    "gains.hinge.d": 1.5,
    "gains.hinge.ff_velocity_scale": 0.0,
    "noise.position_rad": 0.0002,
}


def recorder_params(out: Path, **extra) -> dict:
    params = {
        "joints": ["hinge"],
        "command_mode": "stream",
        "forward_interface": "position",
        "command_rate_hz": RATE_HZ,
        "output_dir": str(out),
        "model": "pendulum",
        "safety.stale_after_s": 0.5,
        "safety.travel_margin_rad": 0.05,
        "safety.speed_margin_frac": 0.5,
        "safety.torque_margin_frac": 0.01,
        **{f"envelope.hinge.{k}": v for k, v in ENVELOPE.items()},
    }
    params.update(extra)
    return params


def recorder_status(diagnostics: list, node: str = "/tape_recorder") -> list[DiagnosticStatus]:
    return [s for a in diagnostics for s in a.status if s.name == node]


def play(client, diagnostics: list, node: str = "tape_recorder", timeout_s: float = 120.0) -> DiagnosticStatus:
    return play_tape(client, diagnostics, node, timeout_s)


def values(status: DiagnosticStatus) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


def start_pair(nodes, client, tmp_path, sim_extra=None, rec_extra=None):
    nodes("sim_robot", "sim_robot", {**SIM, **(sim_extra or {})})
    recorder = nodes("tape_recorder", "tape_recorder", recorder_params(tmp_path / "bags", **(rec_extra or {})))
    diagnostics = client.collect(DiagnosticArray, "/diagnostics", 1000)
    # a node's start-up (imports) can take over a minute on a loaded 2-core machine
    wait_for(lambda: "tape_recorder" in client.node.get_node_names(), 180.0, "the tape_recorder to start")
    assert client.change_state("tape_recorder", "configure") == (True, "inactive")
    assert client.change_state("tape_recorder", "activate") == (True, "active")
    wait_for(
        lambda: (
            client.node.count_subscribers("/forward_command_controller/commands") > 0
            and client.node.count_publishers("/joint_states") > 0
        ),
        what="sim_robot and tape_recorder",
    )
    return recorder, diagnostics


KINDS = sorted(
    (k for k in tapes.KINDS if k in __import__("os").environ.get("KINDS", ",".join(tapes.KINDS)).split(",")),
    key=lambda k: k not in tapes.MODEL_KINDS,
)


"""Every kind; a designed (`optimal`) tape first: it starts at the envelope origin, where the pendulum rests."""
