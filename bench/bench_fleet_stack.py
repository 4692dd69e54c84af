"""Robot stacks per host: N x (sim_robot at 250 Hz + tape_recorder + servo_tuner + lifecycle_manager), each in
its own namespace.

For each N (default 1 2 4 6 8), starts N stacks at once (`/r1`..`/rN`: sim_robot, the pendulum at 250 Hz in
wall time as a real robot runs; a tape_recorder streaming a 10 s multisine at 250 Hz; a servo_tuner, idle; a
lifecycle_manager with autostart), measures the bring-up per robot (process start to `~/is_active`, and the
manager's own configure/activate time), plays all N tapes together, and counts in each bag the joint states
dropped (the stamps' span at 4 ms against those recorded). What one stack costs: CPU (its processes' CPU
seconds per wall second, in % of a core) idle for 5 s after bring-up and over the plays, and memory (PSS:
shared pages split between the processes that map them; RSS counts the shared libraries once per process).
`--layout composed` (default) runs recorder, tuner and manager as one `robot_stack` process next to
sim_robot; `--layout separate` as a process each. Prints one row per N, with the host's load average (other
work on the host counts against the stacks).
Run: `.venv/bin/python bench/bench_fleet_stack.py [--layout composed|separate|both] [N ...]`.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
from diagnostic_msgs.msg import DiagnosticArray
from std_srvs.srv import Trigger

from sysid_ros.core.bags import read_joint_states
from sysid_ros.ros.client import RESEND_S, RosClient, play_ended, request_play, status_value, wait_for
from sysid_ros.ros.processes import NodeProcess, isolate_ros_environment

RATE_HZ = 250.0
SIM = {
    "forward_interface": "position",
    "publish_rate_hz": RATE_HZ,
    "command_rate_hz": RATE_HZ,
    "gains.hinge.p": 40.0,
    "gains.hinge.d": 1.5,
    "noise.position_rad": 2e-4,
}
RECORDER = {
    "joints": ["hinge"],
    "command_mode": "stream",
    "forward_interface": "position",
    "command_rate_hz": RATE_HZ,
    "tape.kind": "multisine",
    "model": "pendulum",
    "safety.stale_after_s": 1.0,
    "safety.speed_margin_frac": 0.5,
    "envelope.hinge.origin_rad": 0.0,
    "envelope.hinge.travel_rad": 0.4,
    "envelope.hinge.max_speed_rad_s": 2.0,
    "envelope.hinge.max_torque_nm": 3.0,
}
TUNER = {
    "joints": ["hinge"],
    "controller": "sim_robot",
    "model": "pendulum",
    "command_rate_hz": RATE_HZ,
    "envelope.hinge.origin_rad": 0.0,
    "envelope.hinge.travel_rad": 0.4,
    "envelope.hinge.max_speed_rad_s": 2.0,
    "envelope.hinge.max_torque_nm": 3.0,
}
MANAGER = {"node_names": ["sim_robot", "tape_recorder", "servo_tuner"], "plain_nodes": ["sim_robot"], "autostart": True}
IDLE_S = 5.0


def start_stack(ns: str, k: int, folder: Path, layout: str) -> list[NodeProcess]:
    """One robot's processes: sim_robot, then recorder + tuner + manager (one process, or one each)."""
    params = {
        "tape_recorder": {**RECORDER, "tape.seed": k, "output_dir": str(folder / "bags")},
        "servo_tuner": {**TUNER, "output_dir": str(folder / "tuner")},
        "lifecycle_manager": MANAGER,
    }
    out = [NodeProcess("sim_robot", "sim_robot", {**SIM, "seed": k}, folder, namespace=ns)]
    if layout == "composed":
        return out + [NodeProcess("robot_stack", "robot_stack", params, folder, namespace=ns, composed=True)]
    return out + [NodeProcess(name, name, p, folder, namespace=ns) for name, p in params.items()]


def cpu_seconds(stacks: dict[str, list[psutil.Process]]) -> dict[str, float]:
    """User + system CPU seconds so far of each stack's processes (all their threads)."""
    return {ns: sum(sum(p.cpu_times()[:2]) for p in procs) for ns, procs in stacks.items()}


def pss_mb(procs: list[psutil.Process]) -> float:
    return sum(p.memory_full_info().pss for p in procs) / 2**20


