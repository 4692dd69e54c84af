"""How a Tune goal ends, over DDS, as `sysid-ros tune` and an action client see it.

- A cancel through the tuner's `~/cancel` service while `sysid-ros tune` waits: the goal is aborted (the action
  accepted no cancel) with the tuner's message naming who cancelled; the CLI says so in one line and exits 1
  (it printed an empty line: the tuner's `canceled()` from EXECUTING raised, and rclpy aborted the goal with an
  empty result and a traceback in the tuner's log).
- `~/cancel` and, at once, the action's own cancel (a cancel arriving while the tune ends): the goal ends as
  what was accepted says, canceled when the action took the cancel, never a traceback; the gains as found.
- The tuner's process killed mid-tune: the CLI notices its node left the graph and says so in one line, instead
  of waiting its default 2 h in silence.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from sysid_ros_interfaces.action import Tune

from sysid_ros.demo import AS_FOUND, TuningRig
from sysid_ros.ros.client import send_goal, wait_for

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def tune_cli() -> tuple[subprocess.Popen, list[str]]:
    """`sysid-ros tune` against the rig (this test's DDS domain), its stdout lines gathered as they come."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sysid_ros.cli", "tune"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    proc.reader = reader  # the only reader of stdout (communicate() would race it): `finished` waits for it
    return proc, lines


def finished(proc: subprocess.Popen, timeout_s: float) -> str:
    """Wait for the CLI to exit and for its reader to take every stdout line; its stderr."""
    proc.wait(timeout=timeout_s)
    proc.reader.join(timeout=60)
    return proc.stderr.read()


def playing(lines: list[str]) -> bool:
    """A feedback line past the start: the tune is moving the robot."""
    return any(line.strip().startswith(("identify", "sweep", "refine", "verify")) for line in lines)


def no_goal_state_traceback(log: str) -> None:
    assert "Failed to update goal state" not in log and "Traceback" not in log, log[-3000:]


def test_cancel_through_the_service_while_the_cli_waits(tmp_path):
    rig = TuningRig(tmp_path, real_time_factor=3.0)
    try:
        proc, lines = tune_cli()
        wait_for(lambda: playing(lines), 600.0, "the CLI's tune to start playing")
        response = rig.call("cancel")
        assert response.success, response.message
        err = finished(proc, 600)
        out = "".join(lines)
        assert proc.returncode == 1, (out, err)
        ended = next(line for line in lines if line.startswith("tune "))
        assert ended.startswith("tune aborted: tune cancelled by request") and "(through ~/cancel)" in ended, out
        assert "the controller has its gains from before" in ended
        assert rig.gains() == AS_FOUND
        no_goal_state_traceback(rig.tuner.log())
    finally:
        rig.close()


def test_service_cancel_then_action_cancel_ends_as_accepted(tmp_path):
    rig = TuningRig(tmp_path, real_time_factor=3.0)
    try:
        client = ActionClient(rig.client.node, Tune, "servo_tuner/tune")
        assert client.wait_for_server(timeout_sec=60.0)
        goal, feedback = send_goal(client, Tune.Goal())
        assert goal.accepted
        result = goal.get_result_async()
        wait_for(lambda: any(f.plays >= 1 for _, f in feedback), 600.0, "the first play")
        assert rig.call("cancel").success  # the tune starts to end: the play stops, the gains come back
        cancel = goal.cancel_goal_async()
        wait_for(lambda: cancel.done(), 60.0, "the action's cancel to be answered")
        done = wait_for(lambda: result.result() if result.done() else None, 300.0, "the tune to end")
        accepted = bool(cancel.result().goals_canceling)
        expected = GoalStatus.STATUS_CANCELED if accepted else GoalStatus.STATUS_ABORTED
        print(f"action cancel accepted: {accepted}; status {done.status}; {done.result.message}")
        assert done.status == expected, (accepted, done.status, done.result.message)
        assert not done.result.success and "cancelled by request" in done.result.message
        assert rig.gains() == AS_FOUND
        no_goal_state_traceback(rig.tuner.log())
    finally:
        rig.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_cli_notices_the_tuner_vanish(tmp_path, sig):
    """A tuner that exits leaves the graph at once; a killed one when its DDS lease runs out (Fast DDS: 20 s)."""
    rig = TuningRig(tmp_path, real_time_factor=3.0)
    try:
        proc, lines = tune_cli()
        wait_for(lambda: playing(lines), 600.0, "the CLI's tune to start playing")
        killed = time.monotonic()
        rig.tuner.proc.send_signal(sig)
        err = finished(proc, 300)
        print(f"tuner given {sig.name}: the CLI ended {time.monotonic() - killed:.1f} s later")
        assert proc.returncode == 2, ("".join(lines), err)
        assert len(err.strip().splitlines()) == 1 and "/servo_tuner vanished mid-tune" in err, err
    finally:
        rig.close()
