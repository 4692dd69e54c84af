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

from .. import front_door
from .fine_tune import fine_tune as fine_tune  # a submodule's name: imported now
from .proposal import proposal as proposal  # a submodule's name: imported now

EXPORTS = {
    "AnalyticStart": ".stages.analytic",
    "Arm": ".plants.arm",
    "ArmPlant": ".plants.arm",
    "ArmResult": ".whole_arm",
    "ArmRound": ".whole_arm",
    "BOX_TERMS_WITH_ARM_MODEL": ".plants.arm",
    "CanaryVerdict": ".canary",
    "Candidate": ".stages.refine",
    "Controller": ".servo",
    "DriveGains": ".servo",
    "FineTuneResult": ".fine_tune",
    "GainProposal": ".proposal",
    "Goal": ".servo",
    "HOLD_S": ".plants.at_rest",
    "Identification": ".stages.identification",
    "JointInArm": ".plants.arm",
    "JointOutcome": ".whole_arm",
    "Log": ".fine_tune",
    "Loop": ".servo",
    "MAX_ROUNDS": ".whole_arm",
    "Plant": ".plants.joint",
    "RefineResult": ".stages.refine",
    "RestWatch": ".plants.at_rest",
    "Rung": ".stages.sweep",
    "SPEED_FRAC": ".plants.at_rest",
    "Score": ".scoring",
    "Servo": ".servo",
    "SimPlant": ".plants.joint",
    "SweepLimits": ".scoring",
    "SweepResult": ".stages.sweep",
    "TUNED_GAINS": ".proposal",
    "Telemetry": ".plants.joint",
    "TuneProgress": ".progress",
    "TuneResult": ".pipeline",
    "Verified": ".stages.verify",
    "VerifyResult": ".stages.verify",
    "analytic_start": ".stages.analytic",
    "arm_check_tapes": ".whole_arm",
    "canary_threshold": ".canary",
    "cost": ".scoring",
    "eased": ".stages.sweep",
    "feedforward_from": ".servo",
    "fit_model": ".stages.identification",
    "from_arm": ".proposal",
    "from_tune": ".proposal",
    "gain_parameters": ".proposal",
    "gains_for": ".servo",
    "gains_from_proposal": ".proposal",
    "gate_failures": ".scoring",
    "honours_feedforward": ".feedforward_check",
    "identify_servo": ".stages.identification",
    "inverse_dynamics": ".plants.arm",
    "judge_canary": ".canary",
    "learn_feedforward": ".fine_tune",
    "limits_from": ".stages.sweep",
    "load_proposal": ".proposal",
    "loop_of": ".servo",
    "nominal_model": ".plants.arm",
    "outcome_of": ".whole_arm",
    "proposal_target": ".proposal",
    "proven_parameters": ".proposal",
    "run_sweep": ".stages.sweep",
    "sag_floor_kp": ".stages.identification",
    "score": ".scoring",
    "stage_tapes": ".pipeline",
    "to_pid_gains": ".servo",
    "to_yaml": ".proposal",
    "tune": ".pipeline",
    "tune_arm": ".whole_arm",
    "tuning_plan_seconds": ".pipeline",
    "twin_plant": ".plants.joint",
    "twin_xml": ".plants.joint",
    "verify": ".stages.verify",
}
"""Name -> the module that defines it, imported on first use (callers pay only for what they use)."""

__getattr__, __dir__, __all__ = front_door(
    __name__,
    EXPORTS,
    eager=(
        "fine_tune",
        "proposal",
    ),
)
