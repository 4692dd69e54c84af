"""The tape sets a servo tuner plays (identify, sweep, refine/verify) and the seconds of motion they plan."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ..errors import ConfigError
from .envelope import Envelope
from .kinds import chirp, cycle, fast_moves, jog, pickplace, plateaus, sweep
from .tape import Tape, duration_s


def identification(
    envelopes: Mapping[str, Envelope], command_rate_hz: float, *, start: Mapping[str, float] | None = None
) -> list[Tape]:
    """Plateau sweeps (Coulomb vs viscous), fast moves (inertia) and a chirp (everything, up to rate / 50)."""
    return [
        plateaus(envelopes, command_rate_hz, start=start),
        fast_moves(envelopes, command_rate_hz, start=start),
        chirp(envelopes, command_rate_hz, start=start),
    ]


def evaluation(
    envelopes: Mapping[str, Envelope], command_rate_hz: float, seed: int, *, start: Mapping[str, float] | None = None
) -> list[Tape]:
    """Pick-and-place, out-and-back cycles, small jogs and one slow sweep, drawn from `seed`.

    Refine plays seed 0; verify plays a seed no stage has seen, so its tapes are held out.
    """
    return [builder(envelopes, command_rate_hz, seed, start=start) for builder in (pickplace, cycle, jog, sweep)]


def plan_seconds(
    tapes_by_stage: Mapping[str, Sequence[Tape]], repeats: int | Mapping[str, int] = 1
) -> dict[str, float]:
    """Seconds of motion per stage: the stage's tape durations times its repeats (a mapping defaults to 1)."""
    out = {}
    for stage, tapes in tapes_by_stage.items():
        count = repeats.get(stage, 1) if isinstance(repeats, Mapping) else repeats
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ConfigError(f"repeats must be a non-negative integer, got {count!r}", stage=stage)
        seconds = sum(duration_s(tape) for tape in tapes) * count
        if not math.isfinite(seconds):
            raise ConfigError("a tape has no finite duration", stage=stage)
        out[stage] = seconds
    return out
