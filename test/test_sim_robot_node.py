"""sim_robot over DDS: the node runs in its own process, this test talks to it like any ROS 2 client."""

from __future__ import annotations

import math

import numpy as np
import pytest
from builtin_interfaces.msg import Duration
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from sysid_ros.ros.client import stamp_ns, wait_for

pytestmark = pytest.mark.ros

RTF = 2.0  # simulated seconds per wall second in these tests (1000 joint states per wall second)


@pytest.fixture
def probe(client):
    return client


@pytest.fixture
def start_sim(nodes):
    def start(name: str = "sim_robot", **params):
        return nodes("sim_robot", name, {"use_sim_time": True, "real_time_factor": RTF, **params})

    return start


def states_after(received: list, count: int, t0_ns: int = 0) -> list:
    """Wait until `count` joint states stamped after `t0_ns` arrived; return them."""

    def enough():
        if len(received) < count:
            return None
        after = [m for m in received if stamp_ns(m) > t0_ns]
        return after if len(after) >= count else None

    return wait_for(enough, what=f"{count} joint states")[:count]


def errors(diagnostics: list) -> list[str]:
    return [s.message for a in diagnostics for s in a.status if s.level == DiagnosticStatus.ERROR]


def test_rate_completeness_and_noise(probe, start_sim):
    sim = start_sim(
        **{
            "noise.position_rad": 0.001,
            "noise.velocity_rad_s": 0.01,
            "publish_rate_hz": 500.0,
            "physics.hinge.frictionloss": 0.5,
        }
    )
    states = states_after(probe.collect(JointState, "/joint_states"), 2000)
    stamps = np.array([stamp_ns(m) for m in states])
    # Completeness: every 2 ms sample is there, in order, none duplicated.
    assert np.all(np.diff(stamps) == 2_000_000), np.unique(np.diff(stamps))
    assert all(list(m.name) == ["hinge"] and len(m.position) == len(m.velocity) == len(m.effort) == 1 for m in states)
    # The pendulum hangs still (friction loss 0.5 N m holds it): what moves is the noise.
    q = np.array([m.position[0] for m in states])
    v = np.array([m.velocity[0] for m in states])
    # 2000 samples: the sample std is within 1/sqrt(2N) = 1.6 % of the truth (1 sigma); allow 8 % (5 sigma).
    assert abs(q.std() / 0.001 - 1) < 0.08, q.std()
    assert abs(v.std() / 0.01 - 1) < 0.08, v.std()
    assert abs(q.mean()) < 5 * 0.001 / math.sqrt(2000)
    assert sim.alive()


def test_encoder_quantization(probe, start_sim):
    start_sim(
        **{
            "noise.encoder_resolution_rad": 0.001,
            "initial_positions": [0.3],
            "physics.hinge.damping": 0.0,
            "physics.hinge.frictionloss": 0.0,
        }
    )  # swings for ever
    states = states_after(probe.collect(JointState, "/joint_states"), 300)
    q = np.array([m.position[0] for m in states])
    assert np.allclose(q / 0.001, np.round(q / 0.001), atol=1e-6)
    assert len(np.unique(np.round(q / 0.001))) > 5  # it swings through many encoder counts


def test_free_period_matches_small_angle_theory(probe, start_sim):
    start_sim(**{"physics.hinge.damping": 0.0, "physics.hinge.frictionloss": 0.0, "initial_positions": [0.05]})
    states = states_after(probe.collect(JointState, "/joint_states"), 5000)  # 10 s of motion, 7 periods
    stamps = np.array([stamp_ns(m) for m in states])
    t, q = stamps * 1e-9, np.array([m.position[0] for m in states])
    up = np.flatnonzero((q[:-1] < 0) & (q[1:] >= 0))
    crossings = t[up] - q[up] * (t[up + 1] - t[up]) / (q[up + 1] - q[up])
    # A period counts only when no sample between its two crossings was lost: a crossing lost in a gap (the
    # collecting process stalled) joins two periods into one interval, and the mean was 7/6 of the truth.
    gaps = np.flatnonzero(np.diff(stamps) != 2_000_000)
    whole = np.searchsorted(gaps, up[1:], "right") == np.searchsorted(gaps, up[:-1], "left")
    periods = np.diff(crossings)[whole]
    inertia = 1.3 * 0.5**2 + 1e-4 + 1e-6  # point mass, armature, the bob's own inertia
    analytic = 2 * math.pi * math.sqrt(inertia / (1.3 * 9.81 * 0.5)) * (1 + 0.05**2 / 16)
    assert len(periods) >= 5, f"{len(periods)} whole periods; samples lost after {stamps[gaps].tolist()} ns"
    assert np.mean(periods) == pytest.approx(analytic, rel=1e-3)


