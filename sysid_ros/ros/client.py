"""A client of other nodes, for tests, the demo and the command-line tool.

`RosClient` holds one node spun by a background executor (a service call then costs ~1 ms, against
~10 ms with spin_until_future_complete), collects messages, publishes, and calls services with one
shared timeout rule. Every wait is on a condition with a timeout, never a fixed delay.
Node, service and topic names resolve as a ROS user expects: relative to the client's namespace (a robot's,
`RosClient(namespace="/r1")` or `--ros-args -r __ns:=/r1`), absolute when they start with `/`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import rclpy
from rcl_interfaces.srv import GetParameters, SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

from .common import STARTING_REFUSALS

# A collector's reader: DDS keeps up to 10 s of a 1 kHz topic while this process's Python is busy (a garbage
# collection, a loaded host) instead of the publisher's 1 s, so the callback still appends every message. A
# stalled collector at depth 1000 lost 1500 joint states in one gap; depth costs no memory until it fills.
COLLECT_QOS = QoSProfile(depth=10_000, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
TIMEOUT_S = 30.0
RESEND_S = 5.0  # a query with no response by then is sent again (see RosClient.call)
TRANSITION_GOALS = {
    "configure": "inactive",
    "activate": "active",
    "deactivate": "inactive",
    "cleanup": "unconfigured",
    "shutdown": "finalized",
}  # the state each transition ends in


def wait_for(predicate: Callable[[], Any], timeout_s: float = TIMEOUT_S, what: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")


def send_goal(action: Any, goal: Any, timeout_s: float = 60.0) -> tuple[Any, list[tuple[float, Any]]]:
    """Send `goal` on an `rclpy.action.ActionClient` and wait for the server's answer: (the goal handle, a list
    that fills with (monotonic time, feedback) as feedback arrives)."""
    feedback: list[tuple[float, Any]] = []
    sent = action.send_goal_async(goal, feedback_callback=lambda m: feedback.append((time.monotonic(), m.feedback)))
    return wait_for(lambda: sent.result() if sent.done() else None, timeout_s, "the goal to be answered"), feedback


class RosClient:
    """A node of our own in a private context, spun in a background thread."""

    def __init__(self, name: str = "sysid_ros_client", namespace: str = "", ros_args: list[str] | None = None) -> None:
        """`ros_args`: remaps for this client (`-r __ns:=/r1`, `-r joint_states:=...`); never the process's own
        `--ros-args` implicitly (a `__node:=` remap meant for another node would rename us too)."""
        self.context = rclpy.Context()
        rclpy.init(context=self.context, args=["sysid_ros", "--ros-args", *ros_args] if ros_args else [])
        self.node = Node(name, namespace=namespace or None, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self._lock = threading.Lock()
        self._clients: dict[tuple[type, str], Any] = {}

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except Exception:  # shutdown while spinning
            pass

    def collect(self, msg_type: type, topic: str, qos: Any = COLLECT_QOS) -> list:
        """Subscribe and return the list the messages are appended to."""
        received: list = []
        self.node.create_subscription(msg_type, topic, received.append, qos)
        return received

    def publisher(self, msg_type: type, topic: str, depth: int = 10):
        return self.node.create_publisher(msg_type, topic, depth)

    def wait_for_subscribers(self, publisher, count: int = 1) -> None:
        wait_for(lambda: publisher.get_subscription_count() >= count, what=f"a subscriber on {publisher.topic_name}")

    def call(
        self, srv_type: type, name: str, request: Any, timeout_s: float = TIMEOUT_S, resend_s: float | None = None
    ) -> Any:
        """Call a service and wait for its response. `resend_s`, for requests safe to repeat (queries): send the
        request again every `resend_s` while no response came, since DDS can drop the response to a request
        sent before the server has matched this client's response reader (a fresh client, a loaded machine)."""
        client = self._client(srv_type, name)
        if not client.wait_for_service(timeout_sec=timeout_s):
            raise TimeoutError(f"service {name} not available after {timeout_s} s")
        deadline = time.monotonic() + timeout_s
        futures = [client.call_async(request)]
        while True:
            attempt = min(resend_s or timeout_s, deadline - time.monotonic())
            try:
                done = wait_for(
                    lambda: next((f for f in futures if f.done()), None), max(attempt, 0.0), f"a response from {name}"
                )
                return done.result()
            except TimeoutError:
                if resend_s is None or time.monotonic() >= deadline:
                    raise TimeoutError(f"timed out after {timeout_s} s waiting for a response from {name}") from None
                futures.append(client.call_async(request))

    def _client(self, srv_type: type, name: str) -> Any:
        """One service client per name for this client's life: a fresh client's first request is the one whose
        response DDS can drop (the server has not matched its response reader yet), so none is made twice."""
        with self._lock:
            key = (srv_type, name)
            if key not in self._clients:
                self._clients[key] = self.node.create_client(srv_type, name)
            return self._clients[key]

    def resolve(self, name: str) -> str:
        """A node, topic or service name as this client resolves it (namespace and remaps applied)."""
        return self.node.resolve_topic_name(name)

    def set_parameters(self, node_name: str, values: dict[str, Any], timeout_s: float = TIMEOUT_S) -> list:
        request = SetParameters.Request(
            parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]
        )
        return list(self.call(SetParameters, f"{node_name}/set_parameters", request, timeout_s).results)

    def set_parameters_atomically(self, node_name: str, values: dict[str, Any], timeout_s: float = TIMEOUT_S):
        """All or nothing: the node's `SetParametersResult` for the whole batch."""
        from rcl_interfaces.srv import SetParametersAtomically

        request = SetParametersAtomically.Request(
            parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]
        )
        return self.call(SetParametersAtomically, f"{node_name}/set_parameters_atomically", request, timeout_s).result

    def get_parameters(self, node_name: str, names: list[str], timeout_s: float = TIMEOUT_S) -> list[Any]:
        """Values of `names` on the node (None for a parameter it does not have)."""
        response = self.call(
            GetParameters,
            f"{node_name}/get_parameters",
            GetParameters.Request(names=names),
            timeout_s,
            resend_s=RESEND_S,
        )
        return [Parameter.from_parameter_msg(_named(n, v)).value for n, v in zip(names, response.values)]

    def parameter_types(
        self, node_name: str, prefixes: list[str], timeout_s: float = TIMEOUT_S
    ) -> dict[str, tuple[str, bool]]:
        """{name: (type, read_only)} of the parameters under `prefixes` (list_parameters + describe_parameters)."""
        from rcl_interfaces.msg import ParameterType
        from rcl_interfaces.srv import DescribeParameters, ListParameters

        listed = self.call(
            ListParameters,
            f"{node_name}/list_parameters",
            ListParameters.Request(prefixes=prefixes, depth=0),
            timeout_s,
            RESEND_S,
        ).result.names
        if not listed:
            return {}
        described = self.call(
            DescribeParameters,
            f"{node_name}/describe_parameters",
            DescribeParameters.Request(names=list(listed)),
            timeout_s,
            RESEND_S,
        ).descriptors
        kinds = {
            getattr(ParameterType, k): k[len("PARAMETER_") :].lower()
            for k in dir(ParameterType)
            if k.startswith("PARAMETER_") and isinstance(getattr(ParameterType, k), int)
        }
        return {d.name: (kinds.get(d.type, str(d.type)), bool(d.read_only)) for d in described}

    def change_state(self, node_name: str, transition: str, timeout_s: float = TIMEOUT_S) -> tuple[bool, str]:
        """Request a lifecycle transition by label (an invalid numeric id kills a Jazzy node; a label does not).

        Returns (success, the node's state afterwards).
        """
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        request = ChangeState.Request(transition=Transition(label=transition))
        deadline = time.monotonic() + timeout_s
        while True:
            try:  # a transition is not a query: sent again only when the node is seen not to have made it
                success = bool(
                    self.call(
                        ChangeState,
                        f"{node_name}/change_state",
                        request,
                        min(RESEND_S, max(deadline - time.monotonic(), 0.0)),
                    ).success
                )
                break
            except TimeoutError:
                state = self.lifecycle_state(node_name, max(deadline - time.monotonic(), 1.0))
                while state.endswith("ing") and time.monotonic() < deadline:  # configuring, activating, ...
                    time.sleep(0.1)
                    state = self.lifecycle_state(node_name, max(deadline - time.monotonic(), 1.0))
                if state == TRANSITION_GOALS.get(transition):
                    return True, state  # made; only its response was lost
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"timed out after {timeout_s} s waiting for {node_name} to {transition}"
                    ) from None
        return success, self.lifecycle_state(node_name, timeout_s)

    def lifecycle_state(self, node_name: str, timeout_s: float = TIMEOUT_S) -> str:
        """The node's lifecycle state label (`unconfigured`, `inactive`, `active`, `finalized`)."""
        from lifecycle_msgs.srv import GetState

        return self.call(
            GetState, f"{node_name}/get_state", GetState.Request(), timeout_s, RESEND_S
        ).current_state.label

    def close(self) -> None:
        """Stop spinning and leave the graph; quietly when a signal (Ctrl-C) already shut the context down."""
        self.executor.shutdown()
        if self.context.ok():
            self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        self._thread.join(5.0)


