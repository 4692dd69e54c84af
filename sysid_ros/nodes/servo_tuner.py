"""`servo_tuner`: tunes a controller's joints over ROS, proposes gains, and applies them only when asked.

Lifecycle: configure reads the joints, envelopes, guard and goal, opens the gains journal and rolls back
every change a crash left unfinished (FAILURE when the controller cannot confirm it); activate accepts
requests. The action `~/tune` (sysid_ros_interfaces/action/Tune) tunes with feedback every
FEEDBACK_S (stage, play, seconds of motion left, cost so far) and cancel (as `~/cancel` below; logged at INFO).
Services (std_srvs/Trigger):
- `~/tune` (deprecated: the action of the same name replaces it; kept for one release) tunes the joints through the
tape_recorder (every play in a bag) with trial gains inside a
  journaled session, so the controller ends exactly as found; the proposal goes to disk (YAML), to the
  read-only parameters `proposal.<joint>.<gain>`, and to `~/result`;
- `~/apply` sets the proposal (or `apply.proposal_file`) on the controller all at once, journaled first;
  a canary then replays the held-out tapes and keeps the change only if the live cost ratio
  <= 1 - (1 - predicted) / 2, else rolls it back by itself;
- `~/rollback` restores the exact gains from before the last change;
- `~/cancel` stops a running tune or canary: the recorder holds at once and closes the play's bag with the
  reason, no other play starts, and the controller gets back exactly the gains it had (a tune's as-found
  gains; a canary's previous gains). Deactivating while busy cancels the same way, then deactivates.
`auto_apply` applies each new proposal that improves. Status on /diagnostics; outcomes on `~/result`.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path

import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_msgs.msg import String
from std_srvs.srv import Trigger
from sysid_ros_interfaces.action import Tune

from ..core.errors import Cancelled, SysidRosError
from ..core.files import write_file
from ..core.gains import ALIASES, STYLES, GainChange, GainGuard, GainsJournal
from ..core.report import write_canary_report, write_tuning_report
from ..core.tapes import Envelope
from ..core.tuner import (
    GainProposal,
    Goal,
    Servo,
    TuneProgress,
    arm_check_tapes,
    from_arm,
    from_tune,
    judge_canary,
    load_proposal,
    score,
    stage_tapes,
    tune,
    tune_arm,
)
from ..ros.client import RosClient
from ..ros.common import (
    DIAGNOSTICS,
    ROBOT,
    diagnostic,
    end_goal,
    node_path,
    publish_diagnostics,
    read_envelopes,
    run,
    ticker,
)
from ..ros.controller_gains import ControllerGains
from ..ros.parameters import ParameterTable, Spec, envelope_specs, lifecycle_configured
from ..ros.ros_plant import RosArm

RESULT_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
FEEDBACK_S = 1.0  # the tune action's feedback period (s)
GOAL_PARAMETERS = (
    "repeats",
    "twin_screening",
    "stop_allocation_mrad",
    "max_rungs",
    "sweep_stride_headroom",
    "refine_seed",
    "verify_seed",
)
GOAL_LIMITS = {
    "repeats": (1, 100),
    "stop_allocation_mrad": (1e-6, 1e3),
    "max_rungs": (1, 1000),
    "sweep_stride_headroom": (0.0, 0.99),
    "refine_seed": (0, 2**31 - 1),
    "verify_seed": (0, 2**31 - 1),
}

PARAMETERS = (  # and envelope.<joint>.* for each joint (parameters.envelope_specs)
    Spec("joints", Parameter.Type.STRING_ARRAY, "joints to tune (all under one controller)", read_only=True),
    Spec("controller", "joint_trajectory_controller", "node whose parameters gains.<joint>.p|i|d|i_clamp are set"),
    Spec(
        "controller_style",
        "auto",
        "the controller's PID parameter names (auto: detected from its parameter list)",
        choices=("auto", *STYLES, *ALIASES),
    ),
    Spec("recorder", "tape_recorder", "tape_recorder node that plays the tapes (command_mode trajectory)"),
    Spec("model", "", "MJCF of the robot (embedded name or path): torque caps and the arm's feed-forward"),
    Spec("command_rate_hz", 250.0, "the controller's update rate (the recorder's command_rate_hz)", 1.0, 10000.0),
    Spec("feedback_topic", "joint_states", "sensor_msgs/JointState feedback (relative: in the node's namespace)"),
    Spec(
        "torque_sample_phase", 0.5, "where in its interval the drive's reported torque is taken (0.5: held)", 0.0, 1.0
    ),
    *(
        Spec(f"guard.{f.name}", getattr(GainGuard(), f.name), "largest value the tuner may send", 0.0, 1e9)
        for f in fields(GainGuard)
    ),
    *(
        Spec(f"goal.{name}", getattr(Goal(), name), f"tuner Goal.{name}", *GOAL_LIMITS.get(name, (None, None)))
        for name in GOAL_PARAMETERS
    ),
    Spec("servo.encoder_noise_rad", 0.0, "encoder noise (rad) for the analytic bounds", 0.0, 1.0),
    Spec("servo.delay_s", 0.0, "known feedback delay (s) for the analytic bounds", 0.0, 1.0),
    Spec(
        "output_dir",
        "tuner",
        "plays, bags' index and proposals go to <output_dir>/<action>_<UTC time> (relative: "
        "under $ROS_HOME/sysid_ros/<namespace>/)",
    ),
    Spec("journal", "", "gains journal (default <output_dir>/gains_journal.jsonl; relative: as output_dir)"),
    Spec("auto_apply", False, "apply each new proposal that improves (then the canary decides)", live=True),
    Spec("apply.proposal_file", "", "a proposal YAML for ~/apply instead of the latest tune's", live=True),
    Spec("controller_timeout_s", 10.0, "how long the controller's parameter services may take to answer", 0.1, 3600.0),
    ROBOT,
)


@dataclass(frozen=True)
class TunerConfig:
    """servo_tuner's parameters as read at configure (each checked by its `Spec` row), named as the parameters."""

    joints: tuple[str, ...]
    envelopes: dict[str, Envelope]
    controller: str
    recorder: str
    model: str
    command_rate_hz: float
    feedback_topic: str
    torque_sample_phase: float
    goal: Goal
    guard: GainGuard
    encoder_noise_rad: float  # servo.encoder_noise_rad
    delay_s: float  # servo.delay_s
    output_dir: Path
    journal: Path
    controller_timeout_s: float
    controller_style: str