def test_trajectory_tracked_and_gain_change_live(probe, start_sim):
    start_sim(
        **{
            "model": "arm3",
            "physics.shoulder.frictionloss": 0.0,
            "physics.elbow.frictionloss": 0.0,
            "physics.wrist.frictionloss": 0.0,
            "gains.shoulder.p": 300.0,
            "gains.shoulder.d": 20.0,
            "gains.shoulder.ff_velocity_scale": 0.5,
            "gains.shoulder.i": 1500.0,
            "gains.shoulder.i_clamp": 40.0,
            "gains.elbow.p": 150.0,
            "gains.elbow.d": 8.0,
            "gains.elbow.ff_velocity_scale": 0.3,
            "gains.elbow.i": 600.0,
            "gains.elbow.i_clamp": 20.0,
            "gains.wrist.p": 20.0,
            "gains.wrist.d": 0.5,
        }
    )
    received = probe.collect(JointState, "/joint_states")
    pub = probe.publisher(JointTrajectory, "/joint_trajectory_controller/joint_trajectory")
    probe.wait_for_subscribers(pub)
    first = states_after(received, 1)[0]
    target = [0.4, -0.6, 0.3]
    goal = JointTrajectory(joint_names=["wrist", "shoulder", "elbow"])  # any order, as ros2_control allows
    goal.points = [
        JointTrajectoryPoint(
            positions=[target[2], target[0], target[1]], velocities=[0.0, 0.0, 0.0], time_from_start=Duration(sec=2)
        )
    ]
    pub.publish(goal)
    t_goal = stamp_ns(first)
    settled = lambda: [m for m in received if stamp_ns(m) > t_goal + 4_000_000_000]  # noqa: E731
    wait_for(settled, what="4 s of motion")
    last = settled()[0]
    by_name = dict(zip(last.name, last.position))
    # Integral action brings shoulder and elbow onto the target; the P-only wrist sags by gravity torque / p.
    assert by_name["shoulder"] == pytest.approx(0.4, abs=0.005)
    assert by_name["elbow"] == pytest.approx(-0.6, abs=0.005)
    wrist_error_soft = abs(by_name["wrist"] - 0.3)
    assert 0.005 < wrist_error_soft < 0.1
    # A stiffer wrist, live: the static error under gravity shrinks by about the gain ratio.
    result = probe.set_parameters("sim_robot", {"gains.wrist.p": 80.0, "gains.wrist.d": 1.5})
    assert all(r.successful for r in result)
    t_set = stamp_ns(received[-1])
    later = lambda: [m for m in received if stamp_ns(m) > t_set + 3_000_000_000]  # noqa: E731
    wait_for(later, what="3 s after the gain change")
    wrist_error_stiff = abs(dict(zip(later()[0].name, later()[0].position))["wrist"] - 0.3)
    assert wrist_error_stiff == pytest.approx(wrist_error_soft * 20 / 80, rel=0.15)


def test_invalid_gains_rejected_with_reason(probe, start_sim):
    start_sim(**{"gains.hinge.p": 10.0, "gain_guard.p_max": 100.0})
    wait_for(lambda: probe.node.count_publishers("/joint_states") > 0, what="sim_robot")
    for bad in (-1.0, float("nan"), float("inf"), 500.0):
        [result] = probe.set_parameters("sim_robot", {"gains.hinge.p": bad})
        # refused with its reason: the descriptor's range (-1, 500 beyond the guard) or the guard's own check
        assert not result.successful and ("gain p" in result.reason or "gains.hinge.p out of range" in result.reason), (
            result.reason
        )
    # set_parameters (not atomic) takes the good values of a batch and refuses the bad one.
    results = probe.set_parameters("sim_robot", {"gains.hinge.d": 1.0, "gains.hinge.p": float("nan")})
    assert [r.successful for r in results] == [True, False]
    assert probe.get_parameters("sim_robot", ["gains.hinge.p", "gains.hinge.d"]) == [10.0, 1.0]


