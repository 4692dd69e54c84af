"""`identifier`: identifies a MuJoCo model from bags on request, off the executor thread.

Lifecycle: configure loads and checks the problem file (FAILURE: it cannot be read or names what the
model lacks); activate accepts requests. `~/identify` (std_srvs/Trigger) starts a run on the bags named by
`training_bags`/`validation_bags` (or the problem's own) and answers at once; progress, the result folder
and the identified values go to `/diagnostics` and `~/result` (std_msgs/String, YAML of identified.yaml, whose
`verdict` and `warnings` come first; a `suspect` result is reported at level WARN with its warnings).
`~/cancel` (std_srvs/Trigger) stops a run at its next progress step (each optimizer evaluation); nothing
is written for a cancelled run.

The action `~/identify` (sysid_ros_interfaces/action/Identify) does the same with feedback every FEEDBACK_S
(stage, fraction done, the optimizer's latest cost) and cancel, and answers with the results file and the
verdict; the `~/identify` Trigger service is deprecated (kept for one release).
"""

from __future__ import annotations

import math
import re
import threading
import time
from pathlib import Path

import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionServer, CancelResponse
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from std_msgs.msg import String
from std_srvs.srv import Trigger
from sysid_ros_interfaces.action import Identify

from ..core.errors import Cancelled, ConfigError, SysidRosError
from ..core.files import check_writable
from ..core.identify import identify, load_problem, result_names, results_document, with_data, write_results
from ..ros.common import DIAGNOSTICS, ROBOT, diagnostic, end_goal, node_path, publish_diagnostics, run, ticker
from ..ros.parameters import ParameterTable, Spec, lifecycle_configured

PARAMETERS = (
    Spec("problem_file", "", "identification problem YAML (see config/identify_pendulum.yaml)"),
    Spec("training_bags", Parameter.Type.STRING_ARRAY, "bags to train on (empty: the problem's own)"),
    Spec("validation_bags", Parameter.Type.STRING_ARRAY, "held-out bags (empty: the problem's own)"),
    Spec(
        "control",
        "effort",
        "drive the model with: effort (measured), commands, or auto",
        choices=("effort", "commands", "auto"),
    ),
    Spec(
        "output_dir",
        "identified",
        "results go to <output_dir>/<problem name>_<UTC time> (relative: under $ROS_HOME/sysid_ros/<namespace>/)",
        live=True,
    ),
    ROBOT,
)

FEEDBACK_S = 1.0
COST = re.compile(r"cost ([-+0-9.eE]+|inf|nan)")  # the optimizer's progress message: "evaluation N: cost X"


