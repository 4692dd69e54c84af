"""TuneProgress, what the tune action's feedback says: the stage of each tape, seconds of motion left by the plan,
and the cost so far relative to the as-found play of the same tape, on the SimPlant shoulder."""

from __future__ import annotations

import math

from support.tuner_joints import shoulder
from sysid_ros.core.tuner import Controller, DriveGains, Goal, TuneProgress, stage_tapes, tuning_plan_seconds


def test_stage_plan_and_cost_so_far_follow_the_plays():
    joint = shoulder(gains=DriveGains(200.0, 20.0))  # soft factory gains: stiffer ones track the same tape better
    servo, plant, goal = joint.servo, joint.plant, Goal()
    progress = TuneProgress.plan([servo], plant.command_rate_hz, goal)
    assert progress.planned_s == sum(tuning_plan_seconds(servo, plant.command_rate_hz, goal).values())
    assert progress.stage == "starting" and math.isnan(progress.cost_so_far)
    tapes = stage_tapes(servo, plant.command_rate_hz, goal)
    ident, refine = tapes["identify"][0], tapes["refine"][0]
    progress.starting(ident.name)
    assert progress.stage == "identify"
    progress.played(ident.name, {"shoulder": plant.play(ident, Controller(servo.gains))}, plant.motion_s)
    assert math.isnan(progress.cost_so_far)  # identification plays are not scored
    progress.starting("move_to_start")
    assert progress.stage == "identify" and progress.play == "move_to_start"  # a move keeps its stage
    for gains in (servo.gains, DriveGains(800.0, 80.0)):  # the as-found play of the tape first, then a candidate
        progress.starting(refine.name)
        progress.played(refine.name, {"shoulder": plant.play(refine, Controller(gains))}, plant.motion_s)
    assert progress.stage == "refine" and progress.plays == 3
    assert 0.0 < progress.cost_so_far < 1.0  # the stiffer candidate beat the as-found run on the same tape
    assert progress.seconds_left == max(progress.planned_s - plant.motion_s, 0.0) < progress.planned_s