def ros_arguments(namespace: str = "", ros_args: list[str] | None = None) -> list[str]:
    """The `--ros-args` rules for a command's own node: the user's rules first (rcl applies the first rule that
    matches, so they win), then those of `--namespace`."""
    from .processes import namespace_args

    return [*(ros_args or []), *namespace_args(namespace or "")]


def ros_client(name: str, args: Any) -> RosClient:
    """A client for a command that talks to nodes, placed by its `--namespace` and `--ros-args`."""
    return RosClient(name, ros_args=ros_arguments(getattr(args, "namespace", ""), getattr(args, "ros_args", [])))


def _named(name: str, value: Any):
    from rcl_interfaces.msg import Parameter as ParameterMsg

    return ParameterMsg(name=name, value=value)


def stamp_ns(msg: Any) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def status_value(status: Any, key: str, default: str = "") -> str:
    """One key of a DiagnosticStatus's values."""
    return next((kv.value for kv in status.values if kv.key == key), default)


def request_play(client: RosClient, recorder: str = "tape_recorder") -> Any:
    """Ask a tape_recorder to play (std_srvs/Trigger), again only while it has not yet heard from the robot (its
    feedback, its controller manager)."""
    from std_srvs.srv import Trigger

    return wait_for(
        lambda: (lambda r: None if any(s in r.message for s in STARTING_REFUSALS) else r)(
            client.call(Trigger, f"{recorder}/play", Trigger.Request())
        ),
        what=f"{recorder} to hear the robot",
    )


