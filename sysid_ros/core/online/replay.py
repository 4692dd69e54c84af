"""The online payload estimator replayed over a recorded bag (`sysid-ros online`): the same core as the node,
fed the bag's joint states in the node's hop-sized chunks, so a fleet can audit its logs offline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import mujoco
import numpy as np
import yaml

from ..bags import read_joint_states
from ..errors import ConfigError, DataError
from ..files import replace_file
from ..signals import JointSamples
from .estimator import OnlineEstimator
from .payload import FIRST_MOMENTS, WITH_INERTIA, load_model, payload_config
from .reports import Estimate, Event, event_record

NS = 1_000_000_000


@dataclass(frozen=True)
class Replay:
    """What the estimator said over a bag: its events in order and its estimate at the end."""

    bag: str
    model: str
    body: str
    start_ns: int
    events: tuple[Event, ...]
    estimate: Estimate
    samples: int
    warnings: tuple[str, ...] = ()

    def records(self) -> list[dict]:
        return [event_record(e) for e in self.events]

    def lines(self) -> list[str]:
        """One line per event (seconds from the bag's first sample), then the final estimate."""
        out = [f"{self.samples} samples of {self.bag}; payload on {self.body}; {len(self.events)} events"]
        out += [f"warning: {w}" for w in self.warnings]
        for record in self.records():
            t = (record["time_ns"] - self.start_ns) / NS
            fields = {k: v for k, v in record.items() if k not in ("type", "time_ns", "joint")}
            out.append(f"{t:10.3f} s  {record['type']:<20} {_brief(fields)}")
        std = self.estimate.std or (float("nan"),) * len(self.estimate.names)
        values = ", ".join(
            f"{n}={v:.5g}" + (f" +-{2 * s:.2g}" if np.isfinite(s) else "")
            for n, v, s in zip(self.estimate.names, self.estimate.values, std)
        )
        out.append(f"final estimate: {values}")
        return out

    def document(self) -> dict:
        return {
            "bag": self.bag,
            "model": self.model,
            "body": self.body,
            "start_ns": self.start_ns,
            "samples": self.samples,
            "warnings": list(self.warnings),
            "events": self.records(),
            "estimate": {n: float(v) for n, v in zip(self.estimate.names, self.estimate.values)},
        }


def _brief(fields: dict) -> str:
    def fmt(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.5g}"
        if isinstance(v, list):
            return "[" + ", ".join(fmt(x) for x in v) + "]"
        return str(v)

    return "  ".join(f"{k}={fmt(v)}" for k, v in fields.items())


def _check_segment(segment: JointSamples, bag: str) -> None:
    """Refuse what the estimator cannot use: no effort, efforts that are never finite, times that do not
    increase (`DataError` naming the joint or the row)."""
    if segment.effort is None:
        raise ConfigError("the bag's joint states carry no effort: the payload needs the applied torques", bag=bag)
    dead = [j for j, ok in zip(segment.joint_names, np.isfinite(segment.effort).any(axis=0)) if not ok]
    if dead:
        raise DataError(
            f"the effort of {', '.join(dead)} is never finite (NaN or inf in every message): "
            "the payload needs the applied torques",
            bag=bag,
        )
    steps = np.diff(segment.time_ns)
    if len(steps) and steps.min() <= 0:
        row = int(np.argmax(steps <= 0)) + 1
        raise DataError(f"sample times do not increase (row {row} is not later than the one before it)", bag=bag)


def _scaled(segment: JointSamples, effort_scale: Mapping[str, float]) -> JointSamples:
    """The segment with each joint's effort times its gain (1 where `effort_scale` names none)."""
    gains = np.array([effort_scale.get(j, 1.0) for j in segment.joint_names])
    return replace(segment, effort=segment.effort * gains)


def last_link(model: mujoco.MjModel) -> str:
    """The body the model's last joint moves (the flange of a serial arm)."""
    if model.njnt == 0:
        raise ConfigError("the model has no joints")
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.jnt_bodyid[model.njnt - 1]))


