"""Every node's parameters come from one table: ranges and choices refused at set time, start-up values checked at
configure (a set-parameters callback never sees them), read-only ones fixed, configure-time ones refused while
configured. Real rclpy nodes in this process (the parameter services over DDS: test_lifecycle_manager.py)."""

from __future__ import annotations

import math

import pytest
import rclpy
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter

from sysid_ros.demo import TUNE_ENVELOPE
from sysid_ros.nodes.identifier import IdentifierNode
from sysid_ros.nodes.lifecycle_manager import LifecycleManagerNode
from sysid_ros.nodes.online_estimator import OnlineEstimatorNode
from sysid_ros.nodes.servo_tuner import ServoTunerNode
from sysid_ros.nodes.sim_robot import SimRobotNode
from sysid_ros.nodes.tape_recorder import TapeRecorderNode

pytestmark = pytest.mark.ros


@pytest.fixture
def context():
    context = rclpy.Context()
    rclpy.init(context=context, args=[])
    yield context
    rclpy.try_shutdown(context=context)


def make(cls, context, **values):
    return cls(context=context, parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])


def refused(node, **values) -> list[str]:
    return [
        r.reason for r in node.set_parameters([Parameter(k, value=v) for k, v in values.items()]) if not r.successful
    ]


def test_servo_tuner_refuses_a_guard_that_guards_nothing(context, tmp_path):
    base = {
        "joints": ["hinge"],
        "model": "pendulum",
        "controller_timeout_s": 0.5,
        "output_dir": str(tmp_path),
        **TUNE_ENVELOPE,
    }
    tuner = make(ServoTunerNode, context, **base)
    # at set time: NaN and negative guards, a negative or NaN rate (issue 27: all were accepted)
    assert len(refused(tuner, **{"guard.p_max": math.nan})) == 1
    assert len(refused(tuner, **{"guard.d_max": -1.0})) == 1
    assert len(refused(tuner, command_rate_hz=-1.0)) == 1 and len(refused(tuner, command_rate_hz=math.nan)) == 1
    assert "one of" in refused(tuner, controller_style="velocity_pid")[0]
    assert "read-only" in refused(tuner, joints=["elbow"])[0]
    assert tuner.get_parameter("guard.p_max").value == 1e5  # unchanged
    tuner.destroy_node()
    # at start-up: the node comes up (never a crash), and configure fails naming each bad value
    bad = make(
        ServoTunerNode, context, **{**base, "guard.p_max": math.nan, "guard.d_max": -1.0, "command_rate_hz": math.nan}
    )
    assert bad.trigger_configure() == TransitionCallbackReturn.FAILURE
    with pytest.raises(ValueError) as why:
        bad.parameters.check()
    assert all(f"{name} must be in" in str(why.value) for name in ("guard.p_max", "guard.d_max", "command_rate_hz"))
    # a good value set afterwards replaces the refused start-up one
    assert not refused(bad, **{"guard.p_max": 500.0, "guard.d_max": 20.0, "command_rate_hz": 250.0})
    bad.parameters.check()
    bad.destroy_node()


def test_recorder_refuses_at_set_time_what_it_would_not_enforce(context, tmp_path):
    recorder = make(TapeRecorderNode, context, joints=["hinge"], output_dir=str(tmp_path), **TUNE_ENVELOPE)
    assert refused(recorder, **{"envelope.hinge.travel_rad": 50.0})  # out of bounds, even before configure
    assert refused(recorder, **{"envelope.hinge.travel_rad": math.nan})  # an envelope once given cannot be unset
    assert not refused(recorder, **{"envelope.hinge.travel_rad": 0.3})
    assert recorder.trigger_configure() == TransitionCallbackReturn.SUCCESS
    # configured: what configure read is refused (it would be reported, not enforced); the tape choice is live
    assert "read at configure" in refused(recorder, **{"envelope.hinge.travel_rad": 0.2})[0]
    assert "read at configure" in refused(recorder, **{"safety.stale_after_s": 1.0})[0]
    assert "read at configure" in refused(recorder, command_mode="trajectory")[0]
    assert not refused(recorder, **{"tape.kind": "steps", "tape.seed": 4})
    assert "one of" in refused(recorder, **{"tape.kind": "wiggle"})[0]
    assert recorder.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    assert not refused(recorder, **{"envelope.hinge.travel_rad": 0.2})  # after clean-up: set, configure again
    recorder.destroy_node()


def test_other_nodes_start_up_values_are_checked(context):
    estimator = make(OnlineEstimatorNode, context, horizon_s=-2.0)
    assert estimator.trigger_configure() == TransitionCallbackReturn.FAILURE
    assert "horizon_s must be in" in str(pytest.raises(ValueError, estimator.parameters.check).value)
    renamed = make(OnlineEstimatorNode, context, window_s=2.0)  # the old name: refused, naming the new one
    assert renamed.trigger_configure() == TransitionCallbackReturn.FAILURE
    assert (
        str(pytest.raises(ValueError, renamed.parameters.check).value)
        == "start-up value refused: window_s is renamed horizon_s"
    )
    renamed.destroy_node()
    identifier = make(IdentifierNode, context, control="torque")
    assert "control must be one of" in str(pytest.raises(ValueError, identifier.parameters.check).value)
    sim = make(SimRobotNode, context, **{"noise.position_rad": -1.0})
    assert sim.robot is None and "noise.position_rad must be in" in sim._fatal  # up, saying why
    manager = make(LifecycleManagerNode, context, heartbeat_period_s=0.0, node_names=["tape_recorder"])
    assert manager.bring_up() == (False, manager.refusal) and "heartbeat_period_s must be in" in manager.refusal
    for node in (estimator, identifier, sim, manager):
        node.destroy_node()
