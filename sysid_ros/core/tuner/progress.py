"""What a running tune has done so far, for feedback: its stage, the play, seconds of motion left, cost so far."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .pipeline import stage_tapes, tuning_plan_seconds
from .plants.joint import Telemetry
from .scoring import Score, cost, score
from .servo import Goal, Servo

SCORED_STAGES = ("refine", "verify")


@dataclass
class TuneProgress:
    """Follows the plays of a tune. `seconds_left` is the plan's worst case minus the motion so far (never
    below 0); `cost_so_far` is the lowest cost of a refine or verify play relative to the first play of the
    same tape (the as-found run: 1.0 = as found, lower is better), averaged over the joints; NaN before one."""

    stages: dict[str, str]
    planned_s: float
    allocation_mrad: float
    stage: str = "starting"
    play: str = ""
    plays: int = 0
    motion_s: float = 0.0
    cost_so_far: float = math.nan
    _first: dict[tuple[str, str], Score] = field(default_factory=dict)

    @classmethod
    def plan(cls, servos: Sequence[Servo], command_rate_hz: float, goal: Goal) -> TuneProgress:
        """The stages of each tape and the worst-case seconds of motion of tuning `servos` one by one."""
        stages: dict[str, str] = {}
        planned = 0.0
        for servo in servos:
            for stage, tapes in stage_tapes(servo, command_rate_hz, goal, servo.priors).items():
                stages.update({tape.name: stage for tape in tapes})
            planned += sum(tuning_plan_seconds(servo, command_rate_hz, goal).values())
        return cls(stages, planned, goal.stop_allocation_mrad)

    @property
    def seconds_left(self) -> float:
        return max(self.planned_s - self.motion_s, 0.0)

    def starting(self, tape: str) -> None:
        """A play of `tape` starts (a move to a tape's start keeps the stage it serves)."""
        self.play = tape
        self.stage = self.stages.get(tape, self.stage)

    def played(self, tape: str, telemetry: Mapping[str, Telemetry], motion_s: float) -> None:
        """A play of `tape` ended with `telemetry` per joint; the plant's motion so far is `motion_s`."""
        self.plays += 1
        self.motion_s = motion_s
        if self.stages.get(tape) not in SCORED_STAGES:
            return
        costs = []
        for joint, tel in telemetry.items():
            now = score([tel])
            first = self._first.setdefault((joint, tape), now)
            base = cost(first, first, self.allocation_mrad)
            if now is not first and base > 0:
                costs.append(cost(now, first, self.allocation_mrad) / base)
        if costs and all(math.isfinite(c) for c in costs):
            mean = sum(costs) / len(costs)
            self.cost_so_far = mean if math.isnan(self.cost_so_far) else min(self.cost_so_far, mean)
