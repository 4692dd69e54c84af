"""Helpers for tests that talk to real nodes in other processes over DDS.

Nodes run as `python -m sysid_ros.nodes.<name>` with a `ros__parameters` file; the test process holds one
probe node spun by a background executor. Every wait is on a condition with a generous timeout, never a
fixed delay, and every process started is stopped by its pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rclpy
import yaml
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rcl_interfaces.srv import SetParameters, GetParameters

from sysid_ros.nodes.common import SENSOR_QOS

TIMEOUT_S = 30.0


def wait_for(predicate: Callable[[], Any], timeout_s: float = TIMEOUT_S, what: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


class NodeProcess:
    """A node in its own process, started from a parameter dict; stopped by pid."""

    def __init__(self, module: str, name: str, params: dict[str, Any], tmp_path: Path,
                 extra_args: list[str] | None = None) -> None:
        self.name = name
        params_file = tmp_path / f"{name}_params.yaml"
        params_file.write_text(yaml.safe_dump({name: {"ros__parameters": params}}))
        self.log_path = tmp_path / f"{name}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "--ros-args", "-r", f"__node:={name}", "--params-file",
             str(params_file), *(extra_args or [])],
            stdout=self._log, stderr=subprocess.STDOUT, env=os.environ.copy())

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def stop(self, sig: int = signal.SIGINT, timeout_s: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout_s)
        self._log.close()
        return self.proc.returncode


class Probe:
    """The test's own node: collects messages, publishes, calls services; spun in a background thread."""

    def __init__(self, name: str = "probe") -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self._lock = threading.Lock()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except Exception:  # shutdown while spinning
            pass

    def collect(self, msg_type: type, topic: str, qos: Any = SENSOR_QOS) -> list:
        """Subscribe and return the list the messages are appended to."""
        received: list = []
        self.node.create_subscription(msg_type, topic, received.append, qos)
        return received

    def publisher(self, msg_type: type, topic: str, depth: int = 10):
        return self.node.create_publisher(msg_type, topic, depth)

    def wait_for_subscribers(self, publisher, count: int = 1) -> None:
        wait_for(lambda: publisher.get_subscription_count() >= count, what=f"a subscriber on {publisher.topic_name}")

    def call(self, srv_type: type, name: str, request: Any, timeout_s: float = TIMEOUT_S) -> Any:
        client = self.node.create_client(srv_type, name)
        try:
            if not client.wait_for_service(timeout_sec=timeout_s):
                raise AssertionError(f"service {name} not available after {timeout_s} s")
            future = client.call_async(request)
            wait_for(future.done, timeout_s, f"a response from {name}")
            return future.result()
        finally:
            self.node.destroy_client(client)

    def set_parameters(self, node_name: str, values: dict[str, Any]) -> list:
        request = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()])
        return list(self.call(SetParameters, f"/{node_name}/set_parameters", request).results)

    def get_parameters(self, node_name: str, names: list[str]) -> list[Any]:
        response = self.call(GetParameters, f"/{node_name}/get_parameters", GetParameters.Request(names=names))
        return [Parameter.from_parameter_msg(_named(n, v)).value for n, v in zip(names, response.values)]

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)
        self._thread.join(5.0)


def _named(name: str, value: Any):
    from rcl_interfaces.msg import Parameter as ParameterMsg

    return ParameterMsg(name=name, value=value)


def stamp_ns(msg: Any) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
