"""Robot stacks per host: N x (sim_robot at 250 Hz + tape_recorder recording), each in its own namespace.

For each N (default 1 2 3 4 6), starts N stacks at once (`/r1`..`/rN`: sim_robot, the pendulum at 250 Hz in
wall time as a real robot runs; tape_recorder streaming a 10 s multisine at 250 Hz; a lifecycle_manager with
autostart), measures the bring-up per robot (process start to `~/is_active`, and the manager's own
configure/activate time), plays all N tapes together, and counts in each bag the joint states dropped (the
stamps' span at 4 ms against those recorded). Prints one row per N side by side, with the host's load average
(other work on the host counts against the stacks). Run: `.venv/bin/python bench/bench_fleet_stack.py [N ...]`.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from std_srvs.srv import Trigger

from sysid_ros.core.bags import read_joint_states
from sysid_ros.nodes.client import RosClient, play_ended, request_play, status_value, wait_for
from sysid_ros.nodes.processes import NodeProcess, isolate_ros_environment

RATE_HZ = 250.0
SIM = {"forward_interface": "position", "publish_rate_hz": RATE_HZ, "command_rate_hz": RATE_HZ,
       "gains.hinge.p": 40.0, "gains.hinge.d": 1.5, "noise.position_rad": 2e-4}
RECORDER = {"joints": ["hinge"], "command_mode": "stream", "forward_interface": "position",
            "command_rate_hz": RATE_HZ, "tape.kind": "multisine", "model": "pendulum", "safety.stale_after_s": 1.0,
            "safety.speed_margin_frac": 0.5, "envelope.hinge.origin_rad": 0.0, "envelope.hinge.travel_rad": 0.4,
            "envelope.hinge.max_speed_rad_s": 2.0, "envelope.hinge.max_torque_nm": 3.0}


def run(n: int, folder: Path) -> dict:
    robots = [f"r{k + 1}" for k in range(n)]
    client = RosClient("bench_fleet")
    diagnostics = client.collect(DiagnosticArray, "/diagnostics", 5000)
    processes: list[NodeProcess] = []
    try:
        started = time.monotonic()
        for k, ns in enumerate(robots):
            processes += [
                NodeProcess("sim_robot", "sim_robot", {**SIM, "seed": k}, folder / ns, namespace=ns),
                NodeProcess("tape_recorder", "tape_recorder", {**RECORDER, "tape.seed": k,
                                                               "output_dir": str(folder / ns / "bags")},
                            folder / ns, namespace=ns),
                NodeProcess("lifecycle_manager", "lifecycle_manager", {
                    "node_names": ["sim_robot", "tape_recorder"], "plain_nodes": ["sim_robot"], "autostart": True},
                    folder / ns, namespace=ns)]
        up_s = {}
        for ns in robots:
            wait_for(lambda: client.call(Trigger, f"{ns}/lifecycle_manager/is_active", Trigger.Request()).success,
                     300.0, f"{ns} to come up")
            up_s[ns] = time.monotonic() - started
        managed_s = []
        for ns in robots:
            report = wait_for(lambda: next((s.message for a in diagnostics for s in a.status
                                            if s.name == f"/{ns}/lifecycle_manager"
                                            and s.message.startswith("active:")), None), 30.0, "a bring-up report")
            managed_s.append(float(re.search(r"in ([0-9.]+) s", report).group(1)))
        seen = len(diagnostics)
        playing = []
        for ns in robots:
            try:  # a recorder that never hears fresh feedback refuses: the host does not hold this many
                playing += [ns] if request_play(client, f"{ns}/tape_recorder").success else []
            except TimeoutError:
                pass
        ended = {ns: wait_for(lambda: play_ended(client, diagnostics[seen:], f"{ns}/tape_recorder"), 300.0,
                              f"{ns}'s play") for ns in playing}
        dropped, completed = [-1] * (n - len(playing)), 0
        for ns, status in ended.items():
            completed += status.message.startswith("finished")
            bag = status_value(status, "bag")
            if not bag:
                dropped.append(-1)
                continue
            stamps = np.concatenate([s.time_ns for s in read_joint_states(bag, time_source="header",
                                                                          max_gap_s=10.0).segments])
            expected = int(round((stamps[-1] - stamps[0]) * RATE_HZ / 1e9)) + 1
            dropped.append(expected - len(stamps))
        return {"n": n, "completed": completed, "dropped_max": max(dropped), "dropped_total": sum(dropped),
                "up_mean_s": float(np.mean(list(up_s.values()))), "up_last_s": max(up_s.values()),
                "managed_mean_s": float(np.mean(managed_s)), "load": os.getloadavg()[0]}
    finally:
        client.close()
        for process in reversed(processes):
            process.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("counts", nargs="*", type=int, default=[1, 2, 3, 4, 6], help="stack counts to try")
    args = parser.parse_args()
    isolate_ros_environment()
    folder = Path(tempfile.mkdtemp(prefix="bench_fleet_"))
    print(f"{os.cpu_count()} cores; load average before: {os.getloadavg()[0]:.1f}")
    print(f"{'stacks':>6} {'completed':>9} {'dropped max/total':>18} {'start->active mean/last s':>26} "
          f"{'manager s/robot':>16} {'load':>6}")
    print("(manager s: from its start to all active, waiting for the nodes included; dropped -1: no play)")
    rows = []
    for n in args.counts:
        try:
            row = run(n, folder / f"n{n}")
        except TimeoutError as exc:  # a stack that never came up (or a play that never ended): not held
            print(f"{n:>6} not held: {exc}")
            continue
        rows.append(row)
        print(f"{n:>6} {row['completed']:>9} {row['dropped_max']:>8}/{row['dropped_total']:<9} "
              f"{row['up_mean_s']:>12.1f}/{row['up_last_s']:<13.1f} {row['managed_mean_s']:>16.3f} "
              f"{row['load']:>6.1f}")
    held = [r["n"] for r in rows if r["completed"] == r["n"] and r["dropped_max"] == 0]
    print(f"stacks held with 0 dropped joint states: {max(held) if held else 0} (of {args.counts})")


if __name__ == "__main__":
    main()
