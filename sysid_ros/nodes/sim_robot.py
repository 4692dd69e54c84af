"""`sim_robot`: a MuJoCo arm that looks to every node like a ros2_control robot.

Publishes `joint_states` (position, velocity, effort = applied joint torque) and, with `use_sim_time`,
`clock`; takes `<forward_controller>/commands` (Float64MultiArray) and
`<trajectory_controller>/joint_trajectory` (JointTrajectory) and, like ros2_control's controller manager, answers
`controller_manager/list_controllers` (both controllers active, but those named in `inactive_controllers`, whose
commands it then ignores; each with its command interfaces: the forward controller's `<joint>/<forward_interface>`,
the trajectory controller's `<joint>/effort`); holds its drive gains as the live
parameters `gains.<joint>.p|i|d|i_clamp|ff_velocity_scale` and its hidden physics as `physics.*`.
Every name is relative, so `__ns:=/r1` (or a launch `namespace`) moves the whole robot; at the root they
are the usual `/joint_states`, `/clock`, ... . Each robot in a namespace runs its own simulated time on
`<ns>/clock`: its nodes that use sim time take it with `-r /clock:=clock`.
Bad commands are logged and published on `/diagnostics` (global; the status names the robot), then
ignored: the node stays up.
"""

from __future__ import annotations

import math
import threading
import time

from controller_manager_msgs.msg import ControllerState
from controller_manager_msgs.srv import ListControllers
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool
from trajectory_msgs.msg import JointTrajectory

from ..core.errors import SysidRosError
from ..core.gains import GAIN_FIELDS, GainGuard, PidGains, parameter_name, split_parameter_name
from ..core.signals import Trajectory
from ..core.sim import Feedback, FeedbackNoise, SimRobot
from ..ros.common import COMMAND_QOS, DIAGNOSTICS, ROBOT, diagnostic, publish_diagnostics, run, sensor_qos
from ..ros.parameters import ParameterTable, Spec

TICK_S = 0.002  # shortest wall period of the stepping loop (it ticks once per publish period, >= this)
MAX_CHUNK_S = 0.05  # most wall time one tick may catch up; a starved loop slows down instead

PARAMETERS = (  # start-up values (read-only) but the live real_time_factor; gains.* and physics.* follow the model
    *(
        Spec(*row, read_only=True)
        for row in (
            ("model", "pendulum", "embedded model name (pendulum, arm3) or an MJCF/URDF path"),
            (
                "joints",
                Parameter.Type.STRING_ARRAY,
                "names of the controlled joints (empty: every hinge and slide joint)",
            ),
            (
                "forward_interface",
                "effort",
                "the forward controller's interface",
                None,
                None,
                ("effort", "position", "velocity"),
            ),
            ("forward_controller", "forward_command_controller", "takes Float64MultiArray commands"),
            ("trajectory_controller", "joint_trajectory_controller", "takes JointTrajectory goals"),
            ("noise.position_rad", 0.0, "Gaussian noise on reported positions", 0.0, 10.0),
            ("noise.velocity_rad_s", 0.0, "Gaussian noise on reported velocities", 0.0, 100.0),
            ("noise.effort_nm", 0.0, "Gaussian noise on reported efforts", 0.0, 1e4),
            ("noise.encoder_resolution_rad", 0.0, "encoder quantum (0: none)", 0.0, 1.0),
            ("noise.delay_s", 0.0, "sensor lag, rounded to whole publish periods", 0.0, 1.0),
            *(
                (f"gain_guard.{g}_max", getattr(GainGuard(), f"{g}_max"), f"largest {g} gain accepted", 0.0, 1e9)
                for g in GAIN_FIELDS
            ),
            ("start_time_s", 1.0, "simulated time of the first sample", 0.0, 1e9),
            ("physics_dt_s", 0.0, "physics step (0: the model's timestep)", 0.0, 1.0),
            ("command_rate_hz", 500.0, "drive update rate (sample-and-hold)", 1.0, 1e5),
            ("publish_rate_hz", 500.0, "joint_states rate", 1.0, 1e5),
            ("seed", 0, "noise seed", 0, 2**31 - 1),
            ("torque_limits_nm", Parameter.Type.DOUBLE_ARRAY, "per joint (empty: the motors' ctrlrange)"),
            ("initial_positions", Parameter.Type.DOUBLE_ARRAY, "per joint (empty: the model's qpos0)"),
            ("trajectory_effort", True, "add trajectory points' effort to the drive's output (false: ignore it)"),
            (
                "joint_states_reliability",
                "reliable",
                "reliable, or best_effort as sensor drivers often publish",
                None,
                None,
                ("reliable", "best_effort"),
            ),
            (
                "controller_manager",
                True,
                "serve controller_manager/list_controllers, as ros2_control does (false: a robot without one)",
            ),
        )
    ),
    Spec(
        "inactive_controllers",
        Parameter.Type.STRING_ARRAY,
        "controllers listed as inactive: loaded and "
        "subscribed, but their commands are ignored (as an inactive ros2_control controller's are)",
        live=True,
    ),
    Spec("real_time_factor", 1.0, "simulated seconds per wall second when use_sim_time is true", 1e-3, 1e3, live=True),
    ROBOT,
)


