"""Where one robot stack's CPU goes: CPU seconds per thread, idle and over one play.

Starts one stack as `bench_fleet_stack.py` does (`/r1`: sim_robot, the pendulum at 250 Hz in wall time, and
`robot_stack`: tape_recorder + servo_tuner + lifecycle_manager in one process), then reads each thread's
user + system CPU seconds from /proc (psutil) over `--idle` seconds after bring-up and over one 10 s play.
Threads are grouped by what runs on them: a process's main thread (sim_robot: its executor, for commands,
services and the 1 s status; robot_stack: the tape_recorder's executor, which takes every joint state and,
while playing, streams the commands and writes the bag), its other Python threads (sim_robot: the stepping
thread, physics and publishing; robot_stack: the tuner's and the manager's executors), and Fast DDS's own
threads (`dds.udp.*`/`dds.shm.*` receive, `dds.ev.*` events and heartbeats, `dds.asyn.*` the asynchronous
writer). The stepping thread's physics alone is measured in this process (`SimRobot.advance` at 250 Hz, the
same model and rates); the rest of that thread is building and publishing the messages.

    .venv/bin/python bench/bench_stack_threads.py [--idle 10]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import psutil
from bench_fleet_stack import RATE_HZ, SIM, start_stack
from diagnostic_msgs.msg import DiagnosticArray
from std_srvs.srv import Trigger

from sysid_ros.core.gains import PidGains
from sysid_ros.core.sim import FeedbackNoise, SimRobot
from sysid_ros.ros.client import RESEND_S, RosClient, play_ended, request_play, wait_for
from sysid_ros.ros.processes import isolate_ros_environment


def thread_group(process: psutil.Process, tid: int) -> str:
    """main, python (another Python thread) or the Fast DDS thread's kind (dds.udp, dds.shm, dds.ev, ...)."""
    if tid == process.pid:
        return "main thread"
    try:
        comm = Path(f"/proc/{process.pid}/task/{tid}/comm").read_text().strip()
    except OSError:  # the thread ended
        return "ended"
    if comm.startswith("dds."):
        return ".".join(comm.split(".")[:2])
    return "other Python threads"


def cpu_by_thread(processes: dict[str, psutil.Process]) -> dict[tuple[str, str, int], float]:
    """(process, group, tid) -> user + system CPU seconds so far."""
    return {
        (name, thread_group(p, t.id), t.id): t.user_time + t.system_time
        for name, p in processes.items()
        for t in p.threads()
    }


def shares(before: dict, after: dict, wall_s: float) -> dict[tuple[str, str], tuple[float, float]]:
    """(process, group) -> (% of a core, % of a core on its busiest thread) between two readings."""
    total: dict[tuple[str, str], float] = defaultdict(float)
    top: dict[tuple[str, str], float] = defaultdict(float)
    for key, seconds in after.items():
        used = seconds - before.get(key, 0.0)
        total[key[:2]] += used
        top[key[:2]] = max(top[key[:2]], used)
    return {k: (100 * v / wall_s, 100 * top[k] / wall_s) for k, v in total.items()}


def physics_pct(wall_s: float = 10.0) -> float:
    """CPU % of a core `SimRobot.advance` takes for sim_robot's pendulum at its bench rates, in real time."""
    robot = SimRobot(
        "pendulum",
        command_rate_hz=RATE_HZ,
        publish_rate_hz=RATE_HZ,
        noise=FeedbackNoise(position_rad=SIM["noise.position_rad"]),
    )
    robot.set_gains("hinge", PidGains(p=SIM["gains.hinge.p"], d=SIM["gains.hinge.d"]))
    period_ns = int(1e9 / RATE_HZ)
    t0 = time.process_time()
    for k in range(int(wall_s * RATE_HZ)):
        robot.advance(robot.start_time_ns + (k + 1) * period_ns)
    return 100 * (time.process_time() - t0) / wall_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=10.0, help="seconds measured idle after bring-up")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    isolate_ros_environment()
    folder = Path(tempfile.mkdtemp(prefix="bench_stack_threads_"))
    print(f"{os.cpu_count()} cores; load average before: {os.getloadavg()[0]:.1f}")
    client = RosClient("bench_stack_threads")
    diagnostics = client.collect(DiagnosticArray, "/diagnostics", 5000)
    stack = start_stack("r1", 0, folder / "r1", "composed")
    try:
        processes = {"sim_robot": psutil.Process(stack[0].pid), "robot_stack": psutil.Process(stack[1].pid)}
        wait_for(
            lambda: (
                client.call(
                    Trigger, "r1/lifecycle_manager/is_active", Trigger.Request(), 300.0, resend_s=RESEND_S
                ).success
            ),
            300.0,
            "r1 to come up",
        )
        c0, w0 = cpu_by_thread(processes), time.monotonic()
        time.sleep(args.idle)
        c1, w1 = cpu_by_thread(processes), time.monotonic()
        seen = len(diagnostics)
        if not request_play(client, "r1/tape_recorder").success:
            raise RuntimeError("the recorder refused to play")
        ended = wait_for(lambda: play_ended(client, diagnostics[seen:], "r1/tape_recorder"), 300.0, "the play")
        c2, w2 = cpu_by_thread(processes), time.monotonic()
        pss = {name: p.memory_full_info().pss / 2**20 for name, p in processes.items()}
    finally:
        client.close()
        for process in reversed(stack):
            process.stop()
    idle, play = shares(c0, c1, w1 - w0), shares(c1, c2, w2 - w1)
    print(
        f"idle {w1 - w0:.1f} s, then one play ({ended.message.split(':')[0]}) {w2 - w1:.1f} s; "
        f"load average after: {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'process':<12} {'threads':<22} {'idle % of a core':>17} {'playing %':>10} {'busiest thread idle/play':>25}"
    )
    for key in sorted(set(idle) | set(play), key=lambda k: (k[0], -play.get(k, (0, 0))[0])):
        i, p = idle.get(key, (0.0, 0.0)), play.get(key, (0.0, 0.0))
        print(f"{key[0]:<12} {key[1]:<22} {i[0]:>17.1f} {p[0]:>10.1f} {i[1]:>12.1f}/{p[1]:<12.1f}")
    for name in processes:
        print(
            f"{name:<12} {'all':<22} {sum(v[0] for k, v in idle.items() if k[0] == name):>17.1f} "
            f"{sum(v[0] for k, v in play.items() if k[0] == name):>10.1f}   PSS {pss[name]:.0f} MB"
        )
    print(
        f"sim_robot's physics alone (SimRobot.advance, {RATE_HZ:.0f} Hz, in this process): "
        f"{physics_pct():.1f} % of a core"
    )


if __name__ == "__main__":
    main()
