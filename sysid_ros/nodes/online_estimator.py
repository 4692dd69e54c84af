"""`online_estimator`: follows a joint's parameters (a payload, friction drift) from live joint states.

Lifecycle: configure builds the estimator from parameters (FAILURE: an invalid setting); activate starts
following `/joint_states` (position and measured effort of `joint`), feeding the core every `hop_s` of
robot time; deactivate stops. Outputs (layouts in docs/online_estimator.md):
- `~/estimate` (diagnostic_msgs/DiagnosticArray): one status, key/values `<param>.value|confidence|weight`;
  level OK when every parameter is confident, WARN otherwise;
- `~/estimate_array` (std_msgs/Float64MultiArray): [values..., confidence..., weight...];
- `~/events` (std_msgs/String): each event as YAML (`type:` ChangeDetected, ParameterChange,
  ExcitationRequest, ExcitationRecovered, and its fields);
- the parameters `estimate.<param>` mirror the current values (read-only from outside).
With `request_excitation` (off by default: on a real robot a person decides), a persistent low confidence
calls `/<recorder>/play` so the tape recorder plays an excitation tape.
"""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension, String
from std_srvs.srv import Trigger

from ..core.bags.fastcdr import decode_cdr, names_from_key
from ..core.errors import SysidRosError
from ..core.online import OnlineEstimator
from ..core.online.config import pendulum_config
from ..core.online.reports import ExcitationRequest
from ..core.signals import JointSamples
from .common import SENSOR_QOS, declare, declare_robot, diagnostic, run


