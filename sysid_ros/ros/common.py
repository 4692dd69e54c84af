"""What every sysid_ros node shares: start-up and shutdown, QoS, diagnostics, paths, envelopes."""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future

from ..core.bags import offered_qos
from .guards import guard_node
from .parameters import Spec

# Joint states at up to 1 kHz: reliable, and a second of history so a busy reader catches up, not drops.
SENSOR_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
COMMAND_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
RELIABILITY = {"reliable": ReliabilityPolicy.RELIABLE, "best_effort": ReliabilityPolicy.BEST_EFFORT}


def sensor_qos(reliability: str) -> QoSProfile:
    """SENSOR_QOS with `reliability` ("reliable" or "best_effort"); ValueError for anything else."""
    if reliability not in RELIABILITY:
        raise ValueError(f"reliability must be one of {sorted(RELIABILITY)}, not {reliability!r}")
    return QoSProfile(depth=SENSOR_QOS.depth, reliability=RELIABILITY[reliability], history=SENSOR_QOS.history)


def publishers_reliability(node: Node, topic: str) -> str | None:
    """The reliability a subscriber needs to hear every publisher of `topic`: "best_effort" when any offers
    only best effort (a reliable subscriber never connects to it), "reliable" otherwise; None without publishers."""
    offered = [info.qos_profile.reliability for info in node.get_publishers_info_by_topic(topic)]
    if not offered:
        return None
    return "best_effort" if ReliabilityPolicy.BEST_EFFORT in offered else "reliable"


STARTING_REFUSALS = ("no fresh feedback", "has not answered yet")
"""Refusals a recorder gives only until it has heard from the robot (its feedback, its controller manager):
logged at INFO, since callers ask again while the robot comes up."""


def offered_profiles(node: Node, topic: str) -> list:
    """The QoS profiles the publishers of `topic` offer, as a bag's `offered_qos_profiles` records them."""
    return [
        offered_qos(q.reliability.name.lower(), q.durability.name.lower(), q.depth, q.history.name.lower())
        for q in (info.qos_profile for info in node.get_publishers_info_by_topic(topic))
    ]


# The one absolute topic: every robot's nodes report to the fleet's /diagnostics (statuses name the robot).
DIAGNOSTICS = "/diagnostics"

LEVELS = {
    "ok": DiagnosticStatus.OK,
    "warn": DiagnosticStatus.WARN,
    "error": DiagnosticStatus.ERROR,
    "stale": DiagnosticStatus.STALE,
}


def run(make_node: Callable[[], Node] | Sequence[Callable[[], Node]], args: list[str] | None = None) -> None:
    """Spin one node, or several composed in one process, each on a single-threaded executor of its own (it
    keeps up with 1 kHz topics; the multi-threaded one does not); the first node spins on this thread, the
    others on threads of their own, so a node's blocking callback (a manager asking another's state) never
    stalls the rest."""
    rclpy.init(args=args if args is not None else sys.argv)
    nodes: list[Node] = []
    executors: list[SingleThreadedExecutor] = []
    try:
        for make in [make_node] if callable(make_node) else make_node:
            nodes.append(guard_node(make()))  # no request takes the process down (`guards.py`)
            executors.append(SingleThreadedExecutor())
            executors[-1].add_node(nodes[-1])
        for executor in executors[1:]:
            threading.Thread(target=_spin_quietly, args=(executor,), daemon=True).start()
        executors[0].spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        if rclpy.ok():  # a real failure; a callback cut short by shutdown (SIGINT/SIGTERM) is not one
            raise
    finally:
        for executor in executors[1:]:
            executor.shutdown(timeout_sec=1.0)
        for node in reversed(nodes):
            node.destroy_node()
        rclpy.try_shutdown()


def _spin_quietly(executor: SingleThreadedExecutor) -> None:
    try:
        executor.spin()
    except Exception:  # shut down under it; a real failure in the process shows on the main thread's node
        if rclpy.ok():
            raise


