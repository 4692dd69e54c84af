"""The servo_tuner's `~/tune` action over DDS: feedback at least every 5 s while tuning, and a client's cancel
stops the play and gives the controller back its as-found gains bit for bit, logged at INFO, not ERROR."""

from __future__ import annotations

import math
import time

import pytest
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from sysid_ros_interfaces.action import Tune

from sysid_ros.demo import AS_FOUND, TuningRig
from sysid_ros.ros.client import send_goal, wait_for

pytestmark = [pytest.mark.ros, pytest.mark.slow]

FEEDBACK_PROMISE_S = 5.0


def test_tune_action_feedback_and_cancel_restores_the_gains(tmp_path):
    rig = TuningRig(tmp_path, real_time_factor=3.0)
    try:
        client = ActionClient(rig.client.node, Tune, "servo_tuner/tune")
        assert client.wait_for_server(timeout_sec=60.0)
        goal, feedback = send_goal(client, Tune.Goal())
        assert goal.accepted
        result = goal.get_result_async()
        # cancel in the middle of a play after the first one ended (a stage and a plan known, motion done)
        # and only once five feedbacks came (the first play can end within a second at 3x real time: two
        # feedbacks then say nothing about their period)
        mid = wait_for(
            lambda: (
                len(feedback) >= 5
                and next((f for _, f in reversed(feedback) if f.plays >= 1 and f.stage == "identify"), None)
            ),
            600.0,
            "the first play to end, an identification tape to start and five feedbacks",
        )
        planned = next(f for _, f in feedback if f.stage not in ("reading the gains", "starting")).seconds_left
        assert mid.play and 0 < mid.seconds_left <= planned  # the motion done comes off the plan
        assert math.isnan(mid.cost_so_far)  # identification plays are not scored
        cancelled_at = time.monotonic()
        cancel = goal.cancel_goal_async()
        wait_for(lambda: cancel.done(), 60.0, "the cancel to be answered")
        assert cancel.result().goals_canceling, "the tuner did not accept the cancel"
        done = wait_for(lambda: result.result() if result.done() else None, 300.0, "the cancelled tune to end")
        assert done.status == GoalStatus.STATUS_CANCELED, done.result.message
        assert not done.result.success and "cancelled by request" in done.result.message
        assert rig.gains() == AS_FOUND  # the trial gains are gone: as found, bit for bit
        times = [t for t, _ in feedback]
        gaps = [b - a for a, b in zip(times, times[1:])]
        print(
            f"{len(feedback)} feedbacks, largest gap {max(gaps):.2f} s; result "
            f"{time.monotonic() - cancelled_at:.1f} s "
            f"after the cancel"
        )
        assert len(feedback) >= 5 and max(gaps) <= FEEDBACK_PROMISE_S
        log = rig.tuner.log()
        lines = [line for line in log.splitlines() if "cancel" in line]
        assert lines and not any("[ERROR]" in line for line in lines), lines
        assert any("[INFO]" in line and "cancelled by request" in line for line in lines), lines
        assert not any("[ERROR]" in line and "cancelled" in line for line in rig.recorder.log().splitlines())
    finally:
        rig.close()