class OnlineEstimatorNode(LifecycleNode):
    """Feeds live joint states to `OnlineEstimator` and publishes its estimate and events."""

    def __init__(self, **kwargs) -> None:
        super().__init__("online_estimator", **kwargs)
        d = lambda name, default, text: declare(self, name, default, text)  # noqa: E731
        d("joint", "hinge", "the joint to follow")
        d("model", "pendulum", "the window model: pendulum (mass, damping, friction of a mass on a rod)")
        d("length_m", 0.5, "pendulum: distance from the axis to the mass")
        d("rotor_inertia_kg_m2", 1e-4, "pendulum: known rotor inertia")
        d("window_s", 2.0, "sliding window (robot time)")
        d("hop_s", 0.25, "a fit every hop")
        d("feedback_topic", "joint_states", "sensor_msgs/JointState with position and effort (in the namespace)")
        d("request_excitation", False, "ask the recorder for an excitation tape when confidence stays low")
        d("recorder", "tape_recorder", "the tape_recorder node to ask")
        declare_robot(self)
        self._estimator: OnlineEstimator | None = None
        self._buffer: list[tuple[int, float, float]] = []
        self._names: dict[object, list[str]] = {}
        self._mirroring = False
        self._sub = None
        self.add_on_set_parameters_callback(self._guard_mirror)

    # --- lifecycle ----------------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        value = lambda name: self.get_parameter(name).value  # noqa: E731
        try:
            if value("model") != "pendulum":
                raise ValueError(f"model {value('model')!r} is not supported here yet (pendulum)")
            config = pendulum_config(value("joint"), float(value("length_m")), float(value("rotor_inertia_kg_m2")),
                                     window_s=float(value("window_s")), hop_s=float(value("hop_s")))
            self._estimator = OnlineEstimator(config)
        except (SysidRosError, ValueError) as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        self._mirroring = True
        try:
            for name in config.model.names:
                if not self.has_parameter(f"estimate.{name}"):
                    declare(self, f"estimate.{name}", math.nan, f"current estimate of {name} (read-only)")
        finally:
            self._mirroring = False
        self._estimate_pub = self.create_lifecycle_publisher(DiagnosticArray, "~/estimate", 10)
        self._array_pub = self.create_lifecycle_publisher(Float64MultiArray, "~/estimate_array", 10)
        self._event_pub = self.create_lifecycle_publisher(String, "~/events", 50)
        self._play = self.create_client(Trigger, f"{value('recorder')}/play")
        self._sub = self.create_subscription(JointState, value("feedback_topic"), self._on_feedback, SENSOR_QOS,
                                             raw=True)
        self.get_logger().info(f"configured: following {config.joint} ({', '.join(config.model.names)})")
        return TransitionCallbackReturn.SUCCESS

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._sub is not None:
            self.destroy_subscription(self._sub)
            self._sub = None
        self._estimator, self._buffer = None, []
        return TransitionCallbackReturn.SUCCESS

    # --- feeding ------------------------------------------------------------------------------------
    def _on_feedback(self, data: bytes) -> None:
        if self._estimator is None or self._state_machine.current_state[1] != "active":
            return
        try:
            stamp, key, position, _, effort = decode_cdr(data)
        except (ValueError, IndexError):
            return  # not a JointState this decoder knows (big-endian): skipped, counted nowhere
        names = self._names.get(key) or self._names.setdefault(key, names_from_key(key))
        joint = self._estimator.config.joint
        if joint not in names:
            return
        k = names.index(joint)
        if k >= len(position) or k >= len(effort) or (self._buffer and stamp <= self._buffer[-1][0]):
            return  # no effort on this message, or a duplicate / backwards stamp
        self._buffer.append((stamp, float(position[k]), float(effort[k])))
        if stamp - self._buffer[0][0] >= self._estimator.config.hop_s * 1e9:
            self._feed()

    def _feed(self) -> None:
        rows, self._buffer = self._buffer, []
        t = np.array([r[0] for r in rows], dtype=np.int64)
        joint = self._estimator.config.joint
        samples = JointSamples((joint,), t, np.array([[r[1]] for r in rows]), None, np.array([[r[2]] for r in rows]),
                               source=self.get_parameter("feedback_topic").value)
        try:
            events = self._estimator.update(samples)
        except SysidRosError as exc:
            self.get_logger().warn(f"samples skipped: {exc}")
            return
        for event in events:
            self._event_pub.publish(String(data=yaml.safe_dump({"type": type(event).__name__, **asdict(event)},
                                                               sort_keys=False)))
            self.get_logger().info(f"{type(event).__name__}: {asdict(event)}")
            if isinstance(event, ExcitationRequest) and self.get_parameter("request_excitation").value:
                if self._play.service_is_ready():
                    self._play.call_async(Trigger.Request())
        self._publish_estimate()

    def _publish_estimate(self) -> None:
        estimate = self._estimator.estimate
        confident = all(c >= self._estimator.config.confidence_threshold for c in estimate.confidence)
        status = diagnostic(self, "ok" if confident else "warn", "confident" if confident else "low confidence",
                            dict(estimate.as_key_values()))
        array = DiagnosticArray(status=[status])
        array.header.stamp.sec, array.header.stamp.nanosec = divmod(estimate.time_ns, 1_000_000_000)
        self._estimate_pub.publish(array)
        layout = Float64MultiArray(data=estimate.as_array().tolist())
        layout.layout.dim = [MultiArrayDimension(label="field", size=3, stride=3 * len(estimate.names)),
                             MultiArrayDimension(label="parameter", size=len(estimate.names),
                                                 stride=len(estimate.names))]
        self._array_pub.publish(layout)
        self._mirroring = True
        try:
            self.set_parameters([Parameter(f"estimate.{n}", value=float(v))
                                 for n, v in zip(estimate.names, estimate.values)])
        finally:
            self._mirroring = False

    def _guard_mirror(self, params: list[Parameter]) -> SetParametersResult:
        """The `estimate.*` parameters only mirror the estimate: nobody else sets them."""
        if not self._mirroring and any(p.name.startswith("estimate.") for p in params):
            return SetParametersResult(successful=False, reason="estimate.* mirror the estimator (read-only)")
        return SetParametersResult(successful=True)


def main(args: list[str] | None = None) -> None:
    run(OnlineEstimatorNode, args)


if __name__ == "__main__":
    main()
