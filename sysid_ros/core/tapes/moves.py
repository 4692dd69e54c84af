"""Motion primitives for knot tapes: rest-to-rest moves inside a joint's usable room, and holds.

A move of distance D in time T ramps speed up along a cubic smoothstep over Tr, cruises at
v = D / (T - Tr), and ramps down over Tr: peak acceleration 1.5 v / Tr, position C2. The shortest move
within speed v and acceleration a cruises when D >= 1.5 v^2 / a (T = D / v + 1.5 v / a), else it is
two ramps (T = sqrt(6 D / a)). A slower move uses the longest ramps its speed allows, so a joint that
waits for a slower partner in a synchronised move stays within its own limits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import ConfigError, EnvelopeError
from .envelope import Envelope
from .tape import KnotCurve

TRAVEL_USE = 0.9  # tapes stay within 90 % of travel, so a servo's overshoot does not trip the live guard
SPEED_USE = 0.8  # and within 80 % of top speed (the seed's "80 % of top speed" for plateaus)
ACCEL_USE = 0.8  # and 80 % of the (design) acceleration
TORQUE_USE = 0.8  # effort tapes peak at 80 % of the torque limit


@dataclass(frozen=True)
class Room:
    """Where a tape may take one joint: [low, high] around origin, at speed and accel, from start."""

    origin: float
    low: float
    high: float
    speed: float
    accel: float
    start: float

    @property
    def half_span(self) -> float:
        return 0.5 * (self.high - self.low)


def outside_room(envelope: Envelope, position: float) -> str:
    """Why a joint at `position` is outside the room tapes use (TRAVEL_USE of travel around the origin), or ''."""
    half = TRAVEL_USE * envelope.travel_rad
    if math.isfinite(position) and abs(position - envelope.origin_rad) <= half:
        return ""
    return (
        f"at {position:.4g} rad, outside the room tapes use: {envelope.origin_rad - half:.4g} to "
        f"{envelope.origin_rad + half:.4g} rad ({TRAVEL_USE:.0%} of travel_rad {envelope.travel_rad:g} around "
        f"origin_rad {envelope.origin_rad:g})"
    )


def room(envelope: Envelope, start: float | None = None, *, joint: str | None = None, sharp: bool = False) -> Room:
    """A joint's usable room; `sharp` designs to the envelope's own acceleration limit (none if unset)."""
    half = TRAVEL_USE * envelope.travel_rad
    start_rad = envelope.origin_rad if start is None else float(start)
    why = outside_room(envelope, start_rad)
    if why:
        raise EnvelopeError(f"a tape cannot start {why}", joint=joint)
    if sharp:
        accel = math.inf if envelope.max_accel_rad_s2 is None else ACCEL_USE * envelope.max_accel_rad_s2
    else:
        accel = ACCEL_USE * envelope.design_accel_rad_s2
    return Room(
        envelope.origin_rad,
        envelope.origin_rad - half,
        envelope.origin_rad + half,
        SPEED_USE * envelope.max_speed_rad_s,
        accel,
        start_rad,
    )


def rooms(
    envelopes: Mapping[str, Envelope], start: Mapping[str, float] | None = None, *, sharp: bool = False
) -> tuple[tuple[str, ...], list[Room]]:
    """Joint names and their rooms, in the mapping's order."""
    if not envelopes:
        raise ConfigError("a tape needs at least one joint envelope")
    start = start or {}
    unknown = sorted(set(start) - set(envelopes))
    if unknown:
        raise ConfigError(f"start positions for joints without an envelope: {unknown}")
    for joint, envelope in envelopes.items():
        if not isinstance(envelope, Envelope):
            raise ConfigError(f"envelope must be an Envelope, got {type(envelope).__name__}", joint=joint)
    joints = tuple(envelopes)
    return joints, [room(envelopes[j], start.get(j), joint=j, sharp=sharp) for j in joints]


def min_move_time_s(distance: float, speed: float, accel: float) -> float:
    """The shortest rest-to-rest move of `distance` within `speed` and `accel` (accel may be inf)."""
    if distance <= 0.0:
        return 0.0
    if math.isinf(accel):
        return 2.0 * distance / speed
    if distance >= 1.5 * speed**2 / accel:
        return distance / speed + 1.5 * speed / accel
    return math.sqrt(6.0 * distance / accel)


class KnotPath:
    """Builds synchronised knot curves for several joints: every move and hold starts together."""

    def __init__(self, rooms_: Sequence[Room]) -> None:
        self.rooms = list(rooms_)
        self.t = 0.0
        self.position = [r.start for r in self.rooms]
        self.knots: list[list[tuple[float, float, float, float]]] = [[(0.0, p, 0.0, 0.0)] for p in self.position]

    def hold(self, seconds: float) -> None:
        if seconds <= 0.0:
            return
        self.t += seconds
        for knots, p in zip(self.knots, self.position):
            knots.append((self.t, p, 0.0, 0.0))

    def move(
        self, targets: Sequence[float], speeds: Sequence[float] | None = None, min_duration_s: float = 0.0
    ) -> float:
        """Move every joint to its target together (each at most at its speed); return the move's seconds."""
        speeds = [r.speed for r in self.rooms] if speeds is None else list(speeds)
        targets = [min(max(float(x), r.low), r.high) for x, r in zip(targets, self.rooms)]
        # a target within rounding of where the joint is counts as staying put (no sliver segments)
        targets = [p if abs(x - p) <= 1e-12 * (1.0 + abs(p)) else x for x, p in zip(targets, self.position)]
        distances = [abs(x - p) for x, p in zip(targets, self.position)]
        duration = max(
            [min_duration_s] + [min_move_time_s(d, v, r.accel) for d, v, r in zip(distances, speeds, self.rooms)]
        )
        if duration <= 0.0:
            return 0.0
        t0, self.t = self.t, self.t + duration
        for j, (target, distance, speed) in enumerate(zip(targets, distances, speeds)):
            p0 = self.position[j]
            knots = self.knots[j]
            if distance > 0.0:
                sign = 1.0 if target > p0 else -1.0
                ramp = min(0.5 * duration, duration - distance / speed)
                cruise = distance / (duration - ramp)
                if duration - 2.0 * ramp <= 1e-9 * duration:
                    knots.append((t0 + 0.5 * duration, 0.5 * (p0 + target), sign * cruise, 0.0))
                else:
                    knots.append((t0 + ramp, p0 + sign * 0.5 * cruise * ramp, sign * cruise, 0.0))
                    knots.append((t0 + duration - ramp, target - sign * 0.5 * cruise * ramp, sign * cruise, 0.0))
            knots.append((self.t, target, 0.0, 0.0))
            self.position[j] = target
        return duration

    def curves(self) -> tuple[KnotCurve, ...]:
        out = []
        for knots in self.knots:
            t, p, v, a = zip(*knots)
            out.append(KnotCurve(t, p, v, a))
        return tuple(out)
