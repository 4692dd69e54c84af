"""`online_estimator`: follows a joint's parameters (a payload, friction drift) or a whole arm's payload from
live joint states.

Lifecycle: configure builds the estimator from parameters (FAILURE: an invalid setting); activate starts
following `/joint_states` (position and measured effort of `joint`, or of every joint of the arm `model`),
feeding the core every `hop_s` of robot time (every `detect_hop_s` with the residual detector on);
deactivate stops. Outputs (layouts in docs/online_estimator.md):
- `~/estimate` (diagnostic_msgs/DiagnosticArray): one status, key/values `<param>.value|confidence|weight`;
  level OK when every parameter is confident, WARN otherwise;
- `~/estimate_array` (std_msgs/Float64MultiArray): [values..., confidence..., weight...];
- `~/events` (std_msgs/String): each event as YAML (`type:` ChangeDetected, ParameterChange,
  ExcitationRequest, ExcitationRecovered, InputPaused, InputResumed, and its fields);
- while the core's input guard has paused estimation (stale effort, a position jump, dead input), `~/estimate`
  is WARN with the reason and nothing else is published (values held);
- the parameters `estimate.<param>` mirror the current values (read-only from outside);
- with an arm model: `~/payload` (geometry_msgs/InertiaStamped, transient local: a late subscriber gets the
  last one) carries the accepted payload (mass, centre of mass, inertia about it; frame = the body), and the
  read-only parameters `payload.mass_kg|com_m|confidence|last_change_s` mirror it; it is republished after
  each settled change and when the estimate wanders more than `payload_hysteresis` from the published one.
With `request_excitation` (off by default: on a real robot a person decides), a persistent low confidence
calls `/<recorder>/play` so the tape recorder plays an excitation tape.
"""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped
from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension, String
from std_srvs.srv import Trigger

from ..core.errors import SysidRosError
from ..core.online import (
    FIRST_MOMENTS,
    ChangeDetected,
    ExcitationRequest,
    InputPaused,
    OnlineEstimator,
    ParameterChange,
    PayloadWindowModel,
    event_record,
    last_link,
    load_model,
    payload_config,
    payload_inertia,
    pendulum_config,
)
from ..core.signals import JointSamples
from ..ros.common import ROBOT, diagnostic, run
from ..ros.feedback import FeedbackDecoder, MatchedSubscription
from ..ros.parameters import ParameterTable, Spec, lifecycle_configured

PAYLOAD_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)

PARAMETERS = (
    Spec("joint", "hinge", "the joint to follow"),
    Spec(
        "model",
        "pendulum",
        "the window model: pendulum (mass, damping, friction of a mass on a rod), or an arm's "
        "MJCF file without its payload (a whole-arm payload estimate)",
    ),
    Spec("body", "", "arm model: the body the payload is on (empty: the last link)"),
    Spec("inertia", True, "arm model: estimate the payload's inertia too (else mass and first moments)"),
    Spec(
        "payload_hysteresis",
        0.02,
        "arm model: republish the payload when it moves more than this share",
        0.0,
        10.0,
        live=True,
    ),
    Spec("length_m", 0.5, "pendulum: distance from the axis to the mass", 1e-6, 100.0),
    Spec("rotor_inertia_kg_m2", 1e-4, "pendulum: known rotor inertia", 0.0, 1e3),
    Spec("horizon_s", 2.0, "the horizon: the sliding window each fit sees (robot time)", 0.01, 3600.0),
    Spec("hop_s", 0.25, "a fit every hop", 0.001, 3600.0),
    Spec("feedback_topic", "joint_states", "sensor_msgs/JointState with position and effort (in the namespace)"),
    Spec(
        "feedback_reliability",
        "auto",
        "auto: match the feedback publishers (best_effort when one offers only that)",
        choices=("auto", "reliable", "best_effort"),
    ),
    Spec("request_excitation", False, "ask the recorder for an excitation tape when confidence stays low", live=True),
    Spec("recorder", "tape_recorder", "the tape_recorder node to ask"),
    ROBOT,
)