def ticker(node: Node, period_s: float) -> Callable[[], Future]:
    """A function giving a Future that completes at the node's next tick (every `period_s`, steady clock): what
    an action's async execute callback awaits between feedbacks, so a single-threaded executor never blocks."""
    waiting: list[Future] = []

    def tick() -> None:
        while waiting:
            waiting.pop().set_result(None)

    def wait() -> Future:
        future = Future()
        waiting.append(future)
        return future

    node.create_timer(period_s, tick, clock=Clock(clock_type=ClockType.STEADY_TIME))
    return wait


def end_goal(goal_handle: Any, result: Any) -> Any:
    """Close an action goal as what was accepted says: canceled when the action accepted a cancel (whatever the
    job did after it), else succeeded or aborted by `result.success`. A job stopped by another route (a `~/cancel`
    service, a deactivation) is aborted with its result's message: `canceled()` from EXECUTING is an invalid
    transition, which rclpy turned into a traceback and an empty aborted result."""
    if goal_handle.is_cancel_requested:
        goal_handle.canceled()
    elif result.success:
        goal_handle.succeed()
    else:
        goal_handle.abort()
    return result


ENVELOPE_FIELDS = ("origin_rad", "travel_rad", "max_speed_rad_s", "max_torque_nm", "max_accel_rad_s2")


def read_envelopes(node: Node, joints: list[str]) -> dict:
    """Each joint's Envelope from its parameters; ValueError naming any that are not set."""
    from ..core.tapes import envelopes_from_parameters

    flat = {
        name: node.get_parameter(name).value
        for joint in joints
        for name in (f"envelope.{joint}.{field}" for field in ENVELOPE_FIELDS)
    }
    missing = sorted(n for n, v in flat.items() if isinstance(v, float) and math.isnan(v))
    if missing:
        raise ValueError(f"envelope parameters not set: {missing}")
    return envelopes_from_parameters(joints, flat)


def ros_home() -> Path:
    """`$ROS_HOME`, or `~/.ros` as ROS 2 defaults it."""
    return Path(os.environ.get("ROS_HOME") or "~/.ros").expanduser()


def node_path(node: Node, value: str) -> Path:
    """A path parameter as the node uses it: absolute as given; relative (like a relative ROS name) in the node's
    namespace under `$ROS_HOME/sysid_ros/<namespace>/`, never the working directory two robots would share."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    return ros_home() / "sysid_ros" / node.get_namespace().strip("/") / path


ROBOT = Spec(
    "robot",
    "",
    "robot this node serves, named in every /diagnostics status (empty: the node's namespace, or 'robot' at the root)",
    read_only=True,
)


def robot_name(node: Node) -> str:
    """The robot a node serves: its `robot` parameter, else its namespace's last part, else 'robot'."""
    named = node.get_parameter("robot").value if node.has_parameter("robot") else ""
    return named or node.get_namespace().rstrip("/").rsplit("/", 1)[-1] or "robot"


def diagnostic(node: Node, level: str, message: str, values: dict[str, Any] | None = None) -> DiagnosticStatus:
    """A DiagnosticStatus for this node: name = the node's full name, hardware_id and value `robot` = its robot.

    `/diagnostics` is global (one aggregator for the fleet), so every status says which robot it is about.
    """
    robot = robot_name(node)
    status = DiagnosticStatus(
        level=LEVELS[level], name=node.get_fully_qualified_name(), message=message, hardware_id=robot
    )
    status.values = [KeyValue(key=str(k), value=str(v)) for k, v in {"robot": robot, **(values or {})}.items()]
    return status


def publish_diagnostics(node: Node, publisher: Any, *statuses: DiagnosticStatus) -> None:
    array = DiagnosticArray()
    array.header.stamp = node.get_clock().now().to_msg()
    array.status = list(statuses)
    publisher.publish(array)
