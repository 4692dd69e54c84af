"""Measured joint arrays -> `mujoco.sysid` data (TimeSeries, initial states, ModelSequences), and back.

Every silent trap of mujoco.sysid 4.0.0 that concerns data is guarded here (see docs/facts.md):
- the rollout starts at the time in the initial state (0): each segment is shifted to start at 0, with
  the start subtracted in integer nanoseconds before converting to seconds;
- non-finite values (a NaN turns a whole column NaN and the mujoco optimizer returns its start) and
  all-zero measured columns (the default normalisation divides by zero) are refused;
- measured signals are joint *state* signals (`<joint>_qpos`, `<joint>_qvel`), which the library maps by
  name and which match the state at the same time exactly; model sensors lag the state by one step and
  are mapped by column position, so `check_sensor_layout` refuses a subset or a reordering;
- the control is the held command given explicitly on the simulation grid (the library resamples
  controls linearly, which would ramp between commands a drive holds).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np
from mujoco import sysid
from scipy.signal import savgol_filter

from ...errors import ConfigError, DataError
from ...signals import JointCommands, JointSamples, grid_points
from ...sim import constant_bias

STATE_FIELDS = {"position": "qpos", "velocity": "qvel"}


@dataclass(frozen=True)
class JointMap:
    """One ROS joint and the MJCF joint and torque actuator it is simulated by."""

    ros_joint: str
    mjcf_joint: str
    actuator: str


@dataclass(frozen=True)
class Segment:
    """One rollout's worth of data in mujoco.sysid form; `start_ns` is the absolute time of its t=0."""

    name: str
    initial_state: np.ndarray
    control: sysid.TimeSeries
    sensordata: sysid.TimeSeries
    start_ns: int


def _joint_actuator(model: mujoco.MjModel, joint: str) -> str:
    jid = model.joint(joint).id
    found = [
        model.actuator(a).name
        for a in range(model.nu)
        if model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT and model.actuator_trnid[a, 0] == jid
    ]
    if len(found) != 1:
        raise ConfigError(f"MJCF joint has {len(found)} joint actuators {found}; name one in the mapping", joint=joint)
    return found[0]


def joint_maps(
    model: mujoco.MjModel, ros_joints: Sequence[str], mapping: dict[str, dict[str, str] | str] | None = None
) -> tuple[JointMap, ...]:
    """Resolve ROS joints to MJCF joints/actuators (default: same name, the joint's only actuator)."""
    out = []
    for ros in ros_joints:
        entry = (mapping or {}).get(ros, {})
        entry = {"joint": entry} if isinstance(entry, str) else dict(entry)
        joint = entry.get("joint", ros)
        if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint) < 0:
            raise ConfigError("the model has no such joint", joint=ros, mjcf_joint=joint)
        jtype = int(model.jnt_type[model.joint(joint).id])
        if jtype not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            raise ConfigError("only hinge and slide joints can be mapped", joint=ros, mjcf_joint=joint)
        actuator = entry.get("actuator") or _joint_actuator(model, joint)
        aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, actuator)
        if aid < 0:
            raise ConfigError("the model has no such actuator", joint=ros, actuator=actuator)
        offset = constant_bias(model.actuator_biastype[aid], model.actuator_biasprm[aid])  # joint_effort_offset's
        if (
            model.actuator_biastype[aid] != mujoco.mjtBias.mjBIAS_NONE
            and not offset
            or model.actuator_gaintype[aid] != mujoco.mjtGain.mjGAIN_FIXED
            or model.actuator_dyntype[aid] != mujoco.mjtDyn.mjDYN_NONE
        ):
            raise ConfigError(
                "actuator is not a plain torque motor (effort control needs one)", joint=ros, actuator=actuator
            )
        out.append(JointMap(ros, joint, actuator))
    return tuple(out)


def timestep_ns(model: mujoco.MjModel) -> int:
    """The model's timestep in integer nanoseconds (refusing one that is not a whole number of ns)."""
    dt_ns = int(round(model.opt.timestep * 1e9))
    if dt_ns <= 0 or abs(dt_ns - model.opt.timestep * 1e9) > 1e-6:
        raise ConfigError(f"model timestep {model.opt.timestep} s is not a whole number of nanoseconds")
    return dt_ns


