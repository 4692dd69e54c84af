"""No request takes a node's process down: `guard_node`, applied by `common.run` to every node it starts.

- A lifecycle `change_state` request for a transition the current state does not have (configure on an active
  node, activate on an unconfigured one, an internal id such as 10): rclpy's handler raises (RCLError, "invalid
  transition") inside the service callback, which ends the executor and the process (by numeric id; by label
  it answers false). rclcpp answers `success: false`; so do ours, with a warning naming the state and transition.
- Any other exception escaping a service callback is logged with its traceback and answered with the type's
  default response (`success: false` and the error as `message` where the type has them).
- An action server's goal callback that raises rejects the goal; its cancel callback that raises refuses the
  cancel. (rclpy already catches what an execute callback raises and aborts the goal.)
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.executors import await_or_execute
from rclpy.lifecycle import LifecycleNode
from rclpy.node import Node


def guard_node(node: Node) -> Node:
    """Guard every service and action callback of `node` (see the module); the node."""
    if isinstance(node, LifecycleNode) and getattr(node, "_service_change_state", None) is not None:
        service = node._service_change_state
        service.callback = _checked_change_state(node, service.callback)
    for service in node.services:
        service.callback = _never_raising(node, service.srv_name, service.srv_type, service.callback)
    for waitable in node.waitables:
        if isinstance(waitable, ActionServer):
            _guard_action(node, waitable)
    return node


def available_transitions(node: LifecycleNode) -> dict[int, str]:
    """The transitions the node's current state has: id -> label."""
    return {t[0]: t[1] for t in node._state_machine.available_transitions}


def _checked_change_state(node: LifecycleNode, handler: Callable) -> Callable:
    def on_change_state(request: Any, response: Any) -> Any:
        if not request.transition.label:  # by label rclpy itself answers false for a transition not available
            available = available_transitions(node)
            if request.transition.id not in available:
                state = node._state_machine.current_state[1]
                node.get_logger().warning(
                    f"transition {request.transition.id} refused: state {state} has only "
                    f"{', '.join(f'{k} ({v})' for k, v in sorted(available.items())) or 'none'}"
                )
                response.success = False
                return response
        return handler(request, response)

    return on_change_state


def _never_raising(node: Node, name: str, srv_type: Any, handler: Callable) -> Callable:
    async def on_request(request: Any, response: Any) -> Any:  # async: the handler may be either
        try:
            return await await_or_execute(handler, request, response)
        except Exception as exc:
            node.get_logger().error(
                f"service {name} failed on a request ({type(exc).__name__}: {exc}); answered "
                f"as a failure\n{traceback.format_exc()}"
            )
            failed = srv_type.Response()
            if hasattr(failed, "success"):
                failed.success = False
            if hasattr(failed, "message"):
                failed.message = f"{type(exc).__name__}: {exc}"
            return failed

    return on_request


def _guard_action(node: Node, server: ActionServer) -> None:
    goal_callback, cancel_callback = server._goal_callback, server._cancel_callback

    async def on_goal(goal: Any) -> Any:
        try:
            return await await_or_execute(goal_callback, goal)
        except Exception as exc:
            node.get_logger().error(
                f"action goal callback failed ({type(exc).__name__}: {exc}); goal rejected\n{traceback.format_exc()}"
            )
            return GoalResponse.REJECT

    async def on_cancel(goal_handle: Any) -> Any:
        try:
            return await await_or_execute(cancel_callback, goal_handle)
        except Exception as exc:
            node.get_logger().error(
                f"action cancel callback failed ({type(exc).__name__}: {exc}); cancel refused\n{traceback.format_exc()}"
            )
            return CancelResponse.REJECT

    server._goal_callback, server._cancel_callback = on_goal, on_cancel
