"""`tape_recorder`: plays an excitation tape through the robot's controller, inside the envelope, into a bag.

Lifecycle: configure loads the robot interface, envelopes and tape choice from parameters (FAILURE: a
parameter is invalid or the output folder is not writable); activate arms the command publishers
(nothing can move the robot while inactive); deactivate stops any motion safely.
Services: `~/play` (std_srvs/Trigger) plays the tape named by `tape.kind`/`tape.seed` (or `tape.file`),
`~/cancel` (or `~/stop`) stops it at once: the hold goes out in the same callback and the bag is closed
with the reason. Status and progress go to `/diagnostics` and into the bag. The action `~/record`
(sysid_ros_interfaces/action/Record) plays the same tape with feedback every FEEDBACK_S (stage, tape, seconds
of motion left, fraction played), waiting up to FEEDBACK_WAIT_S for fresh feedback first; its cancel stops the
motion as `~/cancel` does (logged at INFO) and it answers with the bag.
Every feedback sample is checked against the envelope and a steady-clock watchdog checks it is fresh: a
breach or stale feedback stops the motion at once (hold position, or zero effort), records the reason
in the bag and closes the bag.

The tape runs on robot time: the stamp of the latest feedback. Commands are due as the robot's own
time advances (sent from the feedback callback, so there is one callback per sample and no `/clock`
to follow), and everything in the bag is stamped in that one time base.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from builtin_interfaces.msg import Duration
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse
from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger
from sysid_ros_interfaces.action import Record
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ..core import tapes
from ..core.bags import METADATA_TOPIC, BagWriter, offered_qos
from ..core.errors import SysidRosError
from ..core.files import flatten, load_yaml
from ..core.tapes import Envelope, Playback, SafetyMargins
from ..ros.common import (
    COMMAND_QOS,
    DIAGNOSTICS,
    ROBOT,
    STARTING_REFUSALS,
    diagnostic,
    end_goal,
    node_path,
    offered_profiles,
    publish_diagnostics,
    read_envelopes,
    run,
    ticker,
)
from ..ros.controller_states import ControllerStates
from ..ros.feedback import FeedbackDecoder, MatchedSubscription
from ..ros.parameters import ParameterTable, Spec, envelope_specs, lifecycle_configured
from ..ros.serialization import float64_array_cdr, msgtype_of, to_cdr

JOINT_STATE = "sensor_msgs/msg/JointState"
MAX_BATCH = 1000  # queued feedback samples taken in one callback
FEEDBACK_S = 1.0  # the record action's feedback period
FEEDBACK_WAIT_S = 30.0  # how long the record action waits for the robot's first fresh feedback
MODEL_START_RAD = 0.01  # how close to the envelope origins a robot must be to play a tape designed for its model
TRAJECTORY_POINTS_HZ = 100.0  # waypoint rate of a tape sent to a trajectory controller (cubic between them)

PARAMETERS = (  # and envelope.<joint>.* for each joint (parameters.envelope_specs)
    Spec(
        "joints",
        Parameter.Type.STRING_ARRAY,
        "names of the joints to move, in the controller's command order",
        read_only=True,
    ),
    Spec(
        "command_mode",
        "stream",
        "stream (Float64MultiArray at command_rate_hz) or trajectory (JointTrajectory)",
        choices=("stream", "trajectory"),
    ),
    Spec("forward_controller", "forward_command_controller", "takes <name>/commands in stream mode"),
    Spec("forward_interface", "position", "the forward controller's interface", choices=("position", "effort")),
    Spec("trajectory_controller", "joint_trajectory_controller", "takes <name>/joint_trajectory"),
    Spec(
        "controller_manager",
        "controller_manager",
        "ros2_control's controller manager, asked (list_controllers) "
        "that the command's controller is active before a play; "
        "empty: do not ask",
    ),
    Spec("command_rate_hz", 500.0, "stream rate, and the rate tapes are designed for", 1.0, 10000.0),
    Spec("feedback_topic", "joint_states", "sensor_msgs/JointState feedback (relative: in the node's namespace)"),
    Spec(
        "feedback_reliability",
        "auto",
        "auto: match the feedback publishers (best_effort when one offers only that)",
        choices=("auto", "reliable", "best_effort"),
    ),
    Spec("tape.kind", "multisine", "the tape to play", choices=tuple(tapes.KINDS), live=True),
    Spec("tape.seed", 0, "seed of seeded kinds (evaluation tapes, multisine, dither)", 0, 2**31 - 1, live=True),
    Spec(
        "tape.file", "", "a tape as YAML (Tape.to_dict), or a play {tape, feedforward}; overrides tape.kind", live=True
    ),
    Spec(
        "trajectory_lead_s",
        0.5,
        "robot seconds between sending a trajectory and its stamped start",
        0.0,
        10.0,
        live=True,
    ),
    Spec("safety.travel_margin_rad", 0.05, "feedback may pass the travel by this much before motion stops", 0.0, 1.0),
    Spec("safety.speed_margin_frac", 0.25, "and the top speed by this fraction", 0.0, 10.0),
    Spec("safety.torque_margin_frac", 0.0, "and the torque limit by this fraction", 0.0, 10.0),
    Spec("safety.stale_after_s", 0.2, "wall seconds without feedback that stop the motion", 0.001, 60.0),
    Spec(
        "output_dir",
        "bags",
        "where bags are written (one folder per play; relative: under $ROS_HOME/sysid_ros/<namespace>/)",
    ),
    Spec("storage", "mcap", "mcap (survives a crash: sysid-ros bag repair) or sqlite3", choices=("mcap", "sqlite3")),
    Spec("model", "", "robot model reference recorded with the bag (and the model tape.kind optimal is designed for)"),
    ROBOT,
)


@dataclass(frozen=True)
class RecorderConfig:
    """tape_recorder's parameters as read at configure (each checked by its `Spec` row), named as the parameters;
    the `safety.*` ones as the playback's `SafetyMargins`."""

    joints: tuple[str, ...]
    envelopes: dict[str, Envelope]
    command_mode: str
    forward_controller: str
    forward_interface: str
    trajectory_controller: str
    command_rate_hz: float
    feedback_topic: str
    output_dir: Path
    storage: str
    feedback_reliability: str
    model: str
    controller_manager: str
    margins: SafetyMargins