def check_samples(samples: JointSamples, joints: Sequence[str], fields: Sequence[str]) -> None:
    """Refuse what mujoco.sysid would silently misfit: missing joints, non-finite or all-zero columns."""
    src = samples.source or None
    missing = [j for j in joints if j not in samples.joint_names]
    if missing:
        raise DataError(f"the data has no joints {missing}; it has {list(samples.joint_names)}", topic=src)
    if len(samples) < 3:
        raise DataError(f"only {len(samples)} samples", topic=src)
    if np.any(np.diff(samples.time_ns) <= 0):
        k = int(np.flatnonzero(np.diff(samples.time_ns) <= 0)[0]) + 1
        raise DataError(
            "sample times are not strictly increasing",
            topic=src,
            time_s=(samples.time_ns[k] - samples.time_ns[0]) * 1e-9,
        )
    for name in fields:
        for joint in joints:
            col = samples.column(name, joint)
            bad = ~np.isfinite(col)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise DataError(
                    f"{bad.sum()} non-finite {name} values (mujoco.sysid would silently return its starting point)",
                    topic=src,
                    joint=joint,
                    time_s=round((samples.time_ns[k] - samples.time_ns[0]) * 1e-9, 9),
                )
            if name != "effort" and not np.any(col != 0.0):
                raise DataError(
                    f"measured {name} is all zero (it normalises the residual: division by zero)",
                    topic=src,
                    joint=joint,
                )


def relative_seconds(time_ns: np.ndarray, start_ns: int) -> np.ndarray:
    """Seconds since `start_ns`, subtracted in integer nanoseconds before converting."""
    return (np.asarray(time_ns, dtype=np.int64) - np.int64(start_ns)).astype(np.float64) * 1e-9


def held_control(
    model: mujoco.MjModel, maps: Sequence[JointMap], commands: JointCommands, start_ns: int, n_grid: int
) -> sysid.TimeSeries:
    """The effort commands as held by the drive, given on the simulation grid from `start_ns`."""
    if commands.interface != "effort":
        raise ConfigError(
            f"only effort commands can drive the simulation, got {commands.interface!r}", topic=commands.source or None
        )
    missing = [m.ros_joint for m in maps if m.ros_joint not in commands.joint_names]
    if missing:
        raise DataError(f"the commands have no joints {missing}", topic=commands.source or None)
    dt_ns = timestep_ns(model)
    grid_ns = np.int64(start_ns) + np.arange(n_grid, dtype=np.int64) * dt_ns
    held = commands.held_at(grid_ns)
    ctrl = np.zeros((n_grid, model.nu))
    for m in maps:
        col = held[:, commands.joint_names.index(m.ros_joint)]
        bad = ~np.isfinite(col)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise DataError(
                "no finite command in force (before the first command, or NaN)",
                topic=commands.source or None,
                joint=m.ros_joint,
                time_s=k * dt_ns * 1e-9,
            )
        aid = model.actuator(m.actuator).id
        ctrl[:, aid] = col / model.actuator_gear[aid, 0] / model.actuator_gainprm[aid, 0]
    times = np.arange(n_grid, dtype=np.int64) * dt_ns * 1e-9
    # The library resamples controls onto linspace(0, end, ceil(end / timestep) + 1): with `end` one ulp
    # too large that is one point more and a shifted grid. Nudge `end` down until the grid is this one.
    while int(np.ceil(times[-1] / model.opt.timestep)) + 1 > n_grid:
        times[-1] = np.nextafter(times[-1], 0.0)
    return sysid.TimeSeries.from_control_names(times, ctrl, model)


def measured_effort_commands(samples: JointSamples) -> JointCommands:
    """Measured effort as the control: each sample is the torque applied from its instant on."""
    if samples.effort is None:
        raise DataError("no measured effort to use as the control", topic=samples.source or None)
    return JointCommands(samples.joint_names, samples.time_ns, samples.effort, "effort", source=samples.source)


def state_signals(
    samples: JointSamples,
    maps: Sequence[JointMap],
    model: mujoco.MjModel,
    start_ns: int,
    observe: Sequence[str] = ("position",),
) -> sysid.TimeSeries:
    """Measured joint state as `<joint>_qpos` / `<joint>_qvel` signals (matched by name, no lag)."""
    names, cols = [], []
    for field_name in observe:
        if field_name not in STATE_FIELDS:
            raise ConfigError(f"cannot observe {field_name!r}; choose from {sorted(STATE_FIELDS)}")
        for m in maps:
            names.append(
                (
                    f"{m.mjcf_joint}_{STATE_FIELDS[field_name]}",
                    sysid.SignalType.MjStateQPos if field_name == "position" else sysid.SignalType.MjStateQVel,
                )
            )
            cols.append(samples.column(field_name, m.ros_joint))
    return sysid.TimeSeries.from_names(
        relative_seconds(samples.time_ns, start_ns), np.column_stack(cols), model, names=names
    )


