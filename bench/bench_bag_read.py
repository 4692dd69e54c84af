"""Bag reading throughput: sysid_ros.core.bags against rosbags' own read + deserialize of the same bag.

Writes a bag of `--seconds` at `--rate-hz` with a JointState topic (`--joints` joints) and a Float64MultiArray
effort command topic, in mcap and sqlite3, then times (best of `--repeat`):
  baseline: rosbags AnyReader, every message of both topics read and deserialized (results dropped);
  ours:     read_joint_states + read_array_commands into JointSamples / JointCommands.
Prints msg/s, the ratio ours / baseline (goal <= 1.5), and the peak Python memory of our read relative to
the arrays it returns (bounded memory: no message is kept as an object).

    .venv/bin/python bench/bench_bag_read.py --seconds 20
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sysid_ros.core.bags import (
    BagWriter,
    read_array_commands,
    read_joint_states,
    typestore_for,
)

JS = "sensor_msgs/msg/JointState"
F64 = "std_msgs/msg/Float64MultiArray"
CMD = "/effort_controller/commands"


def write_bench_bag(path: Path, storage: str, seconds: float, rate_hz: float, n_joints: int) -> int:
    """A bag like a recorder writes it; returns the message count."""
    ts = typestore_for("jazzy")
    names = [f"joint_{k}" for k in range(n_joints)]
    period = int(round(1e9 / rate_hz))
    t0 = 1_700_000_000_000_000_000
    Time, Header = ts.types["builtin_interfaces/msg/Time"], ts.types["std_msgs/msg/Header"]
    JointState, Arr = ts.types[JS], ts.types[F64]
    layout = ts.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    n = int(seconds * rate_hz)
    rng = np.random.default_rng(0)
    with BagWriter(path, storage=storage, flush_period_s=1e9) as w:
        for i in range(n):
            t = t0 + i * period
            q = rng.standard_normal(n_joints)
            msg = JointState(
                header=Header(stamp=Time(sec=t // 10**9, nanosec=t % 10**9), frame_id=""),
                name=names,
                position=q,
                velocity=q * 2,
                effort=q * 3,
            )
            w.write_raw("/joint_states", JS, t, ts.serialize_cdr(msg, JS))
            w.write_raw(CMD, F64, t, ts.serialize_cdr(Arr(layout=layout, data=q * 3), F64))
    return 2 * n


def baseline(path: Path) -> int:
    from rosbags.highlevel import AnyReader

    count = 0
    with AnyReader([path]) as reader:
        conns = [c for c in reader.connections if c.topic in ("/joint_states", CMD)]
        for conn, _, raw in reader.messages(connections=conns):
            reader.deserialize(raw, conn.msgtype)
            count += 1
    return count


def ours(path: Path, names: list[str]) -> int:
    feedback = read_joint_states(path)
    commands = read_array_commands(path, CMD, joint_names=names, time_base=feedback.timing.time_base)
    return len(feedback.samples) + len(commands)


def best_of_interleaved(fns, repeat: int) -> list[float]:
    """Best time of each function, run alternately so load from other processes hits all alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate-hz", type=float, default=1000.0)
    parser.add_argument("--joints", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    names = [f"joint_{k}" for k in range(args.joints)]
    print(f"{args.seconds:g} s x {args.rate_hz:g} Hz, JointState ({args.joints} joints) + Float64MultiArray")
    with tempfile.TemporaryDirectory() as tmp:
        for storage in ("mcap", "sqlite3"):
            path = Path(tmp) / storage
            n = write_bench_bag(path, storage, args.seconds, args.rate_hz, args.joints)
            t_base, t_ours = best_of_interleaved([lambda: baseline(path), lambda: ours(path, names)], args.repeat)
            tracemalloc.start()
            feedback = read_joint_states(path)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            s = feedback.samples
            out_bytes = s.time_ns.nbytes + sum(getattr(s, f).nbytes for f in ("position", "velocity", "effort"))
            print(
                f"{storage:8s} {n} msgs  rosbags read+deserialize {t_base:.3f} s ({n / t_base:,.0f} msg/s)  "
                f"ours {t_ours:.3f} s ({n / t_ours:,.0f} msg/s)  ratio {t_ours / t_base:.2f} (goal <= 1.5)  "
                f"peak memory {peak / 1e6:.1f} MB = {peak / out_bytes:.1f}x the returned arrays"
            )


if __name__ == "__main__":
    main()
