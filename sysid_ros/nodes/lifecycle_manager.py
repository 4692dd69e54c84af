"""`lifecycle_manager`: brings one robot's nodes up and down in dependency order, and watches them.

`node_names` lists the robot's nodes in dependency order (relative names resolve in the manager's
namespace: sim_robot, tape_recorder, servo_tuner, ...). Bring-up takes each in turn to active (configure,
then activate, before the next one starts), so a node that needs another at configure finds it up; a node
without lifecycle services, listed in `plain_nodes` too (sim_robot, a controller), is waited for (its
parameter services answer) and counts as active while it is on the graph.
Bring-down deactivates, then cleans up, in reverse order. The first failed transition stops the sequence
and is reported (response, log, /diagnostics) naming the node, the transition and the state it is left in.

- `autostart` (bool): bring the nodes up as soon as the manager starts;
- `~/manage` (std_srvs/SetBool): data true brings them up, false brings them down; answered when done;
- `~/is_active` (std_srvs/Trigger): success when every managed node is active, the states in the message;
- heartbeat: every `heartbeat_period_s` each node's state is asked for (`get_state`, answered within two
  periods) and published on /diagnostics (the robot named); a node that left active, or stopped answering
  (died), after bring-up is an error status and, with `on_failure: bring_down` (default), nav2's reaction: the
  others are deactivated, then cleaned up, in reverse order (a node gone is not waited for), so nothing keeps
  working on top of a failed one (a servo_tuner busy tuning cancels and restores its gains as it deactivates).

This is our own small manager: nav2's lifecycle_manager and its bond messages cannot be installed here; the
heartbeat's `get_state` poll stands in for the bond.
"""

from __future__ import annotations

import threading
import time

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_srvs.srv import SetBool, Trigger

from ..ros.client import RosClient
from ..ros.common import DIAGNOSTICS, ROBOT, diagnostic, publish_diagnostics, run
from ..ros.parameters import ParameterTable, Spec

UP = (("configure", "inactive"), ("activate", "active"))
DOWN = (("deactivate", "inactive"), ("cleanup", "unconfigured"))
PLAIN = "running"  # the state of a node without lifecycle services, while it is on the graph

PARAMETERS = tuple(
    Spec(*row, read_only=True)
    for row in (
        (
            "node_names",
            Parameter.Type.STRING_ARRAY,
            "the nodes to manage, in dependency order (relative: in our namespace)",
        ),
        (
            "plain_nodes",
            Parameter.Type.STRING_ARRAY,
            "those of node_names without lifecycle services: waited for, not transitioned",
        ),
        ("autostart", False, "bring the nodes up when the manager starts"),
        ("transition_timeout_s", 60.0, "how long a node may take to appear or to answer a transition", 0.1, 3600.0),
        ("heartbeat_period_s", 1.0, "how often each node's state is checked", 0.01, 60.0),
        (
            "on_failure",
            "bring_down",
            "when a managed node leaves active or stops answering: bring_down (the others, "
            "in reverse order, as nav2's manager does) or report (only say so)",
            None,
            None,
            ("bring_down", "report"),
        ),
    )
) + (ROBOT,)


