"""sysid_data: JointSamples/JointCommands -> mujoco.sysid data, with every silent trap refused or worked around.

Data comes from the real SimRobot (MuJoCo physics, sample-and-hold effort drive) started at an epoch-like
time, so the integer-nanosecond shift is exercised.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from mujoco import sysid

from support.synthetic import multisine, record_effort
from sysid_ros.core.errors import ConfigError, DataError
from sysid_ros.core.files import load_spec
from sysid_ros.core.identify.rollout import sequences as sd
from sysid_ros.core.signals import JointCommands, JointSamples
from sysid_ros.core.sim import SimRobot

EPOCH_NS = 1_700_000_000_123_456_789  # float seconds would lose ~0.2 us here
TRUTH = {"pole.mass": 1.3, "hinge.damping": 0.08, "hinge.frictionloss": 0.05}


@pytest.fixture(scope="module")
def pendulum():
    spec = load_spec("pendulum")
    return spec, spec.compile()


@pytest.fixture(scope="module")
def run():
    """2 s of multisine torque at 500 Hz (commands held 2 ms) on the true pendulum, noise-free."""
    robot = SimRobot("pendulum", physics=TRUTH, start_time_ns=EPOCH_NS, command_rate_hz=250.0)
    t = np.arange(0, 2.0 + 1e-9, 0.004)
    u = multisine(t, [0.5, 1.3, 2.9], 2.0, seed=3)
    return record_effort(robot, lambda ts: [u[int(round(ts / 0.004))]], 2.0)


def _rollout_error(model, seg: sd.Segment, signal: str) -> float:
    """Max |measured - predicted| of one signal when the true model is rolled out from the segment."""
    ms = sd.model_sequences("p", load_spec("pendulum"), [seg])
    traj = ms.measured_rollout[0]
    spec = load_spec("pendulum")
    spec.body("pole").mass = 1.3
    spec.body("pole").inertia = np.array(spec.body("pole").inertia)  # nominal is the truth here
    true_model = spec.compile()
    out = sysid.sysid_rollout(true_model, mujoco.MjData(true_model), traj.control, traj.initial_state)[0]
    qpos_map = sysid.TimeSeries.compute_all_state_mappings(true_model)[0]
    predicted = out.state.data[:, 1 + qpos_map[signal][1][0]] if signal.endswith("_qpos") else None
    inside = out.state.times <= seg.sensordata.times[-1] + 1e-9  # the grid runs one step past the data
    assert inside.sum() == len(seg.sensordata) - 1
    measured = np.interp(out.state.times[inside], seg.sensordata.times, seg.sensordata.data[:, 0])
    return float(np.max(np.abs(predicted[inside] - measured)))


def test_segment_starts_at_zero_and_replays_exactly(pendulum, run):
    spec, model = pendulum
    samples, commands = run
    maps = sd.joint_maps(model, ["hinge"])
    (seg,) = sd.segments_from_samples(model, maps, samples, commands)
    assert seg.start_ns == EPOCH_NS
    assert seg.sensordata.times[0] == 0.0 and seg.control.times[0] == 0.0
    # control on the 2 ms simulation grid, holding each 4 ms command for two steps
    assert np.allclose(np.diff(seg.control.times), 0.002, rtol=0, atol=1e-12)
    assert np.array_equal(seg.control.data[0:2, 0], [commands.values[0, 0]] * 2)
    assert seg.control.data[2, 0] == commands.values[1, 0]
    # the library's own linear resampling onto the timestep must leave a grid signal untouched
    resampled = seg.control.resample(target_dt=model.opt.timestep)
    assert len(resampled) == len(seg.control)
    assert np.allclose(resampled.data, seg.control.data, rtol=0, atol=1e-12)
    # the true model rolled out from the segment matches the joint-state signal exactly (no lag)
    assert _rollout_error(model, seg, "hinge_qpos") < 1e-9


def test_linear_control_resampling_would_misfit(pendulum, run):
    """The trap the held grid avoids: giving commands at their own times lets the library ramp between them."""
    spec, model = pendulum
    samples, commands = run
    maps = sd.joint_maps(model, ["hinge"])
    (seg,) = sd.segments_from_samples(model, maps, samples, commands)
    ramped = sysid.TimeSeries.from_control_names(
        sd.relative_seconds(commands.time_ns, EPOCH_NS), commands.values, model
    )
    wrong = sd.Segment("ramp", seg.initial_state, ramped.resample(target_dt=0.002), seg.sensordata, seg.start_ns)
    assert _rollout_error(model, wrong, "hinge_qpos") > 1e-4


def test_measured_effort_as_control_matches_commands(pendulum, run):
    spec, model = pendulum
    samples, commands = run
    maps = sd.joint_maps(model, ["hinge"])
    (a,) = sd.segments_from_samples(model, maps, samples, commands)
    (b,) = sd.segments_from_samples(model, maps, samples, None)  # Feedback.effort = torque held from then
    assert np.array_equal(a.control.data, b.control.data)


def test_windows_start_from_measured_state(pendulum, run):
    spec, model = pendulum
    samples, commands = run
    maps = sd.joint_maps(model, ["hinge"])
    segs = sd.segments_from_samples(model, maps, samples, commands, segment_s=0.5)
    assert len(segs) == 4
    for seg in segs:
        k = int(np.searchsorted(samples.time_ns, seg.start_ns))
        assert seg.initial_state[1] == samples.position[k, 0]  # state = [time, qpos, qvel, ...]
        assert seg.initial_state[2] == samples.velocity[k, 0]
        assert seg.sensordata.times[0] == 0.0
        assert _rollout_error(model, seg, "hinge_qpos") < 1e-9


def test_non_finite_position_is_refused_with_joint_and_time(pendulum, run):
    spec, model = pendulum
    samples, commands = run
    position = samples.position.copy()
    position[100, 0] = np.nan
    bad = JointSamples(
        samples.joint_names, samples.time_ns, position, samples.velocity, samples.effort, source="/joint_states"
    )
    with pytest.raises(DataError, match=r"non-finite position.*topic=/joint_states, joint=hinge, time_s=0\.2"):
        sd.segments_from_samples(model, sd.joint_maps(model, ["hinge"]), bad, commands)


def test_all_zero_column_is_refused(pendulum, run):
    spec, model = pendulum
    samples, commands = run
    zero = JointSamples(
        samples.joint_names,
        samples.time_ns,
        np.zeros_like(samples.position),
        samples.velocity,
        samples.effort,
        source="/joint_states",
    )
    with pytest.raises(DataError, match=r"all zero.*joint=hinge"):
        sd.segments_from_samples(model, sd.joint_maps(model, ["hinge"]), zero, commands)


def test_missing_joint_and_missing_command_are_refused(pendulum, run):
    spec, model = pendulum
    samples, commands = run
    other = JointSamples(("elbow",), samples.time_ns, samples.position, source="/joint_states")
    with pytest.raises(DataError, match=r"no joints \['hinge'\]"):
        sd.segments_from_samples(model, sd.joint_maps(model, ["hinge"]), other, commands)
    late = JointCommands(
        commands.joint_names,
        commands.time_ns[10:],
        commands.values[10:],
        "effort",
        source="/effort_controller/commands",
    )
    with pytest.raises(DataError, match=r"no finite command in force.*joint=hinge, time_s=0\.0"):
        sd.segments_from_samples(model, sd.joint_maps(model, ["hinge"]), samples, late)
    position = JointCommands(commands.joint_names, commands.time_ns, commands.values, "position")
    with pytest.raises(ConfigError, match="only effort commands"):
        sd.segments_from_samples(model, sd.joint_maps(model, ["hinge"]), samples, position)


def test_unknown_joint_and_actuator_mapping_are_refused(pendulum):
    spec, model = pendulum
    with pytest.raises(ConfigError, match="no such joint.*joint=shoulder"):
        sd.joint_maps(model, ["shoulder"])
    with pytest.raises(ConfigError, match="no such actuator.*actuator=nope"):
        sd.joint_maps(model, ["hinge"], {"hinge": {"actuator": "nope"}})


def test_sensor_subset_or_reordering_is_refused(pendulum, run):
    spec, model = pendulum
    samples, _ = run
    t = sd.relative_seconds(samples.time_ns, samples.time_ns[0])
    subset = sysid.TimeSeries.from_names(t, samples.velocity, model, names=["hinge_vel"])  # column 0, model: 1
    with pytest.raises(ConfigError, match="hinge_vel.*compare it with another sensor"):
        sd.check_sensor_layout(subset, model)
    full = np.column_stack([samples.position, samples.velocity, samples.effort])
    sd.check_sensor_layout(sysid.TimeSeries.from_names(t, full, model), model)  # model order: accepted
    with pytest.raises(ConfigError, match="model's sensors in order"):
        sd.sensor_signals(
            samples,
            model,
            samples.time_ns[0],
            {
                "hinge_vel": ("velocity", "hinge"),
                "hinge_pos": ("position", "hinge"),
                "hinge_torque": ("effort", "hinge"),
            },
        )


def test_jointpos_sensor_lags_one_step_and_is_shifted(pendulum, run):
    """A `jointpos` sensor in the rollout is the state one step earlier; sensor_signals shifts by +dt."""
    spec, model = pendulum
    samples, commands = run
    maps = sd.joint_maps(model, ["hinge"])
    (seg,) = sd.segments_from_samples(model, maps, samples, commands)
    true_model = load_spec("pendulum").compile()
    out = sysid.sysid_rollout(true_model, mujoco.MjData(true_model), seg.control, seg.initial_state)[0]
    sensor = out.sensordata.data[: len(samples) - 1, 0]  # hinge_pos at the rollout's times dt, 2 dt, ...
    measured = samples.position[:, 0]
    assert np.max(np.abs(sensor - measured[1 : len(sensor) + 1])) > 1e-4  # compared at face value: wrong
    assert np.max(np.abs(sensor - measured[: len(sensor)])) < 1e-9  # it is the previous step's state
    ts = sd.sensor_signals(
        samples,
        model,
        samples.time_ns[0],
        {"hinge_pos": ("position", "hinge"), "hinge_vel": ("velocity", "hinge"), "hinge_torque": ("effort", "hinge")},
    )
    assert ts.times[0] == pytest.approx(model.opt.timestep)


def test_round_trip_back_to_arrays(pendulum, run):
    spec, model = pendulum
    samples, commands = run
    maps = sd.joint_maps(model, ["hinge"])
    (seg,) = sd.segments_from_samples(model, maps, samples, commands, observe=("position", "velocity"))
    back = sd.timeseries_to_samples(seg.sensordata, maps, start_ns=seg.start_ns)
    assert np.array_equal(back.time_ns, samples.time_ns)
    assert np.array_equal(back.position, samples.position) and np.array_equal(back.velocity, samples.velocity)
    cmds = sd.control_to_commands(seg.control, model, maps, start_ns=seg.start_ns)
    assert np.array_equal(cmds.held_at(commands.time_ns), commands.values)