def check_sensor_layout(sensordata: sysid.TimeSeries, model: mujoco.MjModel) -> None:
    """Refuse sensor columns the default residual would compare against the wrong predicted columns."""
    for name, (kind, indices) in (sensordata.signal_mapping or {}).items():
        if kind != sysid.SignalType.MjSensor:
            continue
        sid = model.sensor(name).id
        expected = np.arange(model.sensor_adr[sid], model.sensor_adr[sid] + model.sensor_dim[sid])
        if not np.array_equal(np.asarray(indices), expected):
            raise ConfigError(
                f"measured sensor {name!r} is in columns {list(indices)} but the model puts it in "
                f"{list(expected)}: mujoco.sysid would compare it with another sensor; give all "
                f"sensors in model order, or observe joint state signals (<joint>_qpos)"
            )


def sensor_signals(
    samples: JointSamples, model: mujoco.MjModel, start_ns: int, columns: dict[str, tuple[str, str]]
) -> sysid.TimeSeries:
    """Measured model sensors (`{sensor: (field, ros_joint)}`, every sensor, model order), lag-corrected.

    A sensor in the rollout output at time t was computed from the state at t - dt, so measured sensor
    times are shifted by +dt to line up.
    """
    order = [model.sensor(i).name for i in range(model.nsensor)]
    if list(columns) != order:
        raise ConfigError(f"sensor columns {list(columns)} must be the model's sensors in order {order}")
    data = np.column_stack([samples.column(f, j) for f, j in columns.values()])
    if data.shape[1] != model.nsensordata:
        raise ConfigError("only scalar sensors are supported", topic=samples.source or None)
    times = relative_seconds(samples.time_ns, start_ns) + model.opt.timestep
    ts = sysid.TimeSeries.from_names(times, data, model)
    check_sensor_layout(ts, model)
    return ts


def initial_states(
    model: mujoco.MjModel,
    maps: Sequence[JointMap],
    samples: JointSamples,
    indices: Sequence[int],
    smoothing_samples: int = 0,
    velocity: str = "smoothed",
) -> list[np.ndarray]:
    """Full-physics states at sample `indices` (time 0 of their segments) from measured position/velocity.

    `smoothing_samples` > 2 fits a local quadratic (Savitzky-Golay) through that many samples to reduce
    noise in the start positions. The start velocity: `smoothed` the measured velocity through the same fit,
    `measured` the measured velocity as it is, `positions` the fit's derivative of the positions; without
    a measured velocity always the latter (a 7-sample fit unless `smoothing_samples` says otherwise).
    """
    qpos, qvel = start_positions_velocities(model, maps, samples, indices, smoothing_samples, velocity)
    return [sysid.create_initial_state(model, qp, qv) for qp, qv in zip(qpos, qvel)]


def start_positions_velocities(
    model: mujoco.MjModel,
    maps: Sequence[JointMap],
    samples: JointSamples,
    indices: Sequence[int],
    smoothing_samples: int = 0,
    velocity: str = "smoothed",
) -> tuple[np.ndarray, np.ndarray]:
    """(qpos, qvel) rows of `initial_states` (the model's qpos0 and zero velocity for unmapped joints)."""
    qpos = np.tile(model.qpos0, (len(indices), 1))
    qvel = np.zeros((len(indices), model.nv))
    dt_s = float(np.median(np.diff(samples.time_s)))
    idx = np.asarray(indices, dtype=int)
    for m in maps:
        q = samples.column("position", m.ros_joint)
        v = (
            samples.column("velocity", m.ros_joint)
            if samples.velocity is not None and velocity != "positions"
            else None
        )
        w = smoothing_samples if smoothing_samples > 2 else (0 if v is not None else 7)
        if w:
            w = min(w | 1, len(q) if len(q) % 2 else len(q) - 1)
            q0 = savgol_filter(q, w, 2, mode="interp")[idx]
            v0 = (
                savgol_filter(q, w, 2, deriv=1, delta=dt_s, mode="interp")
                if v is None
                else v
                if velocity == "measured"
                else savgol_filter(v, w, 2, mode="interp")
            )[idx]
        else:
            q0, v0 = q[idx], v[idx]
        jid = model.joint(m.mjcf_joint).id
        qpos[:, model.jnt_qposadr[jid]] = q0
        qvel[:, model.jnt_dofadr[jid]] = v0
    return qpos, qvel


