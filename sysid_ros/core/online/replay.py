"""The online payload estimator replayed over a recorded bag (`sysid-ros online`): the same core as the node,
fed the bag's joint states in the node's hop-sized chunks, so a fleet can audit its logs offline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import yaml

from ..bags.joint_states import read_joint_states
from ..files.writing import replace_file
from ..errors import ConfigError
from .estimator import OnlineEstimator
from .payload import load_model, payload_config
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

    def records(self) -> list[dict]:
        return [event_record(e) for e in self.events]

    def lines(self) -> list[str]:
        """One line per event (seconds from the bag's first sample), then the final estimate."""
        out = [f"{self.samples} samples of {self.bag}; payload on {self.body}; {len(self.events)} events"]
        for record in self.records():
            t = (record["time_ns"] - self.start_ns) / NS
            fields = {k: v for k, v in record.items() if k not in ("type", "time_ns", "joint")}
            out.append(f"{t:10.3f} s  {record['type']:<20} {_brief(fields)}")
        values = ", ".join(f"{n}={v:.5g}" for n, v in zip(self.estimate.names, self.estimate.values))
        out.append(f"final estimate: {values}")
        return out

    def document(self) -> dict:
        return {"bag": self.bag, "model": self.model, "body": self.body, "start_ns": self.start_ns,
                "samples": self.samples, "events": self.records(),
                "estimate": {n: float(v) for n, v in zip(self.estimate.names, self.estimate.values)}}


def _brief(fields: dict) -> str:
    def fmt(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.5g}"
        if isinstance(v, list):
            return "[" + ", ".join(fmt(x) for x in v) + "]"
        return str(v)
    return "  ".join(f"{k}={fmt(v)}" for k, v in fields.items())


def last_link(model: mujoco.MjModel) -> str:
    """The body the model's last joint moves (the flange of a serial arm)."""
    if model.njnt == 0:
        raise ConfigError("the model has no joints")
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.jnt_bodyid[model.njnt - 1]))


def replay_bag(bag: str | Path, model: str | Path, *, joints: Sequence[str] | None = None, body: str | None = None,
               inertia: bool = True, topic: str | None = None, distro: str | None = None,
               out: str | Path | None = None, chunk_s: float = 0.25) -> Replay:
    """Run `payload_config(model, body)`'s estimator over the bag's joint states; write `out` (YAML) if given.

    `joints`, if given, must be the model's joints (the whole arm enters every window). Gaps in the bag
    restart the window as they do live. `out` must not exist yet: nothing is overwritten, and it is
    written only once the whole bag was replayed.
    """
    if out is not None and Path(out).exists():
        raise ConfigError("the output file exists already; choose another (nothing is overwritten)", out=str(out))
    compiled = load_model(model)
    config = payload_config(compiled, body or last_link(compiled), inertia=inertia)
    wanted = config.joints
    if joints is not None and sorted(joints) != sorted(wanted):
        raise ConfigError(f"--joints must be the model's joints {list(wanted)}, got {list(joints)}")
    read = read_joint_states(bag, topics=[topic] if topic else None, joints=list(wanted), distro=distro)
    estimator = OnlineEstimator(config)
    events: list[Event] = []
    chunk_ns, total = int(round(chunk_s * NS)), 0
    for segment in read.segments:
        if segment.effort is None:
            raise ConfigError("the bag's joint states carry no effort: the payload needs the applied torques",
                              bag=str(bag))
        period_ns = float(np.median(np.diff(segment.time_ns))) if len(segment) > 1 else chunk_ns
        step = max(1, int(round(chunk_ns / period_ns)))  # a hop of samples a chunk, as the node feeds them
        for k in range(0, len(segment), step):
            events += estimator.update(segment.slice(k, k + step))
        total += len(segment)
    replay = Replay(str(bag), str(model), config.joint, int(read.segments[0].time_ns[0]), tuple(events),
                    estimator.estimate, total)
    if out is not None:
        replace_file(out, yaml.safe_dump(replay.document(), sort_keys=False).encode())
    return replay
