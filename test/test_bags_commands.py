"""Command topics: Float64MultiArray in the configured joint order, effort commands, and JointTrajectory
expanded like ros2_control's joint trajectory controller; all on the feedback's time base."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.interpolate import CubicHermiteSpline

from support.bags import F64, JS, T0_NS, TRAJ, float64_array, joint_state, trajectory, write_bag
from sysid_ros.core.bags import (
    BagWriter,
    read_array_commands,
    read_commands,
    read_joint_states,
    read_recording,
    read_trajectory,
)
from sysid_ros.core.errors import ConfigError, DataError

STORAGES = ("mcap", "sqlite3")
MS = 1_000_000
S = 1_000_000_000


@pytest.mark.parametrize("storage", STORAGES)
def test_float64_multiarray_in_configured_order(tmp_path, storage):
    msgs = [
        ("/forward_position_controller/commands", F64, T0_NS + i * 10 * MS, float64_array([i, -i, 0.5 * i]))
        for i in range(30)
    ]
    bag = write_bag(tmp_path / "bag", msgs, storage)
    cmd = read_commands(bag, "/forward_position_controller/commands", joint_names=["c", "a", "b"])
    assert cmd.interface == "position" and cmd.joint_names == ("c", "a", "b")
    np.testing.assert_array_equal(cmd.time_ns, T0_NS + np.arange(30) * 10 * MS)
    np.testing.assert_array_equal(cmd.values[:, 1], -np.arange(30))
    # Held between messages, compared in integers.
    held = cmd.held_at(np.array([T0_NS + 10 * MS - 1, T0_NS + 10 * MS]))
    np.testing.assert_array_equal(held[:, 0], [0, 1])
    with pytest.raises(
        DataError,
        match=r"3 values for 2 configured joints.*topic=/forward_position_controller/commands"
        rf".*record_ns={T0_NS}",
    ):
        read_commands(bag, "/forward_position_controller/commands", joint_names=["a", "b"])
    with pytest.raises(ConfigError, match="joint_names"):
        read_commands(bag, "/forward_position_controller/commands")


@pytest.mark.parametrize("storage", STORAGES)
def test_effort_commands(tmp_path, storage):
    msgs = [
        ("/effort_controller/commands", F64, T0_NS + i * 2 * MS, float64_array([np.sin(i), 2.0])) for i in range(50)
    ]
    msgs += [("/custom/cmd", F64, T0_NS + i * 2 * MS, float64_array([1.0, 2.0])) for i in range(5)]
    bag = write_bag(tmp_path / "bag", msgs, storage)
    cmd = read_array_commands(bag, "/effort_controller/commands", joint_names=["j1", "j2"])
    assert cmd.interface == "effort"
    np.testing.assert_array_equal(cmd.values[:, 0], np.sin(np.arange(50)))
    with pytest.raises(ConfigError, match="interface"):
        read_array_commands(bag, "/custom/cmd", joint_names=["j1", "j2"])
    assert (
        read_array_commands(bag, "/custom/cmd", joint_names=["j1", "j2"], interface="velocity").interface == "velocity"
    )


def _feedback(t_ns, names, q):
    return ("/joint_states", JS, t_ns, joint_state(t_ns, names, q))


@pytest.mark.parametrize("storage", STORAGES)
def test_trajectory_linear_without_velocities(tmp_path, storage):
    """Stamp 0: starts when received; ramps from the measured state to the first point; holds the last."""
    r = T0_NS + 100 * MS
    msgs = [_feedback(T0_NS + i * 10 * MS, ["a", "b"], [0.2, -1.0]) for i in range(40)]
    msgs.append(
        (
            "/jtc/joint_trajectory",
            TRAJ,
            r,
            trajectory(0, ["b", "a"], [(0.5, [1.0, 2.0], None), (1.0, [3.0, 4.0], None)]),
        )
    )
    bag = write_bag(tmp_path / "bag", sorted(msgs, key=lambda m: m[2]), storage)
    fb = read_joint_states(bag)
    sp = read_trajectory(
        bag,
        "/jtc/joint_trajectory",
        joint_names=["a", "b"],
        time_base=fb.timing.time_base,
        initial_positions=fb.samples,
        setpoint_period_s=0.01,
    )
    q = sp.position
    assert q.joint_names == ("a", "b") and q.time_ns[0] == r
    at = lambda dt_s: q.held_at(np.array([r + int(dt_s * S)]))[0]  # noqa: E731
    np.testing.assert_allclose(at(0.0), [0.2, -1.0], atol=1e-12)
    np.testing.assert_allclose(at(0.25), [0.2 + 0.5 * (2.0 - 0.2), -1.0 + 0.5 * (1.0 + 1.0)], atol=1e-12)
    np.testing.assert_allclose(at(0.75), [3.0, 2.0], atol=1e-12)
    np.testing.assert_allclose(at(5.0), [4.0, 3.0], atol=1e-12)
    np.testing.assert_allclose(sp.velocity.held_at(np.array([r + 600 * MS]))[0], [4.0, 4.0], atol=1e-9)


@pytest.mark.parametrize("storage", STORAGES)
def test_trajectory_cubic_hermite_with_velocities_and_future_stamp(tmp_path, storage):
    r = T0_NS
    start = r + 200 * MS  # header stamp 0.2 s after receipt: the controller waits, then follows
    pts = [(0.0, [0.0], [0.0]), (0.4, [1.0], [2.0]), (1.0, [0.5], [0.0])]
    bag = write_bag(tmp_path / "bag", [("/traj", TRAJ, r, trajectory(start, ["j"], pts))], storage)
    sp = read_trajectory(bag, "/traj", setpoint_period_s=0.002)
    knots_s = [0.2, 0.6, 1.2]  # since receipt
    ref = CubicHermiteSpline(knots_s, [0.0, 1.0, 0.5], [0.0, 2.0, 0.0])
    t_s = (sp.position.time_ns - r) * 1e-9
    inside = (t_s >= 0.2) & (t_s <= 1.2)
    # Same formula, float64 arithmetic on ns-derived times: agreement to rounding (1e-12).
    np.testing.assert_allclose(sp.position.values[inside, 0], ref(t_s[inside]), atol=1e-12)
    np.testing.assert_allclose(sp.velocity.values[inside, 0], ref(t_s[inside], 1), atol=1e-9)
    assert np.all(sp.position.values[t_s < 0.2, 0] == 0.0)  # holds the first point until it is due
    assert sp.position.time_ns[-1] == start + S


@pytest.mark.parametrize("storage", STORAGES)
def test_trajectory_preemption_and_partial_joints(tmp_path, storage):
    r1, r2 = T0_NS, T0_NS + 500 * MS
    t1 = trajectory(0, ["a", "b"], [(1.0, [1.0, 10.0], None)])
    t2 = trajectory(0, ["a"], [(0.5, [0.0], None)])  # names only a: b keeps its setpoint
    bag = write_bag(tmp_path / "bag", [("/t", TRAJ, r1, t1), ("/t", TRAJ, r2, t2)], storage)
    q = read_trajectory(bag, "/t", joint_names=["a", "b"], initial_positions=None, setpoint_period_s=0.01).position
    # Without a measured start, trajectory 1 holds its point until due; then trajectory 2 starts from there.
    at = lambda t: q.held_at(np.array([t]))[0]  # noqa: E731
    np.testing.assert_allclose(at(r2 - 1), [1.0, 10.0])
    np.testing.assert_allclose(at(r2 + 250 * MS), [0.5, 10.0], atol=1e-12)
    np.testing.assert_allclose(at(r2 + 600 * MS), [0.0, 10.0], atol=1e-12)
    with pytest.raises(DataError, match="not in the configured joint_names.*topic=/t"):
        read_trajectory(bag, "/t", joint_names=["a"])


@pytest.mark.parametrize("storage", STORAGES)
def test_recording_aligns_headerless_commands_with_offset_feedback(tmp_path, storage):
    """Feedback stamped 2 minutes ahead of the recorder: commands (no header) are shifted by the same offset,
    so a command and the feedback recorded at the same instant share a time."""
    offset = 120 * S
    bag = tmp_path / "bag"
    with BagWriter(bag, storage=storage) as w:
        w.write_metadata({"joint_names": ["j2", "j1"]}, T0_NS)
        for i in range(100):
            t = T0_NS + i * 4 * MS
            w.write_message(
                "/joint_states", JS, t, joint_state(t + offset, ["j1", "j2"], [i * 0.01, 0.0], [], [i * 1.0, i * 2.0])
            )
            w.write_message("/effort_controller/commands", F64, t, float64_array([i * 2.0, i * 1.0]))
    rec = read_recording(bag)
    fb, cmd = rec.samples, rec.commands["/effort_controller/commands"]
    assert rec.feedback.timing.time_base.source == "header"
    assert cmd.joint_names == ("j2", "j1")  # controller order from the recorded metadata
    np.testing.assert_array_equal(cmd.time_ns, fb.time_ns)
    np.testing.assert_array_equal(cmd.values[:, 1], fb.effort[:, 0])  # j1 effort == j1 command, row by row
    rec_time = read_recording(bag, time_source="record")
    np.testing.assert_array_equal(rec_time.commands["/effort_controller/commands"].time_ns, rec_time.samples.time_ns)


@pytest.mark.parametrize("storage", STORAGES)
def test_trajectory_quintic_with_accelerations(tmp_path, storage):
    """Positions, velocities and accelerations: a quintic per segment (checked against scipy's BPoly)."""
    from scipy.interpolate import BPoly

    pts = [
        (0.3, [1.0, 0.0], [0.5, 0.0], [0.0, 1.0]),
        (0.8, [2.0, -1.0], [0.0, -2.0], [-3.0, 0.0]),
        (1.5, [0.0, 0.5], [0.0, 0.0], [0.0, 0.0]),
    ]
    r = T0_NS
    bag = write_bag(tmp_path / "bag", [("/traj", TRAJ, r, trajectory(0, ["a", "b"], pts))], storage)
    sp = read_trajectory(bag, "/traj", setpoint_period_s=0.001)
    t_s = (sp.position.time_ns - r) * 1e-9
    inside = (t_s >= 0.3) & (t_s <= 1.5)
    for j in range(2):
        ref = BPoly.from_derivatives([p[0] for p in pts], [[p[1][j], p[2][j], p[3][j]] for p in pts])
        # Same polynomial, different arithmetic: agreement to float rounding (1e-9 on O(1) values).
        np.testing.assert_allclose(sp.position.values[inside, j], ref(t_s[inside]), atol=1e-9)
        np.testing.assert_allclose(sp.velocity.values[inside, j], ref(t_s[inside], 1), atol=1e-8)


def test_recording_expands_trajectories_from_the_measured_state(tmp_path):
    bag = tmp_path / "bag"
    r = T0_NS + 200 * MS
    with BagWriter(bag) as w:
        for i in range(100):
            t = T0_NS + i * 5 * MS
            if t == r:
                w.write_message("/jtc/joint_trajectory", TRAJ, t, trajectory(0, ["b", "a"], [(0.2, [1.0, 1.0], None)]))
            w.write_message("/joint_states", JS, t, joint_state(t, ["a", "b"], [0.5, -0.5]))
    rec = read_recording(bag, setpoint_period_s=0.01)
    q = rec.commands["/jtc/joint_trajectory"]
    assert q.interface == "position" and q.joint_names == ("b", "a")  # names as the trajectory gives them
    np.testing.assert_allclose(q.held_at(np.array([r]))[0], [-0.5, 0.5])  # starts at the measured state
    np.testing.assert_allclose(q.held_at(np.array([r + 100 * MS]))[0], [0.25, 0.75], atol=1e-12)