class OnlineEstimatorNode(LifecycleNode):
    """Feeds live joint states to `OnlineEstimator` and publishes its estimate and events."""

    def __init__(self, **kwargs) -> None:
        super().__init__("online_estimator", **kwargs)
        self.parameters = ParameterTable(
            self, PARAMETERS, lifecycle_configured(self), renamed={"window_s": "horizon_s"}
        )
        self._estimator: OnlineEstimator | None = None
        self._buffer: list[tuple[int, list[float], list[float]]] = []
        self._published: tuple[float, np.ndarray] | None = None
        self._last_change_s = math.nan
        self._decoder = FeedbackDecoder()
        self._mirroring = False
        self._sub = None
        self.add_on_set_parameters_callback(self._guard_mirror)

    # --- lifecycle ----------------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        value = self.parameters.value
        try:
            self.parameters.check()
            timing = {"horizon_s": float(value("horizon_s")), "hop_s": float(value("hop_s"))}
            if value("model") == "pendulum":
                config = pendulum_config(
                    value("joint"), float(value("length_m")), float(value("rotor_inertia_kg_m2")), **timing
                )
            else:
                model = load_model(value("model"))
                config = payload_config(
                    model, value("body") or last_link(model), inertia=bool(value("inertia")), **timing
                )
            if not float(value("payload_hysteresis")) >= 0:
                raise ValueError("payload_hysteresis must be >= 0")
            self._estimator = OnlineEstimator(config)
        except (SysidRosError, ValueError) as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        self._mirroring = True
        try:
            for name in config.model.names:
                if not self.has_parameter(f"estimate.{name}"):
                    self.parameters.add(
                        [Spec(f"estimate.{name}", math.nan, f"current estimate of {name} (read-only)", live=True)]
                    )
            if self._arm and not self.has_parameter("payload.mass_kg"):
                self.parameters.add(
                    [
                        Spec(*row, live=True)
                        for row in (
                            ("payload.mass_kg", math.nan, "the accepted payload's mass (read-only)"),
                            ("payload.com_m", [math.nan] * 3, "its centre of mass in the body frame (read-only)"),
                            ("payload.confidence", 0.0, "the mass's confidence when accepted (read-only)"),
                            ("payload.last_change_s", math.nan, "robot time of the last change (read-only)"),
                        )
                    ]
                )
        finally:
            self._mirroring = False
        self._payload_pub = self.create_lifecycle_publisher(InertiaStamped, "~/payload", PAYLOAD_QOS)
        self._estimate_pub = self.create_lifecycle_publisher(DiagnosticArray, "~/estimate", 10)
        self._array_pub = self.create_lifecycle_publisher(Float64MultiArray, "~/estimate_array", 10)
        self._event_pub = self.create_lifecycle_publisher(String, "~/events", 50)
        self._play = self.create_client(Trigger, f"{value('recorder')}/play")
        self._sub = MatchedSubscription(
            self, JointState, value("feedback_topic"), self._on_feedback, value("feedback_reliability"), raw=True
        )
        self._heard = False
        self._rematch = self.create_timer(1.0, self._match_feedback)
        self.get_logger().info(f"configured: following {config.joint} ({', '.join(config.model.names)})")
        return TransitionCallbackReturn.SUCCESS

    def _match_feedback(self) -> None:
        """While nothing is heard, look again at the publishers: one that came later may need best effort."""
        if not self._heard:
            self._sub.match()
        self._heard = False

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._sub is not None:
            self._sub.destroy()
            self.destroy_timer(self._rematch)
            self._sub = None
        self._estimator, self._buffer, self._published = None, [], None
        return TransitionCallbackReturn.SUCCESS

    @property
    def _arm(self) -> bool:
        return self._estimator is not None and isinstance(self._estimator.config.model, PayloadWindowModel)

    # --- feeding ------------------------------------------------------------------------------------
    def _on_feedback(self, data: bytes) -> None:
        self._heard = True
        if self._estimator is None or self._state_machine.current_state[1] != "active":
            return
        decoded = self._decoder.decode(data)
        if decoded is None:  # over the size bound: dropped, said once per second at most
            self.get_logger().warning(self._decoder.dropped_message(), throttle_duration_sec=1.0)
            return
        stamp, names, position, _, effort = decoded
        config = self._estimator.config
        if not all(j in names for j in config.joints):
            return
        k = [names.index(j) for j in config.joints]
        if max(k) >= len(position) or max(k) >= len(effort) or (self._buffer and stamp <= self._buffer[-1][0]):
            return  # no effort on this message, or a duplicate / backwards stamp
        self._buffer.append((stamp, [float(position[i]) for i in k], [float(effort[i]) for i in k]))
        feed_s = config.detect_hop_s if config.detect_window_s > 0 else config.hop_s
        if stamp - self._buffer[0][0] >= feed_s * 1e9:
            self._feed()

    def _feed(self) -> None:
        rows, self._buffer = self._buffer, []
        t = np.array([r[0] for r in rows], dtype=np.int64)
        samples = JointSamples(
            self._estimator.config.joints,
            t,
            np.array([r[1] for r in rows]),
            None,
            np.array([r[2] for r in rows]),
            source=self.get_parameter("feedback_topic").value,
        )
        try:
            events = self._estimator.update(samples)
        except SysidRosError as exc:
            self.get_logger().warn(f"samples skipped: {exc}")
            return
        for event in events:
            self._event_pub.publish(String(data=yaml.safe_dump(event_record(event), sort_keys=False)))
            self.get_logger().info(f"{type(event).__name__}: {asdict(event)}")
            if isinstance(event, InputPaused):
                self.get_logger().warning(f"input paused: {event.reason}")
            if isinstance(event, (ChangeDetected, ParameterChange)):
                self._last_change_s = event.time_ns * 1e-9
            if isinstance(event, ExcitationRequest) and self.get_parameter("request_excitation").value:
                if self._play.service_is_ready():
                    self._play.call_async(Trigger.Request())
        self._publish_estimate()
        if self._estimator.paused is not None:
            return  # stale or implausible input: nothing new to publish
        if self._arm:
            self._publish_payload(any(isinstance(e, ParameterChange) for e in events))

    def _publish_estimate(self) -> None:
        estimate = self._estimator.estimate
        confident = all(c >= self._estimator.config.confidence_threshold for c in estimate.confidence)
        paused = self._estimator.paused
        message = f"paused: {paused.reason}" if paused else "confident" if confident else "low confidence"
        status = diagnostic(self, "ok" if confident and not paused else "warn", message, dict(estimate.as_key_values()))
        array = DiagnosticArray(status=[status])
        array.header.stamp.sec, array.header.stamp.nanosec = divmod(estimate.time_ns, 1_000_000_000)
        self._estimate_pub.publish(array)
        if paused:
            return
        layout = Float64MultiArray(data=estimate.as_array().tolist())
        layout.layout.dim = [
            MultiArrayDimension(label="field", size=3, stride=3 * len(estimate.names)),
            MultiArrayDimension(label="parameter", size=len(estimate.names), stride=len(estimate.names)),
        ]
        self._array_pub.publish(layout)
        self._mirroring = True
        try:
            self.set_parameters(
                [Parameter(f"estimate.{n}", value=float(v)) for n, v in zip(estimate.names, estimate.values)]
            )
        finally:
            self._mirroring = False

    def _publish_payload(self, changed: bool) -> None:
        """The accepted payload (not while a change settles), when first known, after a settled change, or
        when it moved more than `payload_hysteresis` (of its mass, of its first moment) from the last one."""
        estimator = self._estimator
        estimate = estimator.estimate
        values = dict(zip(estimate.names, estimate.values))
        if not set(FIRST_MOMENTS) <= set(values) or set(FIRST_MOMENTS) & set(estimator.provisional):
            return  # a message needs the mass and the centre, each pinned by a confident window
        mass, first = values["mass_kg"], np.array([values["mx_kg_m"], values["my_kg_m"], values["mz_kg_m"]])
        if estimator.settling or not (math.isfinite(mass) and np.all(np.isfinite(first))):
            return
        if self._published is not None and not changed:
            h = float(self.get_parameter("payload_hysteresis").value)
            floors = dict(zip(estimate.names, estimator.config.model.floors()))
            m0, f0 = self._published
            if abs(mass - m0) <= h * max(abs(m0), floors["mass_kg"]) and np.linalg.norm(first - f0) <= h * max(
                float(np.linalg.norm(f0)), floors["mz_kg_m"]
            ):
                return
        self._published = (mass, first)
        com, inertia = payload_inertia(values)
        msg = InertiaStamped()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(estimate.time_ns, 1_000_000_000)
        msg.header.frame_id = estimator.config.model.body
        msg.inertia.m = float(mass)
        msg.inertia.com.x, msg.inertia.com.y, msg.inertia.com.z = (float(c) for c in com)
        (msg.inertia.ixx, msg.inertia.ixy, msg.inertia.ixz, msg.inertia.iyy, msg.inertia.iyz, msg.inertia.izz) = (
            float(inertia[i, j]) for i, j in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))
        )
        self._payload_pub.publish(msg)
        confidence = estimate.confidence[estimate.names.index("mass_kg")]
        self._mirroring = True
        try:
            self.set_parameters(
                [
                    Parameter("payload.mass_kg", value=float(mass)),
                    Parameter("payload.com_m", value=[float(c) for c in com]),
                    Parameter("payload.confidence", value=float(confidence)),
                    Parameter("payload.last_change_s", value=float(self._last_change_s)),
                ]
            )
        finally:
            self._mirroring = False
        self.get_logger().info(f"payload: {mass:.4g} kg at {np.round(com, 4).tolist()} m (confidence {confidence:.2f})")

    def _guard_mirror(self, params: list[Parameter]) -> SetParametersResult:
        """The `estimate.*` parameters only mirror the estimate: nobody else sets them."""
        if not self._mirroring and any(p.name.startswith(("estimate.", "payload.")) for p in params):
            return SetParametersResult(
                successful=False, reason="estimate.* and payload.* mirror the estimator (read-only)"
            )
        return SetParametersResult(successful=True)


def main(args: list[str] | None = None) -> None:
    run(OnlineEstimatorNode, args)


if __name__ == "__main__":
    main()