def replay_bag(
    bag: str | Path,
    model: str | Path,
    *,
    joints: Sequence[str] | None = None,
    body: str | None = None,
    inertia: bool = True,
    topic: str | None = None,
    distro: str | None = None,
    out: str | Path | None = None,
    chunk_s: float = 0.25,
    effort_scale: Mapping[str, float] | None = None,
) -> Replay:
    """Run `payload_config(model, body)`'s estimator over the bag's joint states; write `out` (YAML) if given.

    `joints`, if given, must be the model's joints (the whole arm enters every window). Gaps in the bag
    restart the window as they do live. `out` must not exist yet: nothing is overwritten, and it is
    written only once the whole bag was replayed.
    """
    if out is not None and Path(out).exists():
        raise ConfigError("the output file exists already; choose another (nothing is overwritten)", out=str(out))
    compiled = load_model(model)
    body = body or last_link(compiled)
    config = payload_config(compiled, body, inertia=inertia)
    warnings = []
    blind = [n for n in (WITH_INERTIA if inertia else FIRST_MOMENTS) if n not in config.model.names]
    if blind:
        warnings.append(
            f"the joint torques say nothing about {', '.join(blind)} of a payload on {body} (a single "
            f"joint or a planar arm); estimating {', '.join(config.model.names)} (first moments = mass "
            "x lever arm)"
        )
    wanted = config.joints
    if joints is not None and sorted(joints) != sorted(wanted):
        raise ConfigError(f"--joints must be the model's joints {list(wanted)}, got {list(joints)}")
    unknown = sorted(set(effort_scale or {}) - set(wanted))
    if unknown:
        raise ConfigError(f"effort_scale names joints the model does not have: {unknown}")
    read = read_joint_states(bag, topics=[topic] if topic else None, joints=list(wanted), distro=distro)
    for segment in read.segments:
        _check_segment(segment, str(bag))
    if effort_scale:  # the calibrated drive gains, as identify's data entries take them
        read = replace(read, segments=tuple(_scaled(s, effort_scale) for s in read.segments))
    warnings += list(read.warnings)
    unusable = sum(
        int((~np.isfinite(s.position).all(axis=1) | ~np.isfinite(s.effort).all(axis=1)).sum()) for s in read.segments
    )
    if unusable:
        warnings.append(f"{unusable} rows with a non-finite position or effort left out")
    estimator = OnlineEstimator(config)
    events: list[Event] = []
    chunk_ns, total = int(round(chunk_s * NS)), 0
    for segment in read.segments:
        period_ns = float(np.median(np.diff(segment.time_ns))) if len(segment) > 1 else chunk_ns
        step = max(1, int(round(chunk_ns / period_ns)))  # a hop of samples a chunk, as the node feeds them
        for k in range(0, len(segment), step):
            events += estimator.update(segment.slice(k, k + step))
        total += len(segment)
    final = estimator.estimate
    missing = [n for n, v in zip(final.names, final.values) if not np.isfinite(v)]
    if len(missing) == len(final.names):
        raise DataError(
            "no window of the bag could be fitted: no estimate (too little motion, too short a bag, "
            "or positions and efforts that no rigid body explains)",
            bag=str(bag),
        )
    if missing:
        warnings.append(f"no window could fit {', '.join(missing)}: no estimate for them")
    elif estimator.provisional:
        warnings.append(
            f"no window pinned {', '.join(estimator.provisional)} to its precision: provisional "
            "values (too little motion, or too much noise)"
        )
    replay = Replay(
        str(bag),
        str(model),
        config.joint,
        int(read.segments[0].time_ns[0]),
        tuple(events),
        final,
        total,
        tuple(warnings),
    )
    if out is not None:
        replace_file(out, yaml.safe_dump(replay.document(), sort_keys=False).encode())
    return replay