class LifecycleManagerNode(Node):
    """Ordered configure/activate/deactivate/cleanup of a robot's nodes, a `~/manage` service and a heartbeat."""

    def __init__(self, **kwargs) -> None:
        super().__init__("lifecycle_manager", **kwargs)
        self.parameters = ParameterTable(self, PARAMETERS)
        p = self.parameters.value
        self.node_names, self.plain = list(p("node_names")), set(p("plain_nodes"))
        if self.plain - set(self.node_names):
            self.get_logger().error(
                f"plain_nodes {sorted(self.plain - set(self.node_names))} are not in node_names "
                f"{self.node_names}: ignored"
            )
            self.plain &= set(self.node_names)
        self.autostart, self.timeout_s, self.on_failure = p("autostart"), p("transition_timeout_s"), p("on_failure")
        period = p("heartbeat_period_s")
        self.heartbeat_timeout_s = 2.0 * period  # a node that does not answer within it is 'not answering'
        try:
            self.parameters.check()
            self.refusal = ""
        except ValueError as exc:  # stay up and say why; nothing is managed
            self.refusal = f"not managing: {exc}"
            self.get_logger().error(self.refusal)
        self.diag_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS, 10)
        self._client = RosClient(f"{self.get_name()}_client", self.get_namespace())
        self._lock = threading.Lock()  # one sequence at a time; the heartbeat waits for it
        self.states: dict[str, str] = {name: "unknown" for name in self.node_names}
        self.managed = False  # True after a complete bring-up, until a bring-down starts
        self.bring_up_s = float("nan")
        self.create_service(SetBool, "~/manage", self._on_manage)
        self.create_service(Trigger, "~/is_active", self._on_is_active)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(period, self._heartbeat, clock=steady)
        if self.autostart:  # once the executor spins (a one-shot timer), off its thread: transitions are calls
            self._start_timer = self.create_timer(0.01, self._autostart, clock=steady)

    def _autostart(self) -> None:
        self.destroy_timer(self._start_timer)
        threading.Thread(target=self._bring_up_guarded, daemon=True).start()

    def _bring_up_guarded(self) -> None:
        try:
            self.bring_up()
        except Exception as exc:  # shut down under it: nothing left to report to
            if self.context.ok():
                self._failed(f"bring-up stopped: {exc}")

    # --- sequences ----------------------------------------------------------------------------------
    def bring_up(self) -> tuple[bool, str]:
        if self.refusal:
            return self._failed(self.refusal)
        with self._lock:
            start = time.monotonic()
            for name in self.node_names:
                why = self._wait_for(name) or self._walk(name, UP)
                if why:
                    return self._failed(why)
            self.managed, self.bring_up_s = True, time.monotonic() - start
        message = f"active: {', '.join(self.node_names)} in {self.bring_up_s:.2f} s"
        self.get_logger().info(message)
        publish_diagnostics(self, self.diag_pub, diagnostic(self, "ok", message, self._values()))
        return True, message

    def bring_down(self, skip: frozenset[str] = frozenset(), failure: str = "") -> tuple[bool, str]:
        """Deactivate all, then clean up all, in reverse order (`skip`: nodes gone, not waited for); after a
        `failure` the outcome is reported as an error naming it."""
        with self._lock:
            self.managed = False
            for steps in ((DOWN[0],), (DOWN[1],)):
                for name in reversed(self.node_names):
                    why = "" if name in skip else self._walk(name, steps)
                    if why:
                        return self._failed(f"{failure}; bringing the others down failed: {why}" if failure else why)
        message = f"brought down: {', '.join(n for n in reversed(self.node_names) if n not in skip)}"
        if failure:
            return self._failed(f"{failure}: {message} in reverse order")
        publish_diagnostics(self, self.diag_pub, diagnostic(self, "ok", message, self._values()))
        return True, message

    def _failed(self, why: str) -> tuple[bool, str]:
        self.get_logger().error(why)
        publish_diagnostics(self, self.diag_pub, diagnostic(self, "error", why, self._values()))
        return False, why

    def _wait_for(self, name: str) -> str:
        """'' once `name` answers (its lifecycle services; a plain node's parameter services), else why not."""
        from lifecycle_msgs.srv import GetState
        from rcl_interfaces.srv import GetParameters

        kind, service = (GetParameters, "get_parameters") if name in self.plain else (GetState, "get_state")
        probe = self._client.node.create_client(kind, f"{name}/{service}")
        try:
            if not probe.wait_for_service(timeout_sec=self.timeout_s):
                self.states[name] = "missing"
                return f"{self._client.resolve(name)} did not appear within {self.timeout_s:.0f} s"
        finally:
            self._client.node.destroy_client(probe)
        if name in self.plain:
            self.states[name] = PLAIN
        return ""

    def _walk(self, name: str, steps: tuple[tuple[str, str], ...]) -> str:
        """Take a lifecycle node through `steps` (transition, state it leads to), skipping those already done."""
        if name in self.plain:
            return ""
        for transition, goal in steps:
            state = self._state(name)
            if (
                state == goal
                or (transition == "configure" and state == "active")
                or (transition == "deactivate" and state in ("unconfigured", "finalized"))
                or (transition == "cleanup" and state == "finalized")
            ):
                continue
            try:
                ok, state = self._client.change_state(name, transition, self.timeout_s)
            except TimeoutError as exc:
                ok, state = False, f"no answer ({exc})"
            self.states[name] = state
            if not ok:
                return f"{self._client.resolve(name)} failed to {transition} (left {state}); see its log"
        return ""

    def _state(self, name: str, timeout_s: float | None = None) -> str:
        if name in self.plain:
            present = name in self._present()
            state = PLAIN if present else "missing"
        else:
            try:
                state = self._client.lifecycle_state(name, timeout_s or self.timeout_s)
            except TimeoutError:
                state = "not answering"
        self.states[name] = state
        return state

    def _present(self) -> set[str]:
        """Our namespace's nodes on the graph: by name, or (a plain node) by its parameter service. DDS announces
        the two apart: a node's services can answer (bring-up waits for them) before its name is on the graph,
        and a stack was once brought down 0.1 s after coming up, its sim_robot \"missing\" in that gap."""
        ours = self.get_namespace().rstrip("/")
        node = self._client.node
        names = {n for n, ns in node.get_node_names_and_namespaces() if ns.rstrip("/") == ours}
        services = {name for name, _ in node.get_service_names_and_types()}
        return names | {n for n in self.plain if f"{ours}/{n}/get_parameters" in services}

    # --- services and heartbeat ---------------------------------------------------------------------
    def _on_manage(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        response.success, response.message = self.bring_up() if request.data else self.bring_down()
        return response

    def is_active(self) -> bool:
        return bool(self.node_names) and all(self.states[n] in ("active", PLAIN) for n in self.node_names)

    def _on_is_active(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success = self.is_active()
        response.message = ", ".join(f"{n}: {self.states[n]}" for n in self.node_names)
        return response

    def _values(self) -> dict[str, str]:
        return {"managed": str(self.managed), **{f"state.{n}": self.states[n] for n in self.node_names}}

    def _heartbeat(self) -> None:
        if not self.managed or not self._lock.acquire(blocking=False):
            return
        try:  # state queries go through the client's own executor: a quick call, then the result
            for name in self.node_names:
                self._state(name, self.heartbeat_timeout_s)
        finally:
            self._lock.release()
        lost = [n for n in self.node_names if self.states[n] not in ("active", PLAIN)]
        level, message = (
            ("error", f"not active: {', '.join(f'{n} ({self.states[n]})' for n in lost)}")
            if lost
            else ("ok", "all active")
        )
        publish_diagnostics(self, self.diag_pub, diagnostic(self, level, message, self._values()))
        if lost and self.on_failure == "bring_down" and self.managed:
            self.managed = False  # one reaction per failure; off the executor thread, as transitions are calls
            threading.Thread(target=self._react, args=(message,), daemon=True).start()

    def _react(self, failure: str) -> None:
        """A managed node failed: bring the others down safely, in reverse order (nav2's reset), and say so."""
        gone = frozenset(n for n in self.node_names if self.states[n] in ("missing", "not answering"))
        try:
            self.bring_down(gone, failure)
        except Exception as exc:  # shut down under it: nothing left to report to
            if self.context.ok():
                self._failed(f"{failure}; bringing the others down stopped: {exc}")

    def destroy_node(self) -> None:
        self._client.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run(LifecycleManagerNode, args)


if __name__ == "__main__":
    main()
