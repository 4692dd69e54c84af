"""`sysid-ros call SERVICE`: a std_srvs/Trigger service called, as `ros2 service call SERVICE std_srvs/srv/Trigger`
does where a ROS 2 install has the `ros2` command (the venv has none)."""

from __future__ import annotations

import argparse

from ..core.errors import SysidRosError


def call(args: argparse.Namespace) -> int:
    """Call the Trigger service; print its message; 0 when it answered success, 1 when not."""
    from std_srvs.srv import Trigger

    from ..ros.client import ros_client

    client = ros_client("sysid_ros_call", args)
    try:
        try:
            response = client.call(Trigger, args.service, Trigger.Request(), args.timeout)
        except TimeoutError:
            raise SysidRosError(
                f"no service {client.resolve(args.service)} answered within {args.timeout:g} s"
            ) from None
        print(f"success: {str(response.success).lower()}, message: {response.message}")
        return 0 if response.success else 1
    finally:
        client.close()


def add_command(commands: argparse._SubParsersAction, ros_options: argparse.ArgumentParser) -> None:
    sub = commands.add_parser(
        "call",
        parents=[ros_options],
        help="call a std_srvs/Trigger service (~/cancel, ~/play, lifecycle_manager/is_active)",
    )
    sub.add_argument("service", help="the service's name (relative: in --namespace)")
    sub.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the service's answer")
    sub.set_defaults(run=call)
