"""What 5 JointState messages of 10^6 joint names each (each its own names) leave behind in a tape_recorder and an
online_estimator.

Both nodes run as processes (configured, active); their resident memory is read before the messages and again
once it has settled (no change over 1 MB for 5 s). `--baseline TREE` runs the same against another source tree
(e.g. `/work/main` before the bound) in the same run, side by side. Run: `.venv/bin/python
bench/bench_feedback_bounds.py [--baseline TREE]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import psutil
from sensor_msgs.msg import JointState

from sysid_ros.ros.client import RosClient
from sysid_ros.ros.processes import NodeProcess, isolate_ros_environment

NAMES, MESSAGES = 10**6, 5
RECORDER = {
    "joints": ["hinge"],
    "model": "pendulum",
    "envelope.hinge.origin_rad": 0.0,
    "envelope.hinge.travel_rad": 0.4,
    "envelope.hinge.max_speed_rad_s": 2.0,
    "envelope.hinge.max_torque_nm": 3.0,
}


def settled_rss(pids: list[int], quiet_s: float = 5.0, timeout_s: float = 180.0) -> list[float]:
    """Each process's resident MB once no one changed by more than 1 MB for `quiet_s`."""
    last, since, deadline = None, time.monotonic(), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = [psutil.Process(p).memory_info().rss / 2**20 for p in pids]
        if last is None or max(abs(a - b) for a, b in zip(now, last)) > 1.0:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return now
        time.sleep(0.5)
    return last


def run(tree: Path, folder: Path) -> tuple[list[float], list[float]]:
    os.environ["PYTHONPATH"] = str(tree)
    namespace = f"b{abs(hash(str(tree))) % 1000}"
    recorder = NodeProcess(
        "tape_recorder",
        "tape_recorder",
        {**RECORDER, "output_dir": str(folder / "bags")},
        folder / "logs",
        namespace=namespace,
    )
    estimator = NodeProcess("online_estimator", "online_estimator", {}, folder / "logs", namespace=namespace)
    client = RosClient("bench_feedback_bounds", namespace=f"/{namespace}")
    try:
        for node in ("tape_recorder", "online_estimator"):
            for transition in ("configure", "activate"):
                client.change_state(node, transition)
        publisher = client.publisher(JointState, "joint_states", 10)
        client.wait_for_subscribers(publisher, 2)
        before = settled_rss([recorder.pid, estimator.pid])
        for m in range(MESSAGES):  # each with names of its own (a cache of name lists would keep every one)
            publisher.publish(JointState(name=[f"j{m}_{k}" for k in range(NAMES)], position=[0.0] * NAMES))
        after = settled_rss([recorder.pid, estimator.pid])
        return before, after
    finally:
        client.close()
        recorder.stop()
        estimator.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, default=None, help="another source tree to measure alongside")
    args = parser.parse_args()
    isolate_ros_environment()
    here = Path(__file__).resolve().parents[1]
    trees = [("this tree", here)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"{MESSAGES} JointState messages of {NAMES} names each; resident MB before -> after (growth)")
    with tempfile.TemporaryDirectory() as tmp:
        for label, tree in trees:
            before, after = run(tree, Path(tmp) / label.replace(" ", "_"))
            cells = [
                f"{node} {b:.0f} -> {a:.0f} ({a - b:+.0f})"
                for node, b, a in zip(("tape_recorder", "online_estimator"), before, after)
            ]
            print(f"  {label:<10} ({tree}): {'; '.join(cells)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