class SimRobotNode(Node):
    """Steps a `SimRobot` in wall or simulated time and speaks ros2_control's topics and parameters."""

    def __init__(self, **kwargs) -> None:
        super().__init__("sim_robot", **kwargs)
        self._lock = threading.Lock()  # held by the stepping thread and by every callback that touches the robot
        self._halt = threading.Event()
        self.parameters = ParameterTable(self, PARAMETERS)
        p = self.parameters.value
        model, joints, forward, trajectory = (
            p("model"),
            p("joints"),
            p("forward_controller"),
            p("trajectory_controller"),
        )
        self.forward, self.trajectory = forward, trajectory
        self.forward_interface = p("forward_interface")
        noise = FeedbackNoise(
            position_rad=p("noise.position_rad"),
            velocity_rad_s=p("noise.velocity_rad_s"),
            effort_nm=p("noise.effort_nm"),
            encoder_resolution_rad=p("noise.encoder_resolution_rad"),
            delay_s=p("noise.delay_s"),
        )
        guard = GainGuard(**{f"{g}_max": p(f"gain_guard.{g}_max") for g in GAIN_FIELDS})
        self.diag_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS, 10)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        try:
            self.robot = SimRobot(
                model,
                joints or None,
                physics_dt_s=p("physics_dt_s"),
                command_rate_hz=p("command_rate_hz"),
                publish_rate_hz=p("publish_rate_hz"),
                noise=noise,
                seed=p("seed"),
                torque_limits_nm=p("torque_limits_nm") or None,
                gain_guard=guard,
                initial_positions=p("initial_positions") or None,
                start_time_ns=int(round(p("start_time_s") * 1e9)),
            )
            physics = self.robot.physical_parameters()
            self.parameters.add(
                [
                    Spec(
                        f"physics.{name}",
                        max(value, 0.0),
                        "hidden true physics (live)",
                        0.0,
                        max(1e6, value),
                        live=True,
                    )
                    for name, value in physics.items()
                ]
            )
            self.parameters.add(
                [
                    Spec(parameter_name(j, g), 0.0, f"drive {g} gain", 0.0, getattr(guard, f"{g}_max"), live=True)
                    for j in self.robot.joint_names
                    for g in GAIN_FIELDS
                ]
            )
            self.parameters.check()  # every start-up value, those of the model's own parameters too
            for name, value in physics.items():
                if p(f"physics.{name}") != value:
                    self.robot.set_physical(name, float(p(f"physics.{name}")))
            for joint in self.robot.joint_names:
                self.robot.set_gains(joint, PidGains(**{g: float(p(parameter_name(joint, g))) for g in GAIN_FIELDS}))
        except (SysidRosError, ValueError) as exc:  # stay up and say why, rather than vanish from the graph
            self.robot = None
            self._fatal = f"sim_robot cannot start: {exc}"
            self.get_logger().error(self._fatal)
            self.create_timer(
                1.0,
                lambda: publish_diagnostics(self, self.diag_pub, diagnostic(self, "error", self._fatal)),
                clock=steady,
            )
            return
        self.real_time_factor = p("real_time_factor")
        self.sim_time = bool(self.get_parameter("use_sim_time").value)
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self.robot.trajectory_effort = bool(p("trajectory_effort"))
        self.joint_pub = self.create_publisher(JointState, "joint_states", sensor_qos(p("joint_states_reliability")))
        self.clock_pub = self.create_publisher(ClockMsg, "clock", 10) if self.sim_time else None
        self.create_subscription(Float64MultiArray, f"{forward}/commands", self._on_forward, COMMAND_QOS)
        self.create_subscription(JointTrajectory, f"{trajectory}/joint_trajectory", self._on_trajectory, COMMAND_QOS)
        self.create_service(SetBool, "~/pause", self._on_pause)
        self.controllers = {
            forward: "forward_command_controller/ForwardCommandController",
            trajectory: "joint_trajectory_controller/JointTrajectoryController",
        }
        if p("controller_manager"):
            self.create_service(ListControllers, "controller_manager/list_controllers", self._on_list_controllers)

        self.paused = False
        self._anchor: tuple[int, int] | None = None  # (steady ns, sim ns) the loop keeps pace from
        self._epoch_offset_ns = 0 if self.sim_time else time.time_ns() - self.robot.time_ns
        self._last_error = ""
        self._physics_change = ""
        self.create_timer(1.0, self._report, clock=steady)
        self._publish(self.robot.advance(self.robot.time_ns))
        # The physics steps on a thread of its own, paced by the steady clock: an executor timer at the
        # publish rate cost more in rclpy's wait-set bookkeeping than the stepping and publishing itself.
        # Callbacks that touch the robot (commands, gains, physics, pause) hold `_lock`.
        period_s = max(TICK_S, self.robot.publish_steps * self.robot.dt_ns * 1e-9)
        self._stepping = threading.Thread(target=self._step_loop, args=(period_s,), name="steps", daemon=True)
        self._stepping.start()
        self.get_logger().info(
            f"sim_robot: model {model}, joints {list(self.robot.joint_names)}, "
            f"{'sim time x' + str(self.real_time_factor) if self.sim_time else 'wall time'}, "
            f"commands on {self.resolve_topic_name(forward + '/commands')} ({self.forward_interface}) and "
            f"{self.resolve_topic_name(trajectory + '/joint_trajectory')}"
        )

    # --- stepping -----------------------------------------------------------------------------------
    def _step_loop(self, period_s: float) -> None:
        """Tick every `period_s` of wall time until the node is destroyed (a late tick is not made up in a burst)."""
        due = time.monotonic()
        while not self._halt.is_set():
            due += period_s
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            else:  # behind: no sleep, but let the executor's threads (service callbacks) have the GIL and the lock
                due = time.monotonic()
                time.sleep(0)
            with self._lock:
                samples = self._tick()
            try:
                self._publish(samples)
            except Exception:  # the context shut down under us (SIGINT, destroy): the node is going away
                if self._halt.is_set() or not self.context.ok():
                    return
                raise

    def destroy_node(self) -> None:
        if hasattr(self, "_stepping"):
            self._halt.set()
            self._stepping.join(1.0)
        super().destroy_node()

    def _tick(self) -> list[Feedback]:
        """Step the physics to the steady clock's time (scaled in simulated time); the samples that fell due."""
        if self.paused:
            self._anchor = None
            return []
        now = time.monotonic_ns()
        if self._anchor is None:
            self._anchor = (now, self.robot.time_ns)
        factor = self.real_time_factor if self.sim_time else 1.0
        target = self._anchor[1] + int((now - self._anchor[0]) * factor)
        limit = self.robot.time_ns + int(MAX_CHUNK_S * factor * 1e9)
        if target > limit:  # fell behind: run slower rather than in bursts
            target = limit
            self._anchor = (now, target)
        return self.robot.advance(target)

    def _stamp_ns(self, sim_ns: int) -> int:
        return sim_ns + self._epoch_offset_ns

    def _publish(self, samples: list[Feedback]) -> None:
        """Publish each sample; with simulated time, `/clock` first, so clients' clocks keep pace with feedback."""
        names = list(self.robot.joint_names)
        for sample in samples:
            sec, nanosec = divmod(self._stamp_ns(sample.time_ns), 1_000_000_000)
            if self.clock_pub is not None:
                clock = ClockMsg()
                clock.clock.sec, clock.clock.nanosec = sec, nanosec
                self.clock_pub.publish(clock)
            msg = JointState(
                name=names,
                position=sample.position.tolist(),
                velocity=sample.velocity.tolist(),
                effort=sample.effort.tolist(),
            )
            msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
            self.joint_pub.publish(msg)

    # --- commands -----------------------------------------------------------------------------------
    def _reject(self, what: str, exc: Exception) -> None:
        self._last_error = f"{what} ignored: {exc}"
        self.get_logger().error(self._last_error)
        publish_diagnostics(self, self.diag_pub, diagnostic(self, "error", self._last_error))

    def _active(self, controller: str) -> bool:
        return controller not in self.get_parameter("inactive_controllers").value

    def _command_interfaces(self, controller: str) -> list[str]:
        """`<joint>/<interface>` a controller commands, as ros2_control names them: the forward controller its
        `forward_interface`; the trajectory controller effort (its PID, gains.<joint>.*, drives the joint torque)."""
        interface = self.forward_interface if controller == self.forward else "effort"
        return [f"{joint}/{interface}" for joint in self.robot.joint_names]

    def _on_list_controllers(
        self, request: ListControllers.Request, response: ListControllers.Response
    ) -> ListControllers.Response:
        """ros2_control's `controller_manager/list_controllers`: the two controllers, active unless listed inactive,
        each with its command interfaces (claimed while active, as the controller manager does)."""
        response.controller = []
        for name, kind in self.controllers.items():
            active, interfaces = self._active(name), self._command_interfaces(name)
            response.controller.append(
                ControllerState(
                    name=name,
                    type=kind,
                    state="active" if active else "inactive",
                    claimed_interfaces=interfaces if active else [],
                    required_command_interfaces=interfaces,
                    required_state_interfaces=[
                        f"{j}/{i}" for j in self.robot.joint_names for i in ("position", "velocity")
                    ],
                )
            )
        return response

    def _on_forward(self, msg: Float64MultiArray) -> None:
        if not self._active(self.forward):
            return
        try:
            with self._lock:
                self.robot.command(self.forward_interface, msg.data)
        except SysidRosError as exc:
            self._reject("forward command", exc)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if not self._active(self.trajectory):
            return
        try:
            points = msg.points
            if not points:
                raise ValueError("trajectory has no points")
            n = len(msg.joint_names)
            if len(set(msg.joint_names)) != n:
                raise ValueError(f"trajectory repeats joint names {list(msg.joint_names)}")
            for k, point in enumerate(points):
                for field in ("positions", "velocities", "effort"):
                    values = getattr(point, field)
                    if len(values) not in ((0, n) if field != "positions" else (n,)):
                        raise ValueError(f"point {k} has {len(values)} {field} for {n} joints")
            with_vel = all(len(pt.velocities) == n for pt in points)
            with_eff = all(len(pt.effort) == n for pt in points)
            stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            times = [pt.time_from_start.sec + pt.time_from_start.nanosec * 1e-9 for pt in points]
            positions = [list(pt.positions) for pt in points]
            velocities = [list(pt.velocities) for pt in points] if with_vel else None
            efforts = [list(pt.effort) for pt in points] if with_eff else None
            with self._lock:
                now = self.robot.time_ns
                start = now if stamp == 0 else stamp - self._epoch_offset_ns
                self.robot.follow(Trajectory(tuple(msg.joint_names), start, times, positions, velocities, efforts))
            if start < now:  # a real controller starts it late too: say so
                self.get_logger().warning(
                    f"trajectory stamped to start {(now - start) * 1e-9:.3f} s ago: started now, late"
                )
        except (SysidRosError, ValueError) as exc:
            self._reject("trajectory", exc)

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        """Pause or resume; the message names the simulated time (ns) of the last sample published."""
        with self._lock:
            self.paused = bool(request.data)
            response.message = f"{'paused' if self.paused else 'running'} at {self.robot.time_ns} ns"
        response.success = True
        self.get_logger().info(f"simulation {response.message}")
        return response

    # --- parameters ---------------------------------------------------------------------------------
    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        gains = dict(self.robot.gains)
        physics: dict[str, float] = {}
        factor = None
        for param in params:
            value = param.value
            split = split_parameter_name(param.name)
            if split is not None:
                joint, gain = split
                if joint not in gains:
                    return SetParametersResult(successful=False, reason=f"unknown joint {joint!r}")
                reason = self.robot.gain_guard.reason_to_refuse(gain, value)
                if reason:
                    return SetParametersResult(successful=False, reason=f"{param.name}: {reason}")
                gains[joint] = gains[joint].replace(**{gain: float(value)})
            elif param.name.startswith("physics."):
                if not isinstance(value, float) or not math.isfinite(value) or value < 0:
                    return SetParametersResult(successful=False, reason=f"{param.name} must be a finite float >= 0")
                physics[param.name[len("physics.") :]] = value
            elif param.name == "real_time_factor":
                if not isinstance(value, float) or not math.isfinite(value) or value <= 0:
                    return SetParametersResult(successful=False, reason="real_time_factor must be > 0")
                factor = value
        with self._lock:
            for joint, joint_gains in gains.items():
                if joint_gains != self.robot.gains[joint]:
                    self.robot.set_gains(joint, joint_gains)
            for name, value in physics.items():
                self.robot.set_physical(name, value)
                # when exactly the hidden physics changed (simulated time): what an online estimator's delay is
                # measured from
                self._physics_change = f"{name}={value} at {self.robot.time_ns} ns"
                self.get_logger().info(f"physics {self._physics_change}")
            if factor is not None:
                self.real_time_factor, self._anchor = factor, None
        return SetParametersResult(successful=True)

    def _report(self) -> None:
        level = "warn" if self.paused else "ok"
        message = "paused" if self.paused else f"running ({self.robot.mode})"
        publish_diagnostics(
            self,
            self.diag_pub,
            diagnostic(
                self,
                level,
                message,
                {
                    "sim_time_s": f"{self.robot.time_ns * 1e-9:.3f}",
                    "mode": self.robot.mode,
                    "last_error": self._last_error,
                    "last_physics_change": self._physics_change,
                },
            ),
        )


def main(args: list[str] | None = None) -> None:
    run(SimRobotNode, args)


if __name__ == "__main__":
    main()