def run(n: int, folder: Path, layout: str) -> dict:
    robots = [f"r{k + 1}" for k in range(n)]
    client = RosClient("bench_fleet")
    diagnostics = client.collect(DiagnosticArray, "/diagnostics", 5000)
    processes: list[NodeProcess] = []
    try:
        started = time.monotonic()
        stacks = {}
        for k, ns in enumerate(robots):
            stack = start_stack(ns, k, folder / ns, layout)
            processes += stack
            stacks[ns] = [psutil.Process(p.pid) for p in stack]
        up_s = {}
        for ns in robots:
            wait_for(
                lambda: (
                    client.call(
                        Trigger, f"{ns}/lifecycle_manager/is_active", Trigger.Request(), 300.0, resend_s=RESEND_S
                    ).success
                ),
                300.0,
                f"{ns} to come up",
            )
            up_s[ns] = time.monotonic() - started
        managed_s = []
        for ns in robots:
            report = wait_for(
                lambda: next(
                    (
                        s.message
                        for a in diagnostics
                        for s in a.status
                        if s.name == f"/{ns}/lifecycle_manager" and s.message.startswith("active:")
                    ),
                    None,
                ),
                30.0,
                "a bring-up report",
            )
            managed_s.append(float(re.search(r"in ([0-9.]+) s", report).group(1)))
        c0, w0 = cpu_seconds(stacks), time.monotonic()
        time.sleep(IDLE_S)
        c1, w1 = cpu_seconds(stacks), time.monotonic()
        idle_pct = float(np.mean([100 * (c1[ns] - c0[ns]) / (w1 - w0) for ns in robots]))
        seen = len(diagnostics)
        playing = []
        for ns in robots:
            try:  # a recorder that never hears fresh feedback refuses: the host does not hold this many
                playing += [ns] if request_play(client, f"{ns}/tape_recorder").success else []
            except TimeoutError:
                pass
        ended = {
            ns: wait_for(lambda: play_ended(client, diagnostics[seen:], f"{ns}/tape_recorder"), 300.0, f"{ns}'s play")
            for ns in playing
        }
        c2, w2 = cpu_seconds(stacks), time.monotonic()
        play_pct = float(np.mean([100 * (c2[ns] - c1[ns]) / (w2 - w1) for ns in robots]))
        memory = float(np.mean([pss_mb(procs) for procs in stacks.values()]))
        dropped, completed = [-1] * (n - len(playing)), 0
        for ns, status in ended.items():
            completed += status.message.startswith("finished")
            bag = status_value(status, "bag")
            if not bag:
                dropped.append(-1)
                continue
            stamps = np.concatenate(
                [s.time_ns for s in read_joint_states(bag, time_source="header", max_gap_s=10.0).segments]
            )
            expected = int(round((stamps[-1] - stamps[0]) * RATE_HZ / 1e9)) + 1
            dropped.append(expected - len(stamps))
        return {
            "n": n,
            "completed": completed,
            "dropped_max": max(dropped),
            "dropped_total": sum(dropped),
            "up_mean_s": float(np.mean(list(up_s.values()))),
            "up_last_s": max(up_s.values()),
            "managed_mean_s": float(np.mean(managed_s)),
            "idle_pct": idle_pct,
            "play_pct": play_pct,
            "pss_mb": memory,
            "processes": len(processes) // n,
            "load": os.getloadavg()[0],
        }
    finally:
        client.close()
        for process in reversed(processes):
            process.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("counts", nargs="*", type=int, default=[1, 2, 4, 6, 8], help="stack counts to try")
    parser.add_argument(
        "--layout",
        choices=("composed", "separate", "both"),
        default="composed",
        help="recorder, tuner and manager in one process per robot, or a process each",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # `timeout` too stops every stack it started
    isolate_ros_environment()
    folder = Path(tempfile.mkdtemp(prefix="bench_fleet_"))
    print(f"{os.cpu_count()} cores; load average before: {os.getloadavg()[0]:.1f}")
    print(
        f"{'layout':>9} {'stacks':>6} {'completed':>9} {'dropped max/total':>18} {'start->active mean/last s':>26} "
        f"{'manager s':>9} {'CPU %/stack idle/play':>22} {'PSS MB/stack':>12} {'load':>6}"
    )
    print(
        "(manager s: from its start to all active, waiting for the nodes included; dropped -1: no play; "
        "CPU in % of one core)"
    )
    held: dict[str, list[int]] = {}
    for n in args.counts:
        for layout in ("composed", "separate") if args.layout == "both" else (args.layout,):
            try:
                row = run(n, folder / f"{layout}{n}", layout)
            except TimeoutError as exc:  # a stack that never came up (or a play that never ended): not held
                print(f"{layout:>9} {n:>6} not held: {exc}")
                continue
            if row["completed"] == n and row["dropped_max"] == 0:
                held.setdefault(layout, []).append(n)
            print(
                f"{layout:>9} {n:>6} {row['completed']:>9} {row['dropped_max']:>8}/{row['dropped_total']:<9} "
                f"{row['up_mean_s']:>12.1f}/{row['up_last_s']:<13.1f} {row['managed_mean_s']:>9.2f} "
                f"{row['idle_pct']:>11.1f}/{row['play_pct']:<10.1f} {row['pss_mb']:>12.0f} {row['load']:>6.1f}",
                flush=True,
            )
    for layout, ns in held.items():
        print(f"{layout}: stacks held with 0 dropped joint states: {max(ns)} (of {args.counts})")
    print(f"load average after: {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
