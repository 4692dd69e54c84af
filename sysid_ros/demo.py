"""The main job on the embedded simulated robot: `make demo` (or `python -m sysid_ros.demo`).

Starts `sim_robot` (the 3-link arm, simulated time, faster than real time) in its own process on a DDS
domain of its own, drives a trajectory through the joint trajectory controller, and prints what the
robot reported. Later stages (record -> identify -> tune -> propose) join here as they land.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from builtin_interfaces.msg import Duration
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from .core.params import load_ros_parameters
from .core.paths import config_dir
from .nodes.client import RosClient, stamp_ns, wait_for
from .nodes.processes import NodeProcess, isolate_ros_environment

WAYPOINTS = [  # (time from start in s, shoulder, elbow, wrist) in rad
    (1.5, 0.5, -0.8, 0.4), (3.0, -0.3, 0.6, -0.5), (4.5, 0.2, -0.2, 0.8), (6.0, 0.0, 0.0, 0.0)]


def _sim_parameters(real_time_factor: float) -> dict:
    params = load_ros_parameters(config_dir() / "sim_robot_arm3.yaml", "sim_robot")
    return {**params, "use_sim_time": True, "real_time_factor": real_time_factor}


def drive_trajectory(client: RosClient, joints: list[str]) -> list[JointState]:
    """Send the demo trajectory and return the joint states from its start until 1 s after its end."""
    received = client.collect(JointState, "/joint_states")
    goal_pub = client.publisher(JointTrajectory, "/joint_trajectory_controller/joint_trajectory")
    client.wait_for_subscribers(goal_pub)
    wait_for(lambda: received, what="joint states from sim_robot")
    goal = JointTrajectory(joint_names=joints)
    for t, *q in WAYPOINTS:
        goal.points.append(JointTrajectoryPoint(positions=q, velocities=[0.0] * len(q),
                                                time_from_start=Duration(sec=int(t), nanosec=int(t % 1 * 1e9))))
    start = stamp_ns(received[-1])
    goal_pub.publish(goal)
    end = start + int((WAYPOINTS[-1][0] + 1.0) * 1e9)
    wait_for(lambda: stamp_ns(received[-1]) > end, timeout_s=120.0, what="the trajectory to finish")
    return [m for m in received if start <= stamp_ns(m) <= end]


def report(states: list[JointState]) -> str:
    names = list(states[0].name)
    t = np.array([stamp_ns(m) for m in states]) * 1e-9
    q = np.array([m.position for m in states])
    v = np.array([m.velocity for m in states])
    tau = np.array([m.effort for m in states])
    lines = [f"{len(states)} joint states over {t[-1] - t[0]:.2f} s simulated "
             f"({len(states) / (t[-1] - t[0]):.0f} Hz, every {np.median(np.diff(t)) * 1e3:.1f} ms)",
             f"{'joint':<10}{'final q (rad)':>15}{'target':>10}{'error (mrad)':>14}{'peak |qd|':>11}{'torque range (N m)':>22}"]
    target = WAYPOINTS[-1][1:]
    for j, name in enumerate(names):
        lines.append(f"{name:<10}{q[-1, j]:>15.4f}{target[j]:>10.3f}{(q[-1, j] - target[j]) * 1e3:>14.2f}"
                     f"{np.abs(v[:, j]).max():>11.2f}{tau[:, j].min():>11.2f} .. {tau[:, j].max():<8.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real-time-factor", type=float, default=4.0)
    parser.add_argument("--out", type=Path, default=None, help="folder for logs (default: a temporary one)")
    args = parser.parse_args(argv)
    domain = isolate_ros_environment()
    folder = args.out or Path(tempfile.mkdtemp(prefix="sysid_ros_demo_"))
    print(f"sysid_ros demo: sim_robot (arm3) on ROS_DOMAIN_ID={domain}, logs in {folder}")
    sim = NodeProcess("sim_robot", "sim_robot", _sim_parameters(args.real_time_factor), folder)
    client = RosClient("sysid_ros_demo")
    try:
        states = drive_trajectory(client, ["shoulder", "elbow", "wrist"])
        print(report(states))
    finally:
        client.close()
        sim.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