class TapeRecorderNode(LifecycleNode):
    """Plays tapes and records joint states, commands and its own status into rosbag2 bags."""

    def __init__(self, **kwargs) -> None:
        super().__init__("tape_recorder", **kwargs)
        self.parameters = ParameterTable(self, PARAMETERS, lifecycle_configured(self))
        self.parameters.add(envelope_specs(self.get_parameter("joints").value))
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._feedback_sub: MatchedSubscription | None = None
        self._watchdog = self._command_pub = None
        self._config: RecorderConfig | None = None
        self._playback: Playback | None = None
        self._feedforward: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._writer: BagWriter | None = None
        self._last_feedback: tuple[list[str], np.ndarray, np.ndarray, np.ndarray] | None = None
        self._decoder = FeedbackDecoder()
        self._drop_reported_ns = -(1 << 62)
        self._last_feedback_steady_ns = 0
        self._result: dict = {}
        self._last_command_ns = 0
        self._motion_start_steady_ns = 0
        self._robot_now_ns = 0
        self._status_slot = -1
        self.create_service(Trigger, "~/play", self._on_play)
        self.create_service(Trigger, "~/stop", lambda rq, rs: self._on_stop(rq, rs, "stopped by request"))
        self.create_service(Trigger, "~/cancel", lambda rq, rs: self._on_stop(rq, rs, "cancelled by request"))
        self._tick = ticker(self, 0.5)
        self._action = ActionServer(
            self, Record, "~/record", self._execute_record, cancel_callback=lambda goal: CancelResponse.ACCEPT
        )
        self.add_on_set_parameters_callback(self._check_tape_file)
        self.diag_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS, 10)

    def _check_tape_file(self, params: list[Parameter]) -> SetParametersResult:
        """Refuse a `tape.file` this node cannot read (plays come as files: the sender must share our disk)."""
        for p in params:
            if p.name == "tape.file" and p.value:
                path = Path(p.value).expanduser()
                if not path.is_file() or not os.access(path, os.R_OK):
                    return SetParametersResult(
                        successful=False,
                        reason=f"tape_recorder cannot read tape.file "
                        f"{p.value} on its host: plays are files on a disk both share",
                    )
        return SetParametersResult(successful=True)

    # --- lifecycle ----------------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._config = self._read_configuration()
        except (SysidRosError, OSError, ValueError) as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        self._config = c = replace(self._config, feedback_topic=self.resolve_topic_name(self._config.feedback_topic))
        # the topic in the namespace: as the bag names it
        self._feedback_sub = MatchedSubscription(
            self, JointState, c.feedback_topic, self._on_feedback, c.feedback_reliability, raw=True
        )
        if c.command_mode == "stream":
            self._command_topic, self._command_type = f"{c.forward_controller}/commands", Float64MultiArray
        else:
            self._command_topic = f"{c.trajectory_controller}/joint_trajectory"
            self._command_type = JointTrajectory
        self._command_pub = self.create_lifecycle_publisher(self._command_type, self._command_topic, COMMAND_QOS)
        self._command_topic = self._command_pub.topic_name  # resolved: what the bag and the checks name
        self._watchdog = self.create_timer(c.margins.stale_after_s / 4, self._check_fresh, clock=self._steady)
        self._controllers = ControllerStates(self, c.controller_manager, self._steady)
        self.get_logger().info(f"configured: joints {list(c.joints)}, {c.command_mode} to {self._command_topic}")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._status("ok", "ready")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._playback is not None:
            self._abort("deactivated while playing")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._playback is not None:
            self._abort("shut down while playing")
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def _teardown(self) -> None:
        """Undo configure: feedback subscription, watchdog and command publisher go."""
        if self._feedback_sub is not None:
            self._feedback_sub.destroy()
        if self._watchdog is not None:
            self.destroy_timer(self._watchdog)
        if self._command_pub is not None:
            self.destroy_lifecycle_publisher(self._command_pub)
            self._controllers.close()
        self._feedback_sub = self._watchdog = self._command_pub = None
        self._config = None

    def _read_configuration(self) -> RecorderConfig:
        self.parameters.check()
        value = self.parameters.value
        joints = tuple(value("joints"))
        if not joints:
            raise ValueError("parameter joints is empty: name the joints to move")
        output = node_path(self, value("output_dir"))
        output.mkdir(parents=True, exist_ok=True)
        probe = output / f".write_test_{time.monotonic_ns()}"
        probe.write_text("")  # OSError (logged as the configure failure) when the folder is not writable
        probe.unlink()
        return RecorderConfig(
            joints=joints,
            envelopes=read_envelopes(self, list(joints)),
            command_mode=value("command_mode"),
            forward_controller=value("forward_controller"),
            forward_interface=value("forward_interface"),
            trajectory_controller=value("trajectory_controller"),
            command_rate_hz=value("command_rate_hz"),
            feedback_topic=value("feedback_topic"),
            output_dir=output,
            storage=value("storage"),
            feedback_reliability=value("feedback_reliability"),
            model=value("model"),
            controller_manager=value("controller_manager"),
            margins=SafetyMargins(
                value("safety.travel_margin_rad"),
                value("safety.speed_margin_frac"),
                value("safety.torque_margin_frac"),
                value("safety.stale_after_s"),
            ),
        )

    # --- playing ------------------------------------------------------------------------------------
    def _now_ns(self) -> int:
        """Robot time: the stamp of the latest feedback (the node's clock when the robot does not stamp)."""
        return self._robot_now_ns or self.get_clock().now().nanoseconds

    def _build_tape(self, start: dict[str, float]) -> tapes.Tape:
        """The tape to play (and its host feed-forward, kept in `_feedforward`)."""
        c = self._config
        path = self.get_parameter("tape.file").value
        self._feedforward = {}
        if path:
            data = load_yaml(path, "tape file")
            if isinstance(data, dict) and "tape" in data:  # a play: the tape plus host feed-forward samples
                tape = tapes.Tape.from_dict(data["tape"])
                self._feedforward = feedforward_of(data.get("feedforward") or {}, tape)
            else:
                tape = tapes.Tape.from_dict(data)
        else:
            kind = self.get_parameter("tape.kind").value
            options = {"start": start}
            if kind in tapes.tape.EFFORT_KINDS:
                options["interface"] = c.forward_interface if c.command_mode == "stream" else "position"
            if kind in tapes.MODEL_KINDS:  # designed for the model from the envelopes' origins, so its cache (filled
                # by `sysid-ros tapes plot`) serves every play; a robot away from there is refused, not stepped
                far = sorted(j for j, p in start.items() if abs(p - c.envelopes[j].origin_rad) > MODEL_START_RAD)
                if far:
                    raise ValueError(
                        f"a {kind} tape starts at the envelope origins: move {far} there first "
                        f"(within {MODEL_START_RAD} rad)"
                    )
                options = {"model": c.model}
            tape = tapes.build(
                kind, c.envelopes, c.command_rate_hz, int(self.get_parameter("tape.seed").value), **options
            )
        if tape.interface == "effort" and (c.command_mode != "stream" or c.forward_interface != "effort"):
            raise ValueError(f"tape {tape.name} is an effort tape: it needs stream mode on an effort interface")
        if tape.interface == "position" and c.command_mode == "stream" and c.forward_interface != "position":
            raise ValueError(f"tape {tape.name} is a position tape: the forward interface is {c.forward_interface}")
        if self._feedforward and c.command_mode != "trajectory":
            raise ValueError(f"tape {tape.name} carries host feed-forward: it needs command_mode trajectory")
        unknown = [j for j in tape.joints if j not in c.joints]
        if unknown:
            raise ValueError(f"tape {tape.name} moves joints {unknown} that are not configured")
        return tape

    def _on_play(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.play()
        return response

    async def _execute_record(self, goal_handle) -> Record.Result:
        """The record action: play the configured tape, feedback every FEEDBACK_S, cancel stops the motion."""
        waited = time.monotonic()
        active = self._state_machine.current_state[1] == "active"
        while (
            active
            and not self.ready_to_play()
            and not goal_handle.is_cancel_requested
            and time.monotonic() - waited < FEEDBACK_WAIT_S
        ):
            goal_handle.publish_feedback(Record.Feedback(stage="waiting for fresh feedback", seconds_left=math.nan))
            await self._tick()
        ok, message = self.play() if not goal_handle.is_cancel_requested else (False, "cancelled before it started")
        if not ok:
            return end_goal(goal_handle, Record.Result(success=False, message=message))
        playback, sent = self._playback, -math.inf
        while self._playback is playback:
            if goal_handle.is_cancel_requested:
                self._abort("cancelled by request", requested=True)
                break
            if time.monotonic() - sent >= FEEDBACK_S:
                now = self._now_ns()
                goal_handle.publish_feedback(
                    Record.Feedback(
                        stage="playing",
                        play=playback.tape.name,
                        progress=playback.progress(now),
                        seconds_left=max(playback.end_ns - now, 0) * 1e-9,
                    )
                )
                sent = time.monotonic()
            await self._tick()
        result = self.result
        done = Record.Result(
            success=bool(result.get("completed")),
            bag=result.get("bag", ""),
            message="completed" if result.get("completed") else f"aborted: {result.get('abort_reason')}",
        )
        return end_goal(goal_handle, done)

    def destroy_node(self) -> None:
        self._action.destroy()
        super().destroy_node()

    @property
    def playing(self) -> bool:
        return self._playback is not None

    @property
    def progress(self) -> float:
        return self._playback.progress(self._now_ns()) if self._playback else 1.0

    @property
    def result(self) -> dict:
        """The last play's outcome: tape, completed, abort_reason, end_ns, bag."""
        return dict(self._result)

    def _feedback_fresh(self) -> bool:
        age_s = (self._steady.now().nanoseconds - self._last_feedback_steady_ns) * 1e-9
        return self._last_feedback is not None and age_s <= self._config.margins.stale_after_s

    def ready_to_play(self) -> bool:
        """Whether the robot's feedback arrived within the stale limit and its controller manager, if there is
        one, has listed its controllers (a play needs both)."""
        return self._feedback_fresh() and not self._controllers.waiting()

    def play(self) -> tuple[bool, str]:
        """Start the configured tape; (False, why) when it is refused before anything moves."""
        try:
            if self._state_machine.current_state[1] != "active":
                raise ValueError("not active: configure and activate tape_recorder first")
            if self._playback is not None:
                raise ValueError(f"already playing {self._playback.tape.name}")
            c = self._config
            self._drain()
            feedback = self._last_feedback
            if not self._feedback_fresh():
                raise ValueError(f"no fresh feedback on {c.feedback_topic}")
            names, position = feedback[0], feedback[1]
            missing = [j for j in c.joints if j not in names]
            if missing:
                raise ValueError(f"joints {missing} are not in {c.feedback_topic} (it has {names})")
            if self.count_subscribers(self._command_topic) == 0:
                raise ValueError(f"no controller is listening on {self._command_topic}")
            controller = c.trajectory_controller if c.command_mode == "trajectory" else c.forward_controller
            # a stream's values mean positions or torques by forward_interface: the controller must command that
            # (a trajectory carries its own meaning; any trajectory controller takes it)
            commands = [f"{j}/{c.forward_interface}" for j in c.joints] if c.command_mode == "stream" else []
            why = self._controllers.refusal(controller, commands)
            if why:
                raise ValueError(why)
            positions = dict(zip(names, position.tolist()))
            tape = self._build_tape({j: positions[j] for j in c.joints})
            self._drain()  # building took time: start the tape at the robot's time now
            # a trajectory is stamped to start a little ahead, so the controller starts it exactly then
            lead_ns = int(self.get_parameter("trajectory_lead_s").value * 1e9) if c.command_mode == "trajectory" else 0
            playback = Playback(tape, c.envelopes, c.margins, self._now_ns() + max(lead_ns, 0))
            self._open_bag(playback)
        except (SysidRosError, ValueError, OSError) as exc:
            message = f"refused: {exc}"
            starting = any(s in message for s in STARTING_REFUSALS)  # the robot not heard yet: a caller asks again
            if starting:  # rclpy refuses one call site logging at two severities (ValueError): two call sites
                self.get_logger().info(message)
            else:
                self.get_logger().error(message)
            self._status("warn" if starting else "error", message)
            return False, message
        self._playback, self._result = playback, {}
        if c.command_mode == "trajectory":
            self._send(self._trajectory(playback), playback.start_ns)
        self._last_command_ns = -(1 << 62)
        self._motion_start_steady_ns = self._steady.now().nanoseconds
        message = f"playing {tape.name} ({playback.duration_s:.1f} s) into {self._writer.path}"
        self.get_logger().info(message)
        self._status("ok", message)
        return True, message

    def _on_stop(self, request: Trigger.Request, response: Trigger.Response, reason: str) -> Trigger.Response:
        response.success = self._playback is not None
        response.message = reason if response.success else "nothing is playing"
        if response.success:
            self._abort(reason, requested=True)
        return response

    def _open_bag(self, playback: Playback) -> None:
        c = self._config
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        path = c.output_dir / f"{playback.tape.name}_{stamp}"
        suffix = 1
        while path.exists():
            path, suffix = c.output_dir / f"{playback.tape.name}_{stamp}_{suffix}", suffix + 1
        self._writer = BagWriter(path, storage=c.storage)
        self._writer.open()
        # what the publishers offer, so `ros2 bag play` of the bag offers it again (the robot's feedback
        # QoS, this recorder's command QoS; the metadata is latched for late subscribers)
        for topic in (c.feedback_topic, self._command_topic):
            self._writer.set_offered_qos(topic, offered_profiles(self, topic))
        self._writer.set_offered_qos(METADATA_TOPIC, [offered_qos(durability="transient_local", depth=1)])
        self._writer.mark_commands([self._command_topic])  # `sysid-ros bag replay-safe` renames them
        params = {name: p.value for name, p in self._parameters.items()}
        # a periodic tape (optimal): where its periods lie on the robot's clock, for `identify` to average them
        periodic = tapes.periodic_metadata(playback.tape, playback.start_ns)
        self._writer.write_metadata(
            {
                "recorder": self.get_fully_qualified_name(),
                "joint_names": list(c.joints),
                "command_joint_names": list(c.joints),
                "model": c.model,
                "command_topic": self._command_topic,
                "command_topics": [self._command_topic],
                "command_mode": c.command_mode,
                "command_interface": playback.tape.interface,
                "start_ns": playback.start_ns,
                "envelopes": {j: e.to_dict() for j, e in c.envelopes.items()},
                "tape": playback.tape.to_dict(),
                "parameters": flatten(params),
                **({} if periodic is None else {"periodic": periodic}),
            },
            playback.start_ns,
        )

    def _trajectory(self, playback: Playback) -> JointTrajectory:
        times = np.arange(0.0, playback.duration_s, 1.0 / TRAJECTORY_POINTS_HZ)[1:]
        times = np.append(times, playback.duration_s)
        position, velocity = playback.reference(times)
        joints = playback.tape.joints
        effort = None
        if self._feedforward:
            effort = np.zeros_like(position)
            for k, joint in enumerate(joints):
                if joint in self._feedforward:
                    effort[:, k] = np.interp(times, *self._feedforward[joint])
        msg = JointTrajectory(joint_names=list(joints))
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(playback.start_ns, 1_000_000_000)
        for k, (t, q, v) in enumerate(zip(times, position, velocity)):
            sec = int(t)
            msg.points.append(
                JointTrajectoryPoint(
                    positions=q.tolist(),
                    velocities=v.tolist(),
                    effort=[] if effort is None else effort[k].tolist(),
                    time_from_start=Duration(sec=sec, nanosec=int((t - sec) * 1e9)),
                )
            )
        return msg

    def _send(self, msg, stamp_ns: int) -> None:
        self._command_pub.publish(msg)
        if self._writer is not None:
            self._record(self._writer, self._command_topic, msg, stamp_ns)

    @staticmethod
    def _record(writer: BagWriter, topic: str, msg, stamp_ns: int) -> None:
        """Write one of our own messages into the bag (exact CDR; see ros/serialization.py)."""
        raw = float64_array_cdr(msg.data) if isinstance(msg, Float64MultiArray) else to_cdr(msg, writer.typestore)
        writer.write_raw(topic, msgtype_of(msg), stamp_ns, raw)

    def _advance(self, now: int) -> None:
        """Called on each feedback sample: finish, or stream the command due (decimated to command_rate_hz).

        Commands follow feedback, so a robot that stops reporting also stops being commanded (and the
        watchdog stops the play); one callback per sample keeps a single-threaded node ahead of 1 kHz.
        """
        playback = self._playback
        if playback.finished(now):
            self._finish(completed=True, reason="")
            return
        period_ns = 1e9 / self._config.command_rate_hz
        if self._config.command_mode == "stream" and now - self._last_command_ns >= 0.75 * period_ns:
            raw = float64_array_cdr(playback.command(now))  # published as bytes: no Python -> C message copy
            self._command_pub.publish(raw)
            if self._writer is not None:
                self._writer.write_raw(self._command_topic, "std_msgs/msg/Float64MultiArray", now, raw)
            self._last_command_ns = now
        if now // 100_000_000 != self._status_slot:  # progress at 10 Hz
            self._status_slot = now // 100_000_000
            self._status("ok", f"playing {playback.tape.name}", progress=f"{playback.progress(now):.3f}")

    def _stop_motion(self) -> None:
        """Hold the last measured position (position interfaces) or command zero effort, at once."""
        c, fb = self._config, self._last_feedback
        if c.command_mode == "stream" and c.forward_interface == "effort":
            msg = Float64MultiArray(data=[0.0] * len(c.joints))
        else:
            held = dict(zip(fb[0], fb[1].tolist())) if fb is not None else {}
            hold = [held.get(j, math.nan) for j in c.joints]
            if any(math.isnan(v) for v in hold):
                self.get_logger().error("no position to hold: the controller keeps its last command")
                return
            if c.command_mode == "stream":
                msg = Float64MultiArray(data=hold)
            else:
                msg = JointTrajectory(joint_names=c.joints)
                msg.points = [
                    JointTrajectoryPoint(
                        positions=hold,
                        velocities=[0.0] * len(hold),
                        time_from_start=Duration(nanosec=int(2e9 / c.command_rate_hz)),
                    )
                ]
        self._send(msg, self._now_ns())

    def _abort(self, reason: str, requested: bool = False) -> None:
        """Stop the play at once; a stop someone asked for is logged at INFO, one the guards made at ERROR."""
        if self._playback is None:
            return
        self._stop_motion()
        if requested:
            self.get_logger().info(f"motion stopped: {reason}")
        else:
            self.get_logger().error(f"motion stopped: {reason}")
        self._finish(completed=False, reason=reason)

    def _finish(self, completed: bool, reason: str) -> None:
        playback, self._playback = self._playback, None
        now = self._now_ns()
        self._result = {
            "tape": playback.tape.name,
            "completed": completed,
            "abort_reason": reason,
            "end_ns": now,
            "bag": str(self._writer.path) if self._writer else "",
        }
        level, message = ("ok", f"finished {playback.tape.name}") if completed else ("error", f"aborted: {reason}")
        writer, self._writer = self._writer, None
        status = self._status(level, message, progress=f"{playback.progress(now):.3f}", publish=False, writer=writer)
        if writer is not None:  # the bag is complete and closed before anyone hears the play ended
            writer.write_metadata({"result": self._result}, now)
            writer.close()
        publish_diagnostics(self, self.diag_pub, status)

    # --- feedback -----------------------------------------------------------------------------------
    def _on_feedback(self, data: bytes) -> None:
        """Take this sample and every one already queued behind it, then send the command due once.

        Taking the queue in one go keeps the executor's per-callback cost off each sample, and a recorder
        that fell behind catches up at once instead of streaming commands for times already past.
        """
        self._take(data)
        self._drain()
        if self._playback is not None:
            self._advance(self._now_ns())

    def _drain(self) -> None:
        """Take every feedback sample already queued, so robot time and the last position are current."""
        for _ in range(MAX_BATCH):
            handle = self._feedback_sub.subscription.handle
            with handle:
                taken = handle.take_message(JointState, True)
            if taken is None:
                break
            self._take(taken[0])

    def _take(self, data: bytes) -> None:
        """Record one feedback sample and check it against the envelope (stopping the motion on a breach)."""
        decoded = self._decoder.decode(data)
        if decoded is None:  # over the size bound: dropped, said on /diagnostics and the log once a second at most
            now = self._steady.now().nanoseconds
            if now - self._drop_reported_ns > 1_000_000_000:
                self._drop_reported_ns = now
                self.get_logger().warning(self._decoder.dropped_message())
                self._status("warn", self._decoder.dropped_message())
            return
        stamp, *sample = decoded
        self._robot_now_ns = max(self._robot_now_ns, stamp)
        if self._writer is not None:
            self._writer.write_raw(self._config.feedback_topic, JOINT_STATE, self._now_ns(), data)
        self._last_feedback, self._last_feedback_steady_ns = sample, self._steady.now().nanoseconds
        if self._playback is not None:
            reason = self._playback.check(*sample)
            if reason:
                self._abort(f"envelope breach: {reason}")

    def _check_fresh(self) -> None:
        if self._playback is None:
            stale = (self._steady.now().nanoseconds - self._last_feedback_steady_ns) * 1e-9
            if self._config.feedback_reliability == "auto" and stale > self._config.margins.stale_after_s:
                self._feedback_sub.match()  # nothing heard: a publisher that came later may need best effort
            return
        # Staleness counts from the last sample, or from the start of motion when that is later: before
        # motion began, the robot was not ours to stop (and play refused to start on stale feedback).
        since = max(self._last_feedback_steady_ns, self._motion_start_steady_ns)
        age_s = (self._steady.now().nanoseconds - since) * 1e-9
        if age_s > self._config.margins.stale_after_s:
            self._abort(f"stale feedback: nothing on {self._config.feedback_topic} for {age_s:.3f} s")

    def _status(self, level: str, message: str, publish: bool = True, writer: BagWriter | None = None, **values: str):
        """Publish a status on /diagnostics and record it in the bag being written; returns it."""
        writer = writer or self._writer
        status = diagnostic(
            self,
            level,
            message,
            {
                "state": self._state_machine.current_state[1],
                "bag": str(writer.path) if writer else "",
                **values,
                **{k: str(v) for k, v in self._result.items()},
            },
        )
        if publish:
            publish_diagnostics(self, self.diag_pub, status)
        if writer is not None:
            array = DiagnosticArray(status=[status])
            array.header.stamp.sec, array.header.stamp.nanosec = divmod(self._now_ns(), 1_000_000_000)
            self._record(writer, f"{self.get_fully_qualified_name()}/status", array, self._now_ns())
        return status


def feedforward_of(data: object, tape: tapes.Tape) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A play's host feed-forward `{rate_hz, torque_nm: {joint: [...]}}` as (times, torques) per joint."""
    if not isinstance(data, dict) or not data:
        return {}
    rate = float(data.get("rate_hz", 0.0))
    torque = data.get("torque_nm")
    if not (math.isfinite(rate) and rate > 0) or not isinstance(torque, dict):
        raise ValueError("feedforward needs rate_hz > 0 and torque_nm: {joint: [N m, ...]}")
    out = {}
    for joint, values in torque.items():
        if joint not in tape.joints:
            raise ValueError(f"feedforward names joint {joint!r}, which tape {tape.name} does not move")
        values = np.asarray(values, dtype=float)
        if values.ndim != 1 or len(values) < 2 or not np.all(np.isfinite(values)):
            raise ValueError(f"feedforward of {joint} must be at least two finite torques")
        out[joint] = (np.arange(len(values)) / rate, values)
    return out


def main(args: list[str] | None = None) -> None:
    run(TapeRecorderNode, args)


if __name__ == "__main__":
    main()
