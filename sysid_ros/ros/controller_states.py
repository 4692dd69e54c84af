"""What ros2_control's controller manager says about its controllers, for a node that is about to command one.

A configured-but-inactive controller already subscribes to its command topic, so subscribers prove nothing.
`ControllerStates` asks `<controller_manager>/list_controllers` twice a second (answers arrive on the node's
own executor: a service callback never waits for another service) and `refusal(name)` says why a play must not
start: the controller is not active, not loaded, commands other interfaces than the play's (effort where the
play sends positions: `interface_refusal`), or the manager stopped answering. When no controller manager
answers at all (a robot without ros2_control), that is said once and nothing is refused for it.
"""

from __future__ import annotations

import time

from controller_manager_msgs.srv import ListControllers
from rclpy.clock import Clock
from rclpy.node import Node

PERIOD_S = 0.5
FRESH_S = 2.0  # an answer older than this (the manager stopped answering) refuses a play


class ControllerStates:
    """The controllers' states as `<manager>/list_controllers` last listed them (manager "": not asked)."""

    def __init__(self, node: Node, manager: str, clock: Clock) -> None:
        self.node = node
        self.service = node.resolve_topic_name(f"{manager}/list_controllers") if manager else ""
        self.states: dict[str, str] = {}
        self.interfaces: dict[str, list[str]] = {}  # controller -> the command interfaces it claims or requires
        self.answered_at = -1.0
        self._said = False
        self._pending = None
        self._client = node.create_client(ListControllers, self.service) if manager else None
        self._timer = node.create_timer(PERIOD_S, self._ask, clock=clock) if manager else None

    def _ask(self) -> None:
        if self._pending is not None and not self._pending.done():
            return
        if not self._client.service_is_ready():
            if not self._said and self.answered_at < 0:
                self._said = True
                self.node.get_logger().info(
                    f"no controller manager answers {self.service}: a controller is taken "
                    f"as ready when it subscribes to its command topic"
                )
            return
        self._pending = self._client.call_async(ListControllers.Request())
        self._pending.add_done_callback(self._listed)

    def _listed(self, future) -> None:
        response = future.result()
        if response is not None:
            self.states = {c.name: c.state for c in response.controller}
            self.interfaces = {
                c.name: list(dict.fromkeys([*c.claimed_interfaces, *c.required_command_interfaces]))
                for c in response.controller
            }
            self.answered_at = time.monotonic()

    def waiting(self) -> bool:
        """A controller manager is on the graph and has not answered yet."""
        return self._client is not None and self.answered_at < 0 and self._client.service_is_ready()

    def refusal(self, controller: str, commands: list[str] | None = None) -> str:
        """Why `controller` (its name, or a name whose last part is it) must not be commanded now, or ''; with
        `commands` (`<joint>/<interface>` a play sends through it), also when the controller commands others."""
        if self._client is None:
            return ""
        if self.answered_at < 0:  # a manager on the graph that has not answered yet, or none (said once)
            return f"{self.service} has not answered yet" if self.waiting() else ""
        age = time.monotonic() - self.answered_at
        if age > FRESH_S:
            return f"{self.service} has not answered for {age:.1f} s: the controller's state is unknown"
        name = controller.rstrip("/").rsplit("/", 1)[-1]
        state = self.states.get(name)
        if state is None:
            return (
                f"controller {name} is not loaded in {self.service.rsplit('/', 1)[0]} (it lists "
                f"{sorted(self.states) or 'none'})"
            )
        if state != "active":
            return f"controller {name} is {state} in {self.service.rsplit('/', 1)[0]}: activate it first"
        return interface_refusal(name, self.interfaces.get(name, []), commands or [])

    def close(self) -> None:
        if self._timer is not None:
            self.node.destroy_timer(self._timer)
            self.node.destroy_client(self._client)
        self._timer = self._client = None


def interface_refusal(controller: str, listed: list[str], commands: list[str]) -> str:
    """Why commands for the `<joint>/<interface>`s `commands` must not go to a controller whose command interfaces
    are `listed`, or '' (nothing listed, as by a manager that does not say: nothing is refused)."""
    missing = [c for c in commands if c not in listed]
    if not listed or not missing:
        return ""
    joints = {c.split("/", 1)[0] for c in commands}
    mine = [i for i in listed if i.split("/", 1)[0] in joints]
    if not mine:
        return f"controller {controller} commands {', '.join(listed)}: none of the joints {sorted(joints)}"
    theirs = "/".join(sorted({i.split("/", 1)[-1] for i in mine}))
    ours = "/".join(sorted({c.split("/", 1)[1] for c in commands}))
    return (
        f"controller {controller} commands {', '.join(mine)} but forward_interface is {ours} (the play would "
        f"send {', '.join(missing)}): set forward_interface: {theirs}, or name a {ours} controller"
    )
