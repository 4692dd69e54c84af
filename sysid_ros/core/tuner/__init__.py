"""The servo tuner, ROS-free: every motion goes through the `Plant` seam.

Stage 0 `analytic_start` (moves nothing), then `tune`: Stage 1 `identify_servo`, limits from the as-found run,
Stage 2 `run_sweep` (ringing sweep, deploy ceiling), Stage 3 `refine` (three coordinate passes, gates,
cost; optional twin screening), Stage 4 `verify` on held-out tapes; `proposal` / `to_yaml` for a person
and for the ROS side. `tune_arm` tunes an arm tip to base and checks it whole; `fine_tune` re-tunes a
deployed joint from its logs and `FineTuneResult.canary` keeps or rolls back.

- `stages/`: Stages 0-4 (`analytic`, `identification`, `sweep`, `refine`, `verify`).
- `plants/`: the `Plant` seam and one joint on MuJoCo (`joint`), a whole arm (`arm`), `at_rest`.
- `servo`: what the tuner works on: `Servo`, `DriveGains`, `Controller`, `Goal`; `scoring`: ringing, chatter,
  tracking, the gates and the cost; `base_feedforward`: the feed-forward an arm plant adds by itself.
- `pipeline`: `tune`, the stages in order; `whole_arm`: `tune_arm`; `fine_tune`: re-tuning from logs.
- `proposal`: what a tune would change; `canary`: keep or roll back; `feedforward_check`: does the
  controller add the trajectory's effort; `progress`: what a running tune has done so far (`TuneProgress`:
  stage, play, seconds of motion left, cost so far; the tune action's feedback).
"""

from .stages.analytic import AnalyticStart, analytic_start
from .whole_arm import ArmResult, ArmRound, JointOutcome, outcome_of, tune_arm
from .plants.arm import Arm, ArmPlant, JointInArm
from .plants.at_rest import RestWatch
from .canary import CanaryVerdict, canary_threshold, judge_canary
from .fine_tune import FineTuneResult, Log, fine_tune, learn_feedforward
from .stages.identification import Identification, identify_servo
from .pipeline import TuneResult, stage_tapes, tune, tuning_plan_seconds
from .plants.joint import Plant, SimPlant, Telemetry, twin_plant, twin_xml
from .proposal import gains_from_proposal, proposal, to_yaml
from .stages.refine import Candidate, RefineResult
from .scoring import Score, SweepLimits, cost, gate_failures, score
from .servo import Controller, DriveGains, Goal, Loop, Servo, feedforward_from, gains_for, loop_of, to_pid_gains
from .stages.sweep import Rung, SweepResult, eased, limits_from, run_sweep
from .stages.verify import Verified, VerifyResult, verify

__all__ = [
    "AnalyticStart", "Arm", "ArmPlant", "ArmResult", "ArmRound", "CanaryVerdict", "Candidate", "Controller",
    "DriveGains", "FineTuneResult", "Goal", "Identification", "JointInArm", "JointOutcome", "Log", "Loop", "Plant",
    "RefineResult", "RestWatch", "Rung", "Score", "Servo", "SimPlant", "SweepLimits", "SweepResult", "Telemetry", "TuneResult",
    "Verified", "VerifyResult", "analytic_start", "canary_threshold", "cost", "eased", "feedforward_from",
    "fine_tune", "gains_for", "gains_from_proposal", "gate_failures", "identify_servo", "judge_canary",
    "learn_feedforward", "limits_from", "loop_of", "outcome_of", "proposal", "run_sweep", "score", "stage_tapes",
    "to_pid_gains", "to_yaml", "tune", "tune_arm", "tuning_plan_seconds", "twin_plant", "twin_xml", "verify",
]