class ServoTunerNode(LifecycleNode):
    """Tune, propose, apply with a canary, roll back: every gain change journaled before it is sent."""

    def __init__(self, **kwargs) -> None:
        super().__init__("servo_tuner", **kwargs)
        self.parameters = ParameterTable(self, PARAMETERS, lifecycle_configured(self))
        self.parameters.add(envelope_specs(self.get_parameter("joints").value))
        self._proposal_lock = False  # proposal.* parameters are read-only except while this node writes them
        self.add_on_set_parameters_callback(self._guard_proposal_parameters)
        self.diag_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS, 10)
        self.result_pub = self.create_publisher(String, "~/result", RESULT_QOS)
        for name, handler in (
            ("~/tune", self._on_tune),
            ("~/apply", self._on_apply),
            ("~/rollback", self._on_rollback),
            ("~/cancel", self._on_cancel),
        ):
            self.create_service(Trigger, name, handler)
        self._tick = ticker(self, 0.5)  # an awaitable every 0.5 s: the action's feedback loop, off no thread
        self._tune_action = ActionServer(self, Tune, "~/tune", self._execute_tune, cancel_callback=self._cancel_goal)
        self._tune_progress: TuneProgress | None = None
        self._outcomes: list[dict] = []  # every outcome posted, for the action's result
        self._config: TunerConfig | None = None
        self._client: RosClient | None = None
        self._gains: ControllerGains | None = None
        self._proposal: tuple[GainProposal, Path] | None = None
        self._worker: threading.Thread | None = None
        self._cancel = threading.Event()
        self._cancelled_by = ""  # who asked for the running job's cancel, for its outcome
        self._phase = "idle"
        self._outbox: list[tuple[str, str, dict]] = []  # (level, message, result) for the executor to publish
        self.create_timer(0.5, self._report)

    # --- lifecycle ----------------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._config = self._read_configuration()
            self._client = RosClient(f"{self.get_name()}_client", self.get_namespace())  # names resolve in ours
            c = self._config
            self._gains = ControllerGains(
                self._client, c.controller, GainsJournal(c.journal), c.guard, c.controller_timeout_s, c.controller_style
            )
            recovered = self._gains.recover()
        except (SysidRosError, OSError, ValueError) as exc:
            self.get_logger().error(f"configure failed: {exc}")
            self._teardown()
            return TransitionCallbackReturn.FAILURE
        for change in recovered:
            message = (
                f"rolled back unfinished change {change.change_id} ({change.reason}): {change.previous}"
                if change.state == "rolled_back"
                else f"left change {change.change_id} as found: {change.reason}"
            )
            self.get_logger().warning(message)
            self._post(
                "warn",
                message,
                {
                    "action": "recover",
                    "ok": True,
                    "change_id": change.change_id,
                    "restored": change.previous if change.state == "rolled_back" else None,
                },
            )
        lost = None
        try:
            lost = self._gains.lost()
        except SysidRosError as exc:  # the controller may come up later; the tune reads it again
            self.get_logger().info(f"kept gains not checked: {exc}")
        if lost is not None:
            message = (
                f"the gains kept by change {lost.change_id} are no longer on the controller: {lost.reason}; "
                f"make them permanent with sysid-ros apply PROPOSAL --persist FILE"
            )
            self.get_logger().warning(message)
            self._post(
                "warn", message, {"action": "recover", "ok": True, "change_id": lost.change_id, "restored": None}
            )
        self.get_logger().info(f"configured: joints {list(c.joints)} of {c.controller}, journal {c.journal}")
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._busy():  # cancel: the play stops, the gains come back, then the worker ends
            self.cancel("the node's deactivation")
            self._worker.join(3 * self._config.controller_timeout_s)
            if self._busy():
                self.get_logger().error(f"cannot deactivate: the cancelled {self._phase} did not end in time")
                return TransitionCallbackReturn.FAILURE
        return super().on_deactivate(state)

    def destroy_node(self) -> None:
        self._tune_action.destroy()
        super().destroy_node()

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._busy():
            self.get_logger().error("cannot clean up while a tune or canary runs")
            return TransitionCallbackReturn.FAILURE
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    def _teardown(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = self._gains = self._config = None

    def _read_configuration(self) -> TunerConfig:
        self.parameters.check()
        value = self.parameters.value
        joints = tuple(value("joints"))
        if not joints:
            raise ValueError("parameter joints is empty: name the joints to tune")
        if not value("model"):
            raise ValueError("parameter model is empty: name the robot's MJCF")
        output = node_path(self, value("output_dir"))
        output.mkdir(parents=True, exist_ok=True)
        return TunerConfig(
            joints=joints,
            envelopes=read_envelopes(self, list(joints)),
            controller=value("controller"),
            recorder=value("recorder"),
            model=value("model"),
            command_rate_hz=float(value("command_rate_hz")),
            feedback_topic=value("feedback_topic"),
            torque_sample_phase=float(value("torque_sample_phase")),
            goal=Goal(**{name: value(f"goal.{name}") for name in GOAL_PARAMETERS}),
            guard=GainGuard(**{f.name: float(value(f"guard.{f.name}")) for f in fields(GainGuard)}),
            encoder_noise_rad=float(value("servo.encoder_noise_rad")),
            delay_s=float(value("servo.delay_s")),
            output_dir=output,
            journal=node_path(self, value("journal")) if value("journal") else output / "gains_journal.jsonl",
            controller_timeout_s=float(value("controller_timeout_s")),
            controller_style=value("controller_style"),
        )

    # --- requests -----------------------------------------------------------------------------------
    def _busy(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def _refusal(self) -> str:
        if self._state_machine.current_state[1] != "active":
            return "not active: configure and activate servo_tuner first"
        return f"busy: {self._phase}" if self._busy() else ""

    def _start(self, phase: str, target, *args) -> None:
        self._phase = phase
        self._cancel.clear()
        self._cancelled_by = ""
        self._worker = threading.Thread(target=self._guarded, args=(phase, target, *args), daemon=True)
        self._worker.start()

    def _guarded(self, phase: str, target, *args) -> None:
        """A worker: any failure is reported, never fatal to the node."""
        try:
            target(*args)
        except Cancelled as exc:  # a user's decision, not a fault
            by = f" ({self._cancelled_by})" if self._cancelled_by else ""
            message = f"{phase} {exc}{by}: the controller has its gains from before"
            self.get_logger().info(message)
            self._post("warn", message, {"action": phase, "ok": False, "cancelled": True, "message": message})
        except Exception as exc:
            message = f"{phase} failed: {exc}"
            self.get_logger().error(message)
            self._post("error", message, {"action": phase, "ok": False, "message": message})
        finally:
            self._phase = "idle"

    def cancel(self, by: str = "") -> None:
        """Stop the running tune or canary: its play at once (the recorder holds), its gains restored by the worker;
        `by`: who asked, for the outcome's message."""
        self._cancelled_by = self._cancelled_by or by
        self._cancel.set()
        try:  # straight to the recorder, not waiting for the worker's next look at the flag
            self._client.call(Trigger, f"{self._config.recorder}/cancel", Trigger.Request(), 5.0)
        except TimeoutError as exc:
            self.get_logger().warning(f"recorder not told to cancel ({exc}); the worker will ask again")

    def _on_cancel(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success = self._busy()
        response.message = (
            f"cancelling {self._phase}: the play stops and the gains come back"
            if response.success
            else "nothing is running"
        )
        if response.success:
            self.cancel("through ~/cancel")
        return response

    def _cancel_goal(self, goal_handle) -> CancelResponse:
        if self._busy() and not self._cancel.is_set():
            self.get_logger().info(f"cancel requested by an action client: stopping the {self._phase}")
            self.cancel("by the tune action's client")
        return CancelResponse.ACCEPT

    async def _execute_tune(self, goal_handle) -> Tune.Result:
        """The tune action: start a tune, send feedback every FEEDBACK_S until it ends, answer its outcome."""
        why = self._refusal()
        if why:
            goal_handle.abort()
            return Tune.Result(success=False, message=why)
        seen = len(self._outcomes)
        self._tune_progress = None
        self._start("tune", self._tune, self._folder("tune"))
        sent = -math.inf
        while self._busy():
            if time.monotonic() - sent >= FEEDBACK_S:
                goal_handle.publish_feedback(self._tune_feedback())
                sent = time.monotonic()
            await self._tick()
        outcome = next((r for r in self._outcomes[seen:] if r.get("action") == "tune"), None) or {
            "action": "tune",
            "ok": False,
            "message": "the tune ended without an outcome",
        }
        result = Tune.Result(
            success=bool(outcome.get("ok")),
            message=str(outcome.get("message", "")),
            proposal_file=str(outcome.get("proposal_file", "")),
            outcome=yaml.safe_dump(outcome, sort_keys=False),
        )
        return end_goal(goal_handle, result)  # canceled only when the action accepted a cancel

    def _tune_feedback(self) -> Tune.Feedback:
        p = self._tune_progress
        if p is None:
            return Tune.Feedback(stage="reading the gains", seconds_left=0.0, cost_so_far=math.nan)
        stage = "cancelling" if self._cancel.is_set() else p.stage
        return Tune.Feedback(
            stage=stage, play=p.play, plays=p.plays, seconds_left=p.seconds_left, cost_so_far=p.cost_so_far
        )

    def _on_tune(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        why = self._refusal()
        if not why:
            self._start("tune", self._tune, self._folder("tune"))
        response.success, response.message = not why, why or f"tuning {list(self._config.joints)}"
        return response

    def _on_apply(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """Set the proposal now (all or nothing, answered at once); the canary then runs in the background."""
        why = self._refusal()
        change = None
        if not why:
            try:
                proposal, path = self._proposal_to_apply()
                change = self._apply(proposal, path)
            except (SysidRosError, ValueError, OSError) as exc:
                why = f"not applied: {exc}"
                self._post("error", why, {"action": "apply", "ok": False, "message": why})
        if change is not None:
            self._start("canary", self._canary, proposal, change, self._folder("canary"), path)
        response.success = change is not None
        response.message = why or f"applied {change.new}; canary running"
        return response

    def _on_rollback(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        why = self._refusal()
        if not why:
            try:
                change = self._last_change()
                self._gains.rollback(change, "rolled back by request")
                message = f"rolled back {change.change_id}: {change.previous}"
                self._post("ok", message, {"action": "rollback", "ok": True, "restored": change.previous})
            except (SysidRosError, ValueError) as exc:
                why = f"not rolled back: {exc}"
        response.success, response.message = not why, why or message
        return response

    def _folder(self, action: str) -> Path:
        return self._config.output_dir / f"{action}_{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"

    # --- work ---------------------------------------------------------------------------------------
    def _arm(self, folder: Path) -> RosArm:
        c = self._config
        # one joint: its identified box model is the whole feed-forward (a nominal model's gravity would only
        # be less right); an arm adds mj_inverse of its nominal model for the coupling between joints
        nominal = None if len(c.joints) > 1 else False
        return RosArm(
            c.model,
            tuple(c.joints),
            c.envelopes,
            c.command_rate_hz,
            arm_feedforward=nominal,
            client=self._client,
            gains=self._gains,
            recorder=c.recorder,
            feedback_topic=c.feedback_topic,
            workdir=folder,
            torque_sample_phase=c.torque_sample_phase,
            cancel=self._cancel,
        )

    def _tune(self, folder: Path) -> None:
        c = self._config
        arm = self._arm(folder)
        found = arm.read_gains()
        servos = [
            Servo(
                j,
                found[j],
                arm.caps[j],
                c.envelopes[j],
                kp_max_nm_rad=c.guard.p_max,
                kd_max_nm_s_rad=c.guard.d_max,
                encoder_noise_rad=c.encoder_noise_rad,
                delay_s=c.delay_s,
            )
            for j in c.joints
        ]
        self._tune_progress = arm.progress = TuneProgress.plan(servos, arm.command_rate_hz, c.goal)
        with arm.trials("servo_tuner: trial gains while tuning"):
            if len(servos) == 1:
                result = tune(servos[0], arm.joint_plant(servos[0].name, {}), c.goal)
                tapes = stage_tapes(servos[0], arm.command_rate_hz, c.goal, result.identification.model)
                proposal = from_tune(result, tapes["verify"])
            else:
                result = tune_arm(servos, arm, c.goal)
                proposal = from_arm(result, arm_check_tapes(arm, {j: o.model for j, o in result.outcomes.items()}))
        stages: dict[str, float] = {}  # seconds of motion per stage (over the joints), the arm check apart
        for one in [result] if len(servos) == 1 else [o.result for o in result.outcomes.values() if o.result]:
            for stage, seconds in one.seconds.items():
                if stage != "total":
                    stages[stage] = stages.get(stage, 0.0) + seconds
        path = folder / "proposal.yaml"
        document = {
            **proposal.to_dict(),
            "controller": c.controller,
            "controller_style": self._gains.style.name,
            "trajectory_feedforward": {
                None: "not measured",
                True: "added by the controller",
                False: "ignored by the controller",
            }[arm.feedforward_honoured],
            # what `export` / `apply --persist` need to write the feed-forward the canary plays, or refuse
            "base_feedforward": c.model if len(c.joints) > 1 and arm.feedforward_honoured is not False else None,
            "ff_velocity_scale_as_found": self._ff_velocity_scales(),
            "notes": list(arm.notes),
            "bags": arm.bags,
            "seconds_of_motion": arm.motion_s,
            "seconds_by_stage": stages,
        }
        text = yaml.safe_dump(document, sort_keys=False, width=110)
        write_file(path, lambda tmp: tmp.write_text(text), force=True)  # `apply` never reads half a proposal
        self._proposal = (proposal, path)
        report = self._draw(write_tuning_report, folder)
        self._post(
            "ok",
            f"proposal: {proposal.summary}" + "".join(f"; note: {n}" for n in arm.notes),
            {
                "action": "tune",
                "ok": True,
                "improved": proposal.improved,
                "proposal_file": str(path),
                "report": report,
                "parameters": proposal.parameters,
                "as_found": proposal.as_found,
                "predicted_cost_ratio": proposal.predicted_ratio,
                "seconds_of_motion": arm.motion_s,
            },
        )
        if self.get_parameter("auto_apply").value and proposal.improved:
            change = self._apply(proposal, path)
            self._phase = "canary"
            self._canary(proposal, change, self._folder("canary"), path)

    def _ff_velocity_scales(self) -> dict[str, float]:
        """The controller's velocity feed-forward scale of each joint ({} when it has none to read)."""
        try:
            return self._gains.read([f"gains.{j}.ff_velocity_scale" for j in self._config.joints])
        except SysidRosError:
            return {}

    def _proposal_to_apply(self) -> tuple[GainProposal, Path]:
        file = self.get_parameter("apply.proposal_file").value
        if file:  # absurd gains are refused as the file is read; gains over this tuner's own guard, when sent
            loosest = GainGuard(
                **{
                    f.name: max(getattr(GainGuard(), f.name), getattr(self._config.guard, f.name))
                    for f in fields(GainGuard)
                }
            )
            return load_proposal(file, loosest), Path(file)
        if self._proposal is None:
            raise ValueError("no proposal: call ~/tune first, or set apply.proposal_file")
        return self._proposal

    def _apply(self, proposal: GainProposal, path: Path) -> GainChange:
        """Journal, then set the proposal's gains all at once; refuses what would not be a clean change."""
        if not proposal.improved:
            raise ValueError(f"the proposal in {path} does not improve on as found: nothing to apply")
        if set(proposal.joints) != set(self._config.joints):
            raise ValueError(f"the proposal is for {list(proposal.joints)}, this tuner for {list(self._config.joints)}")
        now = self._gains.read(list(proposal.as_found))
        # an infinite integral clamp (no clamp) was tuned as the joint's torque cap (`clamp_for_tuning`)
        now = {k: proposal.as_found[k] if k.endswith(".i_clamp") and math.isinf(v) else v for k, v in now.items()}
        if now != proposal.as_found:
            raise ValueError(
                f"the controller's gains changed since the tune ({now}, tuned from {proposal.as_found}): tune again"
            )
        return self._gains.apply(proposal.parameters, f"servo_tuner: {path}")

    def _draw(self, writer, folder: Path) -> str:
        """Draw a run's report.html; a report that cannot be drawn is a warning, never a failed run."""
        try:
            return str(writer(folder))
        except Exception as exc:
            self.get_logger().warning(f"no report for {folder}: {exc}")
            return ""

    def _canary(self, proposal: GainProposal, change: GainChange, folder: Path, proposal_file: Path) -> None:
        """Replay the held-out tapes under the applied gains; keep or roll back by the canary rule."""
        change = self._gains.journal.advance(change, "canary")
        try:
            arm = self._arm(folder)
            arm.assume_gains(proposal.parameters)
            runs = [arm.play(tape, proposal.controllers()) for tape in proposal.canary_tapes]
            after = {j: score([run[j] for run in runs]) for j in proposal.joints}
            ratio, failure = proposal.live_ratio(after)
            verdict = judge_canary(ratio, proposal.predicted_ratio, failure)
        except Exception as exc:
            self._gains.rollback(change, f"canary {exc}" if isinstance(exc, Cancelled) else f"canary failed: {exc}")
            raise
        if verdict.keep:
            self._gains.keep(change, verdict.reason)
        else:
            self._gains.rollback(change, verdict.reason)
        level = "ok" if verdict.keep else "warn"
        outcome = {
            "action": "canary",
            "ok": True,
            "kept": verdict.keep,
            "live_cost_ratio": verdict.live_ratio,
            "threshold": verdict.threshold,
            "predicted_cost_ratio": proposal.predicted_ratio,
            "gains": change.new if verdict.keep else change.previous,
            "bags": arm.bags,
        }
        (folder / "canary.yaml").write_text(
            yaml.safe_dump(
                {
                    **outcome,
                    "reason": verdict.reason,
                    "joints": list(proposal.joints),
                    "proposal_file": str(Path(proposal_file).resolve()),
                },
                sort_keys=False,
                width=110,
            )
        )
        outcome["report"] = self._draw(write_canary_report, folder)
        if Path(proposal_file).name == "proposal.yaml":
            self._draw(write_tuning_report, Path(proposal_file).parent)  # the tune's report shows its canary
        self._post(level, f"canary: {verdict.reason}", outcome)

    def _last_change(self) -> GainChange:
        changes = [c for c in self._gains.changes() if c.state in ("applied", "canary", "kept")]
        if not changes:
            raise ValueError("no applied change to roll back in the journal")
        return changes[-1]

    # --- reporting (on the executor thread) ---------------------------------------------------------
    def _post(self, level: str, message: str, result: dict) -> None:
        self._outcomes.append({**result, "message": message})
        self._outbox.append((level, message, result))

    def _report(self) -> None:
        while self._outbox:
            level, message, result = self._outbox.pop(0)
            if result.get("action") == "tune" and result.get("ok"):
                self._publish_proposal()
            self.result_pub.publish(String(data=yaml.safe_dump({**result, "message": message}, sort_keys=False)))
            publish_diagnostics(self, self.diag_pub, diagnostic(self, level, message, {"phase": self._phase}))
        if self._busy():
            publish_diagnostics(self, self.diag_pub, diagnostic(self, "ok", self._phase, {"phase": self._phase}))

    def _publish_proposal(self) -> None:
        """The latest proposal as parameters proposal.<joint>.<gain>, proposal.file, proposal.improved, ..."""
        proposal, path = self._proposal
        values = {f"proposal.{name[len('gains.') :]}": v for name, v in proposal.parameters.items()}
        values.update(
            {
                "proposal.file": str(path),
                "proposal.improved": proposal.improved,
                "proposal.predicted_cost_ratio": float(proposal.predicted_ratio),
            }
        )
        self._proposal_lock = True
        try:
            for name, value in values.items():
                if self.has_parameter(name):
                    self.set_parameters([Parameter(name, value=value)])
                else:
                    self.parameters.add([Spec(name, value, "read-only: the servo_tuner's latest proposal", live=True)])
        finally:
            self._proposal_lock = False

    def _guard_proposal_parameters(self, params: list[Parameter]) -> SetParametersResult:
        if not self._proposal_lock and any(p.name.startswith("proposal.") for p in params):
            return SetParametersResult(successful=False, reason="proposal.* parameters are read-only")
        return SetParametersResult(successful=True)


def main(args: list[str] | None = None) -> None:
    run(ServoTunerNode, args)


if __name__ == "__main__":
    main()