class IdentifierNode(LifecycleNode):
    """Runs `sysid_ros.core.identify` on request and publishes what it found."""

    def __init__(self, **kwargs) -> None:
        super().__init__("identifier", **kwargs)
        self.parameters = ParameterTable(self, PARAMETERS, lifecycle_configured(self))
        self.diag_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS, 10)
        self.result_pub = self.create_publisher(String, "~/result", 10)
        self.create_service(Trigger, "~/identify", self._on_identify)
        self.create_service(Trigger, "~/cancel", self._on_cancel)
        self._tick = ticker(self, 0.5)
        self._action = ActionServer(self, Identify, "~/identify", self._execute, cancel_callback=self._cancel_goal)
        self._finished: dict | None = None  # the last run's outcome, for the action's result
        self._cancel = threading.Event()
        self._problem = None
        self._worker: threading.Thread | None = None
        self._progress = (0.0, "idle")
        self._done: tuple[str, str, str] | None = None  # (level, message, result yaml) for the executor to publish
        self.create_timer(0.5, self._report)

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        value = self.parameters.value
        try:
            self.parameters.check()
            if not value("problem_file"):
                raise ConfigError("parameter problem_file is empty: name the identification problem YAML")
            problem = load_problem(Path(value("problem_file")).expanduser())
            self._problem = with_data(problem, value("training_bags"), value("validation_bags"), value("control"))
        except (SysidRosError, OSError, ValueError) as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        self.get_logger().info(
            f"configured: problem {self._problem.name}, {len(self._problem.training)} training "
            f"and {len(self._problem.validation)} held-out data sets"
        )
        return TransitionCallbackReturn.SUCCESS

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._problem = None
        return TransitionCallbackReturn.SUCCESS

    def _busy(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def _begin(self) -> tuple[bool, str]:
        """Start a run on the worker thread: (started, what happens or why not)."""
        if self._state_machine.current_state[1] != "active":
            return False, "not active: configure and activate identifier first"
        if self._busy():
            return False, "an identification is already running"
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        out = node_path(self, self.get_parameter("output_dir").value) / f"{self._problem.name}_{stamp}"
        try:  # refuse an unwritable folder now, not after the optimisation
            check_writable(out, list(result_names(self._problem).values()))
        except SysidRosError as exc:
            return False, str(exc)
        self._done, self._finished, self._progress = None, None, (0.0, "starting")
        self._cancel.clear()
        self._worker = threading.Thread(target=self._run, args=(self._problem, out), daemon=True)
        self._worker.start()
        return True, f"identifying {self._problem.name} into {out}"

    def _on_identify(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self._begin()
        return response

    def _cancel_goal(self, goal_handle) -> CancelResponse:
        if self._busy():
            self.get_logger().info("cancel requested by an action client: the identification stops")
            self._cancel.set()
        return CancelResponse.ACCEPT

    async def _execute(self, goal_handle) -> Identify.Result:
        """The identify action: a run with feedback every FEEDBACK_S; its results file and verdict at the end."""
        started, message = self._begin()
        if not started:
            goal_handle.abort()
            return Identify.Result(success=False, message=message)
        sent, cost = -math.inf, math.nan
        while self._busy():
            fraction, stage = self._progress
            found = COST.search(stage)
            cost = float(found.group(1)) if found else cost
            if time.monotonic() - sent >= FEEDBACK_S:
                goal_handle.publish_feedback(
                    Identify.Feedback(
                        stage=stage.split(":")[0], progress=float(fraction), cost_so_far=cost, message=stage
                    )
                )
                sent = time.monotonic()
            await self._tick()
        done = self._finished or {"message": "the identification ended without an outcome"}
        result = Identify.Result(
            success=bool(done.get("results_file")),
            message=done["message"],
            results_file=done.get("results_file", ""),
            verdict=done.get("verdict", ""),
            outcome=done.get("document", ""),
        )
        return end_goal(goal_handle, result)

    def _on_cancel(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success = self._worker is not None and self._worker.is_alive()
        response.message = "cancelling the identification" if response.success else "nothing is running"
        if response.success:
            self._cancel.set()
        return response

    def _step(self, stage: str, fraction: float, message: str) -> None:
        """Progress from the run (every optimizer evaluation): kept for the executor; where a cancel lands."""
        if self._cancel.is_set():
            raise Cancelled("cancelled by request")
        self._progress = (fraction, f"{stage}: {message}")

    def _run(self, problem, out: Path) -> None:
        """The worker thread: the whole identification, with progress kept for the executor to publish."""
        try:
            result = identify(problem, progress=self._step)
            paths = write_results(result, out)
            document = yaml.safe_dump(results_document(result), sort_keys=False)
            # verdict first: a suspect result is published like any other, with its warnings, at level warn
            reasons = "".join(f"; {w}" for w in result.warnings)
            message = f"identified {problem.name} ({result.verdict}) -> {paths['yaml']}{reasons}"
            self._finished = {
                "message": message,
                "results_file": str(paths["yaml"]),
                "verdict": result.verdict,
                "document": document,
            }
            self._done = ("ok" if result.verdict == "ok" else "warn", message, document)
        except Cancelled as exc:  # a user's decision: INFO
            self._finished = {"message": f"identification {exc}: nothing written"}
            self._done = ("info", self._finished["message"], "")
        except Exception as exc:  # a failed run is reported, never fatal to the node
            self._finished = {"message": f"identification failed: {exc}"}
            self._done = ("error", self._finished["message"], "")

    def _report(self) -> None:
        done, self._done = self._done, None
        if done is not None:
            level, message, document = done
            log = {"ok": self.get_logger().info, "info": self.get_logger().info, "warn": self.get_logger().warning}
            log.get(level, self.get_logger().error)(message)
            if document:
                self.result_pub.publish(String(data=document))
            publish_diagnostics(self, self.diag_pub, diagnostic(self, "ok" if level == "info" else level, message))
        elif self._busy():
            fraction, message = self._progress
            publish_diagnostics(
                self,
                self.diag_pub,
                diagnostic(self, "ok", "identifying", {"progress": f"{fraction:.3f}", "stage": message}),
            )

    def destroy_node(self) -> None:
        self._action.destroy()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run(IdentifierNode, args)


if __name__ == "__main__":
    main()