def test_bad_commands_are_ignored_and_reported(probe, start_sim):
    sim = start_sim(**{"initial_positions": [0.2], "gains.hinge.p": 50.0, "gains.hinge.d": 3.0})
    received = probe.collect(JointState, "/joint_states")
    first = states_after(received, 1)[0]
    settled = wait_for(
        lambda: stamp_ns(received[-1]) > stamp_ns(first) + 3_000_000_000 and received[-1], what="the drive to settle"
    )  # it holds the start position against gravity
    diagnostics = probe.collect(DiagnosticArray, "/diagnostics", 50)
    forward = probe.publisher(Float64MultiArray, "/forward_command_controller/commands")
    trajectory = probe.publisher(JointTrajectory, "/joint_trajectory_controller/joint_trajectory")
    probe.wait_for_subscribers(forward)
    probe.wait_for_subscribers(trajectory)
    bad = [
        Float64MultiArray(data=[float("nan")]),
        Float64MultiArray(data=[1.0, 2.0]),
        Float64MultiArray(data=[float("inf")]),
    ]
    for msg in bad:
        forward.publish(msg)
    unknown = JointTrajectory(joint_names=["elbow"])
    unknown.points = [JointTrajectoryPoint(positions=[0.1], time_from_start=Duration(sec=1))]
    short = JointTrajectory(joint_names=["hinge"])
    short.points = [JointTrajectoryPoint(positions=[0.1, 0.2], time_from_start=Duration(sec=1))]
    nan_point = JointTrajectory(joint_names=["hinge"])
    nan_point.points = [JointTrajectoryPoint(positions=[float("nan")], time_from_start=Duration(sec=1))]
    for msg in (unknown, short, nan_point, JointTrajectory(joint_names=["hinge"])):
        trajectory.publish(msg)
    messages = wait_for(
        lambda: (lambda e: e if len(e) >= 7 else None)(errors(diagnostics)), what="seven error diagnostics"
    )
    text = "\n".join(messages)
    assert "not finite" in text and "1 values" not in text and "2 values, expected 1" in text
    assert "unknown joints ['elbow']" in text and "2 positions for 1 joints" in text and "no points" in text
    # Nothing reached the physics: the pendulum is still held where it was.
    t_now = stamp_ns(received[-1])
    wait_for(lambda: stamp_ns(received[-1]) > t_now + 500_000_000, what="more joint states")
    assert received[-1].position[0] == pytest.approx(settled.position[0], abs=1e-4)
    assert sim.alive()


def test_missing_model_reports_and_stays_up(probe, start_sim, tmp_path):
    sim = start_sim(model=str(tmp_path / "no_such_robot.xml"))
    diagnostics = probe.collect(DiagnosticArray, "/diagnostics", 10)
    messages = wait_for(lambda: errors(diagnostics), what="an error diagnostic")
    assert "model not found" in messages[0] and "no_such_robot.xml" in messages[0]
    assert sim.alive()


def test_pause_freezes_time_and_faster_than_real_time(probe, start_sim):
    import time

    start_sim(real_time_factor=3.0)
    received = probe.collect(JointState, "/joint_states")
    wait_for(lambda: len(received) > 10, what="joint states")
    wall0, sim0 = time.monotonic(), stamp_ns(received[-1])
    wait_for(lambda: stamp_ns(received[-1]) - sim0 > 5_000_000_000, what="5 simulated seconds")
    # Sim time outruns wall time (asked for 3x; a loaded machine slows it, not below 1.2x here).
    assert 5.0 / (time.monotonic() - wall0) > 1.2
    paused = probe.call(SetBool, "/sim_robot/pause", SetBool.Request(data=True))
    paused_at = int(paused.message.split()[-2])
    time.sleep(1.0)  # the stimulus: the robot stays paused for a wall second
    seen_while_paused = list(received)
    resumed = probe.call(SetBool, "/sim_robot/pause", SetBool.Request(data=False))
    assert int(resumed.message.split()[-2]) == paused_at  # simulated time stood still
    assert max(stamp_ns(m) for m in seen_while_paused) <= paused_at  # and nothing new was published
    count = len(received)
    wait_for(lambda: len(received) > count + 100, what="feedback after resuming")
    stamps = np.array([stamp_ns(m) for m in received])
    gaps = np.flatnonzero(np.diff(stamps) != 2_000_000)
    assert len(gaps) == 0, [(stamps[g], stamps[g + 1], paused_at) for g in gaps]  # each stamp once, none skipped