def play_tape(
    client: RosClient,
    diagnostics: list,
    recorder: str = "tape_recorder",
    timeout_s: float = 300.0,
    cancel: threading.Event | None = None,
) -> Any:
    """Have a tape_recorder play its configured tape and wait for the end; the final DiagnosticStatus.

    `diagnostics` is the list `client.collect(DiagnosticArray, "/diagnostics")` fills; a refused play
    raises RuntimeError with the recorder's reason. Once `cancel` is set the recorder is asked to cancel
    (it holds at once and closes the bag with the reason); the `aborted` status is still waited for.
    """
    from std_srvs.srv import Trigger

    seen = len(diagnostics)
    response = request_play(client, recorder)
    if not response.success:
        raise RuntimeError(response.message)
    asked: list = []

    def ended() -> Any:
        if cancel is not None and cancel.is_set() and not asked:
            asked.append(client.call(Trigger, f"{recorder}/cancel", Trigger.Request()))
        return play_ended(client, diagnostics[seen:], recorder)

    return wait_for(ended, timeout_s, f"{recorder} to finish")


def play_ended(client: RosClient, diagnostics: list, recorder: str = "tape_recorder") -> Any:
    """The recorder's `finished`/`aborted` status among `diagnostics` (its name resolved in the client's namespace)."""
    name = client.resolve(recorder)
    return next(
        (
            s
            for array in diagnostics
            for s in array.status
            if s.name == name and s.message.startswith(("finished", "aborted"))
        ),
        None,
    )
