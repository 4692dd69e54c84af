"""The run's first stage, `load_run`: the problem's model, bounds from physics, the problem checked against the
model, its data (bags via read_recording, or .npz arrays) loaded and cut into segments, and where a training
record repeats whole periods (the periodic tape its recorder stored, or the data entry's `periodic` key), those
periods checked against the data (`source_periods`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import mujoco
import numpy as np
from scipy.signal import decimate

from ...bags import MOSTLY_GARBAGE, load_npz, read_recording, regularize
from ...errors import BagError, ConfigError, DataError
from ...linear import DEFAULT_KEEP_HZ, Periods, check_period, default_settle_s
from ...signals import JointCommands, JointSamples, check_memory
from ...tapes import recorded_periods
from ..checks.actuator_limits import clamp_warnings
from ..checks.torque_validation import MAX_TORQUE_ROWS
from ..problem.file import DataSource, Problem
from ..problem.model import check_problem
from ..problem.model_cache import compiled_model
from ..problem.plausibility import physical_bounds
from ..results import RunLog
from ..rollout import sequences as sd
from ..rollout.start_states import choose_start_states


@dataclass(frozen=True)
class Loaded:
    """The problem (bounds from physics, start states chosen), its model and its data cut into segments."""

    problem: Problem
    spec: mujoco.MjSpec
    model: mujoco.MjModel
    maps: list[sd.JointMap]
    starts: dict[str, tuple[float, ...]]
    train_data: list
    val_data: list
    train_sources: list
    train: list
    val: list
    periodic: dict[str, Periods] = field(default_factory=dict)  # training data name -> its checked periods


def load_run(problem: Problem, log: RunLog) -> Loaded:
    """The model (compiled once per process and model file), bounds from physics, the checked problem, the data."""
    log.report("load", 0.0, f"loading model {problem.model}")
    spec, model = compiled_model(problem)
    maps = sd.joint_maps(model, problem.joints, problem.mapping)
    signals = [f"{m.mjcf_joint}_{sd.STATE_FIELDS[f]}" for f in problem.observe for m in maps]
    problem, bound_notes = physical_bounds(problem, spec, model)  # missing min/max from physics, one note each
    log.notes += bound_notes
    starts = check_problem(problem, spec, model, signals)
    rate = max_rate_hz(model)
    train_data, periodic = [], {}
    for k, src in enumerate(problem.training):
        name = f"train{k}_{src.path.stem}"
        parts, periods = load_source_periods(src, problem.joints, log.warnings, log.notes, rate)
        train_data.append((name, parts))
        if periods is not None:
            periodic[name] = periods
    val_data = [
        (f"val{k}_{src.path.stem}", load_source(src, problem.joints, log.warnings, log.notes, rate))
        for k, src in enumerate(problem.validation)
    ]
    if problem.start_velocity == "auto":  # measured start states: from the measured velocity or positions
        choice = choose_start_states([s for _, parts in train_data for s, _ in parts], problem.joints)
        problem = replace(problem, start_velocity=choice.velocity, smoothing_samples=choice.smoothing_samples)
        if not problem.estimate_initial_state:
            log.notes.append(f"start states: {choice.reason}")
    log.warnings += clamp_warnings(model, maps, [*train_data, *val_data])  # never a silent clamp
    check_run_memory(problem, model, maps, [*train_data, *val_data])
    train_sources = segment_sources(problem, model, maps, train_data)
    val = build_segments(problem, model, maps, val_data) if val_data else []
    return Loaded(
        problem,
        spec,
        model,
        maps,
        starts,
        train_data,
        val_data,
        train_sources,
        [seg for seg, _ in train_sources],
        val,
        periodic,
    )


def _trim(samples: JointSamples, src: DataSource) -> JointSamples:
    if src.start_s == 0.0 and src.end_s is None:
        return samples
    rel = samples.time_ns - samples.time_ns[0]
    a = int(np.searchsorted(rel, int(round(src.start_s * 1e9))))
    b = len(rel) if src.end_s is None else int(np.searchsorted(rel, int(round(src.end_s * 1e9)), side="right"))
    return samples.slice(a, b)


def _from_first_command(samples: JointSamples, commands: JointCommands) -> JointSamples:
    """The samples from the first command on (finite for every joint of `samples`): before it no command is in
    force to replay (a recorder's feedback starts before its first command)."""
    columns = [commands.joint_names.index(j) for j in samples.joint_names if j in commands.joint_names]
    finite = np.flatnonzero(np.all(np.isfinite(commands.values[:, columns]), axis=1))
    if not len(finite):
        return samples
    return samples.slice(int(np.searchsorted(samples.time_ns, commands.time_ns[finite[0]])), len(samples))


def load_source(
    src: DataSource,
    joints: Sequence[str],
    warnings: list[str] | None = None,
    notes: list[str] | None = None,
    max_rate: float | None = None,
) -> list[tuple[JointSamples, JointCommands | None]]:
    """Contiguous sample sets of a bag or `.npz`, each with the effort commands to replay (None: measured effort);
    see `load_source_periods`."""
    return load_source_periods(src, joints, warnings, notes, max_rate)[0]


def load_source_periods(
    src: DataSource,
    joints: Sequence[str],
    warnings: list[str] | None = None,
    notes: list[str] | None = None,
    max_rate: float | None = None,
) -> tuple[list[tuple[JointSamples, JointCommands | None]], Periods | None]:
    """Contiguous sample sets of a bag or `.npz`, each with the effort commands to replay (None: measured effort),
    and the whole periods the record repeats, checked against it (`source_periods`; None: not periodic).

    Data repairs that may have changed the answer (duplicate stamps with different values, of which the
    reader kept the first; a log resampled without a device clock) are appended to `warnings` as one line
    naming the file; a real logger's time base put right (repeated rows dropped, device clock recovered,
    `bags.logger_clock`) to `notes`. Samples faster than `max_rate` Hz are decimated (`decimated`), a note says so.
    """
    if src.kind == "npz":
        samples, commands, _ = load_npz(src.path)
        if samples is None:
            raise DataError("the file holds no joint feedback", bag=str(src.path))
        segments = [samples]
        metadata: dict = {}
    else:
        topics = None if src.feedback_topic is None else [src.feedback_topic]
        if src.control == "effort":
            wanted, interfaces = [], None  # the measured effort: no command topic is read
        elif src.command_topic is not None:
            wanted, interfaces = [src.command_topic], None
        else:
            wanted, interfaces = None, ("effort",)
        try:
            rec = read_recording(
                src.path,
                joints=list(joints),
                joint_state_topics=topics,
                command_topics=wanted,
                command_joint_names=src.command_joints,
                command_interfaces=interfaces,
            )
        except (DataError, BagError) as exc:
            raise type(exc)(f"cannot read joints {list(joints)}: {exc}") from exc
        segments = list(getattr(rec.feedback, "segments", None) or [rec.samples])
        if warnings is not None:  # a damaged chunk read as the data's end: the record is not what was recorded
            warnings += [f"{src.path}: {text}" for text in getattr(rec.feedback, "shortfalls", ())]
        if rec.feedback.dropped_rows and warnings is not None:
            warnings.append(
                f"{src.path}: {rec.feedback.dropped_rows} joint states dropped as garbage (non-finite or "
                "beyond any physical range)"
            )
        conflicts = rec.feedback.timing.conflicting_duplicates
        if conflicts and warnings is not None:
            warnings.append(
                f"{src.path}: {conflicts} joint state values stamped twice with different data "
                "(the reader kept the first of each)"
            )
        commands = rec.commands
        metadata = rec.metadata
    first_ns = int(min(int(seg.time_ns[0]) for seg in segments if len(seg)))
    if src.segments == "longest":
        segments = [max(segments, key=len)]
    missing = [j for j in joints if j not in segments[0].joint_names]
    if missing:
        raise DataError(f"the data has no joints {missing}; it has {list(segments[0].joint_names)}", bag=str(src.path))
    efforts = {t: c for t, c in commands.items() if c.interface == "effort"}
    if src.command_topic is not None:
        if src.command_topic not in commands:
            raise DataError(
                f"no command topic {src.command_topic!r}; the data has {sorted(commands)}",
                bag=str(src.path),
                topic=src.command_topic,
            )
        chosen: JointCommands | None = commands[src.command_topic]
    elif src.control == "effort":
        chosen = None
    elif len(efforts) == 1:
        chosen = next(iter(efforts.values()))
    elif len(efforts) > 1:
        raise ConfigError(
            f"several effort command topics {sorted(efforts)}: name one as command_topic", bag=str(src.path)
        )
    elif src.control == "commands":
        raise DataError("no effort command topic in the data", bag=str(src.path))
    else:
        chosen = None
    if chosen is not None:
        chosen = JointCommands(
            chosen.joint_names,
            chosen.time_ns,
            chosen.values,
            chosen.interface,
            source=chosen.source or f"{src.path}:{src.command_topic or 'commands'}",
        )
    scale = _effort_scale(src, joints)
    out = []
    for k, seg in enumerate(segments):
        where = f"{src.path}" + (f" segment {k}" if len(segments) > 1 else "")
        seg = drop_non_finite_rows(seg.select(list(joints)), ("effort",) if chosen is None else (), where, warnings)
        if scale is not None and seg.effort is not None:
            seg = JointSamples(seg.joint_names, seg.time_ns, seg.position, seg.velocity, seg.effort * scale, seg.source)
        seg, fix = regularize(seg)
        if fix.kind != "uniform" or fix.repeated_rows:
            line = fix.describe(f"{src.path}" + (f" segment {k}" if len(segments) > 1 else ""))
            target = warnings if fix.kind == "resampled" else notes
            if target is not None:
                target.append(line)
        if max_rate is not None:
            seg = decimated(seg, max_rate, where, notes)
        seg = _trim(seg, src)
        if chosen is not None:
            before = len(seg)
            seg = _from_first_command(seg, chosen)
            if len(seg) < before and notes is not None:
                notes.append(
                    f"{src.path}: {before - len(seg)} joint states before the first command left out "
                    "(no command was in force to replay)"
                )
        if not seg.source:
            seg = JointSamples(seg.joint_names, seg.time_ns, seg.position, seg.velocity, seg.effort, str(src.path))
        if len(seg) >= 3:
            out.append((seg, chosen))
    if not out:
        raise DataError("no usable samples (after trimming)", bag=str(src.path))
    return out, source_periods(src, metadata, first_ns, out, notes)


def _effort_scale(src: DataSource, joints: Sequence[str]) -> np.ndarray | None:
    """The entry's `effort_scale` per joint in `joints` order (1 where it names none); None without one."""
    if not src.effort_scale:
        return None
    unknown = sorted(set(src.effort_scale) - set(joints))
    if unknown:
        raise ConfigError(f"effort_scale names joints the problem does not have: {unknown}", bag=str(src.path))
    return np.array([src.effort_scale.get(j, 1.0) for j in joints])


def source_periods(
    src: DataSource,
    metadata: dict,
    first_ns: int,
    parts: Sequence[tuple[JointSamples, JointCommands | None]],
    notes: list[str] | None = None,
) -> Periods | None:
    """The whole periods a record repeats: the data entry's `periodic` key (its start after the record's first
    joint state, `first_ns`), else the periodic tape its recorder stored (`tapes.recorded_periods`); None when
    neither says so. Checked on the data: a stretch must hold them on whole samples (a recorded tape's play cut
    short is a note and no periods; a stated one is refused) and repeat with that period (`linear.check_period`:
    else DataError naming the record)."""
    spec = src.periodic
    if spec is not None:
        periods = Periods(
            first_ns + round(spec.start_s * 1e9),
            spec.period_s,
            spec.periods,
            DEFAULT_KEEP_HZ if spec.keep_hz is None else spec.keep_hz,
            default_settle_s(spec.period_s, spec.periods) if spec.settle_s is None else spec.settle_s,
            "problem file",
        )
    else:
        try:
            periods = recorded_periods(metadata)
        except DataError as exc:
            raise DataError(f"{exc}", bag=str(src.path)) from None
    if periods is None:
        return None
    held = [s for s, _ in parts if s.time_ns[0] <= periods.start_ns and s.time_ns[-1] >= periods.end_ns]
    if not held:
        what = f"{periods.periods} period(s) of {periods.period_s:g} s from t={periods.start_ns} ns ({periods.source})"
        if spec is None:
            if notes is not None:
                notes.append(f"{src.path}: the record does not hold the {what}: not averaged over periods")
            return None
        raise DataError(f"the record does not hold the {what}", bag=str(src.path))
    try:
        check = check_period(held[0].time_ns, held[0].position, periods)
    except DataError as exc:
        raise DataError(
            f"the stated periods ({periods.source}) do not fit the record: {exc}", bag=str(src.path)
        ) from None
    if not check.fits:
        raise DataError(
            f"the stated period of {periods.period_s:g} s ({periods.source}) does not fit the record: consecutive "
            f"periods' positions correlate {check.correlation:.4f} at it and differ least at {check.best_period_s:g} s",
            bag=str(src.path),
        )
    return replace(periods, correlation=check.correlation)


DECIMATE_ABOVE_HZ = 2000.0
"""Samples faster than this (or than the model's simulation rate, if faster) are decimated before anything else:
the rollouts step at the model's timestep and the torque checks filter over tens of ms, so rows beyond it add
memory and time, not information (a 10 s, 20 kHz, 6-joint log took 2.6 GB and failed in the torque checks)."""


def max_rate_hz(model: mujoco.MjModel) -> float:
    """The highest sample rate a run keeps: `DECIMATE_ABOVE_HZ`, or the model's simulation rate when faster."""
    return max(DECIMATE_ABOVE_HZ, 1.0 / float(model.opt.timestep))


def decimated(samples: JointSamples, max_rate: float, where: str, notes: list[str] | None = None) -> JointSamples:
    """`samples` (on a uniform grid) decimated by the smallest whole factor that brings them to `max_rate` Hz or
    below, each field through scipy's anti-alias filter first (`scipy.signal.decimate`: an order-8 Chebyshev
    type I low-pass at 0.8 x the new Nyquist frequency, run forwards and backwards, so no phase lag); one note."""
    if len(samples) < 3:
        return samples
    period_ns = int(np.median(np.diff(samples.time_ns)))
    rate = 1e9 / max(period_ns, 1)
    factor = int(np.ceil(rate / max_rate - 1e-9))
    if factor < 2 or len(samples) < 30 * factor:  # the filter needs a few of its lengths of data
        return samples
    keep = np.arange(0, len(samples), factor)
    fields = []
    for name in ("position", "velocity", "effort"):
        values = getattr(samples, name)
        fields.append(None if values is None else decimate(values, factor, axis=0, zero_phase=True)[: len(keep)])
    if notes is not None:
        notes.append(
            f"{where}: {rate:.6g} Hz samples decimated by {factor} to {rate / factor:.6g} Hz ({len(samples)} "
            f"-> {len(keep)} rows; anti-alias filter: order-8 Chebyshev low-pass at "
            f"{0.8 * rate / factor / 2:.4g} Hz, zero phase)"
        )
    return JointSamples(samples.joint_names, samples.time_ns[keep], *fields, samples.source)


BYTES_PER_ROW_SIGNAL_PARAMETER = 32
"""Memory a run takes per measured row, per signal and per (parameter + 25): calibrated on a 6-joint arm with 23
parameters (peak resident memory 0.93 GiB for 20,000 rows, 1.78 GiB for 120,000: 9 kB per row)."""
TORQUE_ROW_BYTES = 17_000
"""The whole-arm regressor's memory per row (6 joints, 8 bodies), at most `MAX_TORQUE_ROWS` rows."""
ADDRESS_SPACE_FACTOR = 1.6
"""Address space taken per byte of resident memory (allocator arenas, thread stacks): the 20,000-row run that
peaks at 0.93 GiB resident fails under a 1.2 GiB `ulimit -v` with 0.59 GiB in use when it starts, runs under 1.5."""


def check_run_memory(
    problem: Problem, model: mujoco.MjModel, maps: Sequence[sd.JointMap], data: Sequence[tuple[str, list]]
) -> None:
    """Refuse up front, naming the limit, a run whose data would not fit in the memory this process has left."""
    rows = sum(len(samples) for _, parts in data for samples, _ in parts)
    signals = len(maps) * len(problem.observe)
    params = sum(len(p.min_value or p.start or (0,)) for p in problem.parameters)
    needed = rows * BYTES_PER_ROW_SIGNAL_PARAMETER * signals * (params + 25)
    if len(maps) > 1:
        needed += min(rows, 2 * MAX_TORQUE_ROWS) * TORQUE_ROW_BYTES * model.nbody * model.nv // 48
    check_memory(
        int(needed * ADDRESS_SPACE_FACTOR),
        f"identifying {rows} rows of {len(maps)} joints with {params} parameter values",
        "identify a part of the record (start_s / end_s in the problem's data entry) or fewer joints",
    )


def drop_non_finite_rows(
    samples: JointSamples, needed: Sequence[str], where: str, warnings: list[str] | None = None
) -> JointSamples:
    """`samples` without the rows where a field the run uses (`needed`, and the velocity when there is one) is not
    finite for some joint: one warning line with the count, the fields and the first such row; refused when they
    are more than half of the rows (`MOSTLY_GARBAGE`, as for positions)."""
    fields = [f for f in dict.fromkeys(("position", "velocity", *needed)) if getattr(samples, f) is not None]
    bad = np.zeros(len(samples), dtype=bool)
    counts: dict[str, int] = {}
    for f in fields:
        rows = ~np.isfinite(getattr(samples, f)).all(axis=1)
        if rows.any():
            counts[f] = int(rows.sum())
            bad |= rows
    if not bad.any():
        return samples
    n, total = int(bad.sum()), len(samples)
    first = int(np.flatnonzero(bad)[0])
    worst = max(counts, key=counts.get)
    joint = samples.joint_names[int(np.flatnonzero(~np.isfinite(getattr(samples, worst)).all(axis=0))[0])]
    what = ", ".join(f"{c} non-finite {f}" for f, c in counts.items())
    if n > MOSTLY_GARBAGE * total:
        raise DataError(
            f"mostly non-finite: {n} of {total} rows ({what}; joint {joint} first); a record whose "
            "measurements are mostly missing is refused",
            bag=where,
        )
    if warnings is not None:
        warnings.append(
            f"{where}: {n} of {total} rows dropped ({what}, the first at "
            f"{(samples.time_ns[first] - samples.time_ns[0]) * 1e-9:.4f} s; joint {joint})"
        )
    keep = np.flatnonzero(~bad)
    return JointSamples(
        samples.joint_names,
        samples.time_ns[keep],
        *(
            None if getattr(samples, f) is None else getattr(samples, f)[keep]
            for f in ("position", "velocity", "effort")
        ),
        samples.source,
    )


def build_segments(
    problem: Problem,
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    data: Sequence[tuple[str, list[tuple[JointSamples, JointCommands | None]]]],
) -> list[sd.Segment]:
    """All segments (or windows) of all sources, each starting from its measured state at t = 0."""
    return [seg for seg, _ in segment_sources(problem, model, maps, data)]


def segment_sources(
    problem: Problem,
    model: mujoco.MjModel,
    maps: Sequence[sd.JointMap],
    data: Sequence[tuple[str, list[tuple[JointSamples, JointCommands | None]]]],
) -> list[tuple[sd.Segment, JointSamples]]:
    """`build_segments`, each segment with the samples it was cut from (for its start state's noise)."""
    out: list[tuple[sd.Segment, JointSamples]] = []
    for name, parts in data:
        for k, (samples, commands) in enumerate(parts):
            out += [
                (seg, samples)
                for seg in sd.segments_from_samples(
                    model,
                    maps,
                    samples,
                    commands,
                    name=f"{name}_{k}",
                    observe=problem.observe,
                    segment_s=problem.segment_s,
                    smoothing_samples=problem.smoothing_samples or 0,
                    start_velocity=problem.start_velocity,
                )
            ]
    return out
