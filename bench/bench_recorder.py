"""Recording throughput: tape_recorder on a 7-joint arm publishing joint states at 1 kHz, in real time.

sim_robot runs a 7-joint chain at 1 kHz (wall clock), tape_recorder plays a multisine on all seven joints
(10 s) streaming position commands at 1 kHz, and records. Prints joint states expected (from the stamps' span) vs
recorded, commands sent, and the CPU each process used. Run: `.venv/bin/python bench/bench_recorder.py`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
from diagnostic_msgs.msg import DiagnosticArray

from sysid_ros.core.bags import read_joint_states, read_recording
from sysid_ros.ros.client import RosClient, play_tape, status_value
from sysid_ros.ros.processes import NodeProcess, isolate_ros_environment

JOINTS = [f"j{k}" for k in range(1, 8)]


def chain_mjcf() -> str:
    """A 7-joint serial arm (alternating pitch and yaw axes), light enough for 1 kHz physics in real time."""
    body, close = "", ""
    for k, joint in enumerate(JOINTS):
        axis = "0 1 0" if k % 2 == 0 else "0 0 1"
        body += (
            f'<body name="l{k + 1}" pos="0 0 {0.3 if k else 0.5}"><joint name="{joint}" axis="{axis}" '
            f'damping="0.5" armature="0.05" range="-2 2"/><geom type="capsule" fromto="0 0 0 0 0 0.3" '
            f'size="0.04" mass="{3.0 - 0.35 * k:.2f}" contype="0" conaffinity="0"/>'
        )
        close += "</body>"
    motors = "".join(f'<motor joint="{j}" ctrlrange="-200 200"/>' for j in JOINTS)
    return (
        f'<mujoco model="chain7"><option timestep="0.001"/><worldbody>{body}{close}</worldbody>'
        f"<actuator>{motors}</actuator></mujoco>"
    )


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    isolate_ros_environment()
    folder = Path(tempfile.mkdtemp(prefix="bench_recorder_"))
    model = folder / "chain7.xml"
    model.write_text(chain_mjcf())
    gains = {f"gains.{j}.{g}": v for j in JOINTS for g, v in (("p", 400.0), ("d", 20.0), ("i", 0.0))}
    sim = NodeProcess(
        "sim_robot",
        "sim_robot",
        {
            "model": str(model),
            "joints": JOINTS,
            "publish_rate_hz": 1000.0,
            "command_rate_hz": 1000.0,
            "forward_interface": "position",
            "noise.position_rad": 1e-4,
            **gains,
        },
        folder,
    )
    envelope = {
        f"envelope.{j}.{k}": v
        for j in JOINTS
        for k, v in (("origin_rad", 0.0), ("travel_rad", 0.3), ("max_speed_rad_s", 1.5), ("max_torque_nm", 200.0))
    }
    recorder = NodeProcess(
        "tape_recorder",
        "tape_recorder",
        {
            "joints": JOINTS,
            "command_rate_hz": 1000.0,
            "output_dir": str(folder / "bags"),
            "tape.kind": "multisine",
            "safety.stale_after_s": 0.5,
            **envelope,
        },
        folder,
    )
    client = RosClient("bench_client")
    try:
        diagnostics = client.collect(DiagnosticArray, "/diagnostics", 1000)
        assert client.change_state("tape_recorder", "configure")[0]
        assert client.change_state("tape_recorder", "activate")[0]
        procs = {name: psutil.Process(p.pid) for name, p in (("sim_robot", sim), ("tape_recorder", recorder))}
        cpu0 = {n: p.cpu_times() for n, p in procs.items()}
        wall0 = time.monotonic()
        status = play_tape(client, diagnostics, timeout_s=600)
        wall = time.monotonic() - wall0
        cpu = {n: sum(p.cpu_times()[:2]) - sum(cpu0[n][:2]) for n, p in procs.items()}
        bag = Path(status_value(status, "bag"))
        feedback = read_joint_states(bag, time_source="header", max_gap_s=10.0)
        t = np.concatenate([s.time_ns for s in feedback.segments])
        expected = int(round((t[-1] - t[0]) / 1e6)) + 1
        commands = sum(
            len(c) for c in read_recording(bag, joints=JOINTS, time_source="header", max_gap_s=10.0).commands.values()
        )
        print(f"tape {status.message}; {wall:.1f} s wall")
        print(
            f"joint states: expected {expected} (1 kHz over {(t[-1] - t[0]) * 1e-9:.2f} s), recorded {len(t)}, "
            f"dropped {expected - len(t)} ({(expected - len(t)) / expected:.3%})"
        )
        print(f"commands sent and recorded: {commands} ({commands / ((t[-1] - t[0]) * 1e-9):.0f} Hz)")
        for name, seconds in cpu.items():
            print(f"CPU {name}: {seconds:.1f} s = {seconds / wall:.0%} of one core")
    finally:
        client.close()
        recorder.stop()
        sim.stop()


if __name__ == "__main__":
    main()