def segments_from_samples(
    model: mujoco.MjModel,
    maps: Sequence[JointMap],
    samples: JointSamples,
    commands: JointCommands | None = None,
    *,
    name: str = "seg",
    observe: Sequence[str] = ("position",),
    segment_s: float | None = None,
    smoothing_samples: int = 0,
    start_velocity: str = "smoothed",
) -> list[Segment]:
    """Cut one contiguous recording into segments (one, or one every `segment_s`) that each start at 0.

    Each segment starts from the measured state at its first sample; the control is the commands (or the
    measured effort) held on the simulation grid.
    """
    joints = [m.ros_joint for m in maps]
    fields = ["position"] + [f for f in observe if f != "position"]
    if samples.velocity is not None:
        fields = list(dict.fromkeys(fields + ["velocity"]))
    if commands is None:
        fields.append("effort")
    check_samples(samples, joints, fields)
    commands = commands if commands is not None else measured_effort_commands(samples)
    dt_ns = timestep_ns(model)
    t = samples.time_ns
    grid_points(int(t[-1] - t[0]), dt_ns, "the data", topic=samples.source or None)
    if segment_s is None:
        bounds = [(0, len(t))]
    else:
        width_ns = int(round(segment_s * 1e9))
        grid_points(int(t[-1] - t[0]), width_ns, f"cutting into {segment_s:g} s segments", topic=samples.source or None)
        starts = np.searchsorted(t, t[0] + np.arange(0, int(t[-1] - t[0]), width_ns, dtype=np.int64))
        bounds = [(int(a), int(b) + 1) for a, b in zip(starts, list(starts[1:]) + [len(t) - 1])]
    bounds = [(a, b) for a, b in bounds if b - a >= 3 and (t[b - 1] - t[a]) // dt_ns >= 2]
    states = initial_states(model, maps, samples, [a for a, _ in bounds], smoothing_samples, start_velocity)
    out = []
    for k, ((a, b), state) in enumerate(zip(bounds, states)):
        start_ns = int(t[a])
        # one grid step past the last sample: the rollout then always covers it, whatever the float
        # rounding of MuJoCo's accumulated time, so every window of n samples gives n - 1 residual rows
        n_grid = int((t[b - 1] - start_ns) // dt_ns) + 2
        part = samples.slice(a, b)
        control = held_control(model, maps, commands, start_ns, n_grid)
        sensordata = state_signals(part, maps, model, start_ns, observe)
        out.append(Segment(f"{name}_{k}" if segment_s else name, state, control, sensordata, start_ns))
    if not out:
        raise DataError("no segment long enough to simulate", topic=samples.source or None)
    return out


def model_sequences(name: str, spec: mujoco.MjSpec, segments: Sequence[Segment]) -> sysid.ModelSequences:
    """Bundle segments with the spec; joint-state signals need `allow_missing_sensors`."""
    for seg in segments:
        ctrl_dt = np.diff(seg.control.times)
        if len(ctrl_dt) and abs(ctrl_dt.mean() - spec.option.timestep) > 1e-12:
            raise ConfigError("control is not on the simulation grid", sequence=seg.name)
    absl_logger = logging.getLogger("absl")  # it warns once per segment that not all sensors are measured
    level = absl_logger.level
    absl_logger.setLevel(logging.ERROR)
    try:
        return sysid.ModelSequences(
            name,
            spec,
            [s.name for s in segments],
            [s.initial_state for s in segments],
            [s.control for s in segments],
            [s.sensordata for s in segments],
            allow_missing_sensors=True,
        )
    finally:
        absl_logger.setLevel(level)


def timeseries_to_samples(
    ts: sysid.TimeSeries, maps: Sequence[JointMap], start_ns: int = 0, source: str = ""
) -> JointSamples:
    """A TimeSeries of `<joint>_qpos` / `<joint>_qvel` signals back to JointSamples (ROS joint names)."""
    mapping = ts.signal_mapping or {}
    time_ns = np.int64(start_ns) + np.round(np.asarray(ts.times) * 1e9).astype(np.int64)
    out: dict[str, np.ndarray | None] = {}
    for field_name, suffix in STATE_FIELDS.items():
        keys = [f"{m.mjcf_joint}_{suffix}" for m in maps]
        if all(k in mapping for k in keys):
            out[field_name] = np.column_stack([ts.data[:, mapping[k][1][0]] for k in keys])
        else:
            out[field_name] = None
    if out["position"] is None and out["velocity"] is None:
        raise DataError("the time series has no joint state signals of the mapped joints")
    return JointSamples(tuple(m.ros_joint for m in maps), time_ns, out["position"], out["velocity"], None, source)


def control_to_commands(
    ts: sysid.TimeSeries, model: mujoco.MjModel, maps: Sequence[JointMap], start_ns: int = 0
) -> JointCommands:
    """A control TimeSeries back to effort JointCommands (joint torques, ROS joint names)."""
    mapping = ts.signal_mapping or sysid.TimeSeries.compute_all_control_mapping(model)
    cols = []
    for m in maps:
        aid = model.actuator(m.actuator).id
        idx = mapping[f"{m.actuator}_ctrl"][1][0]
        cols.append(ts.data[:, idx] * model.actuator_gear[aid, 0] * model.actuator_gainprm[aid, 0])
    time_ns = np.int64(start_ns) + np.round(np.asarray(ts.times) * 1e9).astype(np.int64)
    return JointCommands(tuple(m.ros_joint for m in maps), time_ns, np.column_stack(cols), "effort")
