"""One builder per tape kind. Every builder scales its motion from the envelopes and verifies the result.

Knot tapes (plateaus, fast_moves, steps, pickplace, cycle, jog, sweep) are built from moves inside each
joint's room (90 % of travel, 80 % of top speed and acceleration; see `moves`). Sine tapes (multisine,
chirp, dither) are scaled so their peaks, measured on a grid 100 points per period of the top frequency,
sit at 98 % of the room. Every builder ends with `check_tape` against the envelope itself.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping

import numpy as np

from ..errors import ConfigError
from .envelope import Envelope, check_tape
from .moves import TORQUE_USE, KnotPath, Room, rooms
from .optimal import optimal
from .tape import ChirpCurve, Curve, SineCurve, Tape

LEAD_S = 0.25  # rest before the first move
SCALE_MARGIN = 0.98  # sine tapes peak at 98 % of the room their grid peaks were measured against
CHIRP_MAX_HZ = 2.0
RATE_PER_TOP_HZ = 50.0  # excitation stays below command rate / 50: the rows then obey J qdd = tau
PLATEAU_FRACTIONS = (0.2, 0.4, 0.6, 0.8, 1.0)


def chirp_top_hz(command_rate_hz: float) -> float:
    """The highest excitation frequency for a command rate: min(2 Hz, rate / 50)."""
    return min(CHIRP_MAX_HZ, command_rate_hz / RATE_PER_TOP_HZ)


def _rate(command_rate_hz: float) -> float:
    rate = float(command_rate_hz)
    if not (math.isfinite(rate) and rate > 0.0):
        raise ConfigError(f"command_rate_hz must be positive and finite, got {command_rate_hz}")
    return rate


def _rng(seed: int, kind: str) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"tape seed must be a non-negative integer, got {seed!r}")
    return np.random.default_rng([int(seed), zlib.crc32(kind.encode())])


def _finish(
    name: str,
    kind: str,
    interface: str,
    joints: tuple[str, ...],
    curves: tuple[Curve, ...],
    rate: float,
    seed: int,
    envelopes: Mapping[str, Envelope],
) -> Tape:
    tape = Tape(
        name=name, kind=kind, interface=interface, joints=joints, curves=curves, command_rate_hz=rate, seed=seed
    )
    check_tape(tape, envelopes)
    return tape


def _knot_tape(
    name: str,
    kind: str,
    path: KnotPath,
    joints: tuple[str, ...],
    rate: float,
    seed: int,
    envelopes: Mapping[str, Envelope],
) -> Tape:
    path.move([r.start for r in path.rooms])  # end where it started
    return _finish(name, kind, "position", joints, path.curves(), rate, seed, envelopes)


# ---- identification: plateaus, fast moves, chirp ------------------------------------------------------


def plateau_speeds_rad_s(
    r: Room, min_cruise_s: float = 0.2, fractions: tuple[float, ...] = PLATEAU_FRACTIONS
) -> tuple[float, ...]:
    """Plateau speeds: `fractions` of 80 % of top speed, lowered if the room cannot hold a `min_cruise_s` cruise."""
    span, k = r.high - r.low, 1.5 / r.accel  # a pass of speed v needs k v^2 (ramps) + min_cruise_s v (cruise)
    reach = (-min_cruise_s + math.sqrt(min_cruise_s**2 + 4 * k * span)) / (2 * k)
    return tuple(f * min(r.speed, reach) for f in fractions)


def plateaus(
    envelopes: Mapping[str, Envelope],
    command_rate_hz: float,
    *,
    start: Mapping[str, float] | None = None,
    name: str = "ident-sweeps",
    hold_s: float = 0.5,
    min_cruise_s: float = 0.2,
    max_cruise_s: float = 3.0,
) -> Tape:
    """Constant-speed passes both ways at 20-100 % of 80 % of top speed (Coulomb vs viscous friction)."""
    rate = _rate(command_rate_hz)
    joints, rooms_ = rooms(envelopes, start)
    curves = []
    for r in rooms_:  # each joint on its own clock, so every joint cruises exactly at its levels
        path = KnotPath([r])
        path.hold(LEAD_S)
        for speed in plateau_speeds_rad_s(r, min_cruise_s):
            distance = min(r.high - r.low, speed * max_cruise_s + 1.5 * speed**2 / r.accel)
            near, far = r.origin - 0.5 * distance, r.origin + 0.5 * distance
            if path.move([near]) > 0.0:
                path.hold(hold_s)
            for end in (far, near):
                path.move([end], speeds=[speed])
                path.hold(hold_s)
        path.move([r.start])
        curves.extend(path.curves())
    return _finish(name, "plateaus", "position", joints, tuple(curves), rate, 0, envelopes)


def fast_moves(
    envelopes: Mapping[str, Envelope],
    command_rate_hz: float,
    *,
    start: Mapping[str, float] | None = None,
    name: str = "ident-fast",
    amplitudes: tuple[float, ...] = (1.0, 0.5, 0.25),
    hold_s: float = 0.3,
) -> Tape:
    """Shortest moves out, across and back at shrinking `amplitudes` of the room (inertia)."""
    rate = _rate(command_rate_hz)
    joints, rooms_ = rooms(envelopes, start)
    path = KnotPath(rooms_)
    path.hold(LEAD_S)
    for amplitude in amplitudes:
        for sign in (1.0, -1.0, 0.0):
            if path.move([r.origin + sign * amplitude * r.half_span for r in rooms_]) > 0.0:
                path.hold(hold_s)
    return _knot_tape(name, "fast_moves", path, joints, rate, 0, envelopes)


def _peaks(curve: SineCurve | ChirpCurve, top_hz: float) -> tuple[float, float, float]:
    """Peak |value - offset|, |d/dt| and |d2/dt2| of a curve on a grid of 100 points per top period."""
    step = min(1e-3, 0.01 / max(top_hz, 1e-6))
    t = np.linspace(curve.start_s, curve.start_s + curve.duration_s, int(math.ceil(curve.duration_s / step)) + 1)
    value, d1, d2 = curve.evaluate(t)
    return (float(np.max(np.abs(value - curve.offset))), float(np.max(np.abs(d1))), float(np.max(np.abs(d2))))


def _position_scale(
    unit: SineCurve | ChirpCurve, r: Room, top_hz: float, joint: str, max_amplitude: float = math.inf
) -> float:
    """The largest factor that keeps a unit-amplitude curve about r.start inside the room (and max_amplitude)."""
    travel = min(r.high - r.start, r.start - r.low, max_amplitude)
    p, v, a = _peaks(unit, top_hz)
    scale = SCALE_MARGIN * min(travel / p, r.speed / v, r.accel / a)
    if not scale > 0.0:
        raise ConfigError("no room left around the start position for this tape", joint=joint)
    return scale


def chirp(
    envelopes: Mapping[str, Envelope],
    command_rate_hz: float,
    *,
    start: Mapping[str, float] | None = None,
    name: str = "ident-chirp",
    f0_hz: float = 0.1,
    duration_s: float = 20.0,
    taper_s: float = 1.0,
    pad_s: float = 0.5,
) -> Tape:
    """A position chirp from f0_hz up to min(2 Hz, command rate / 50), as large as the envelope allows."""
    rate = _rate(command_rate_hz)
    joints, rooms_ = rooms(envelopes, start)
    top = chirp_top_hz(rate)
    low = min(f0_hz, 0.5 * top)
    curves = []
    for joint, r in zip(joints, rooms_):
        unit = ChirpCurve(pad_s, duration_s, taper_s, duration_s + 2 * pad_s, r.start, 1.0, low, top)
        amplitude = _position_scale(unit, r, top, joint)
        curves.append(ChirpCurve(pad_s, duration_s, taper_s, duration_s + 2 * pad_s, r.start, amplitude, low, top))
    return _finish(name, "chirp", "position", joints, tuple(curves), rate, 0, envelopes)


# ---- sums of sines: multisine and dither ---------------------------------------------------------------


def _sine_tape(
    kind: str,
    name: str,
    envelopes: Mapping[str, Envelope],
    rate: float,
    seed: int,
    interface: str,
    start: Mapping[str, float] | None,
    draw: Callable[[np.random.Generator], tuple[np.ndarray, ...]],
    duration_s: float,
    taper_s: float,
    pad_s: float,
    top_hz: float,
    effort_frac: float,
    travel_frac: float = math.inf,
) -> Tape:
    if interface not in ("position", "effort"):
        raise ConfigError(f"interface must be position or effort, got {interface!r}")
    joints, rooms_ = rooms(envelopes, start)
    rng = _rng(seed, kind)
    curves = []
    for joint, r in zip(joints, rooms_):
        weights, freqs, phases = draw(rng)
        offset = 0.0 if interface == "effort" else r.start
        unit = SineCurve(pad_s, duration_s, taper_s, duration_s + 2 * pad_s, offset, weights, freqs, phases)
        if interface == "effort":
            scale = effort_frac * envelopes[joint].max_torque_nm / _peaks(unit, top_hz)[0]
        else:
            scale = _position_scale(unit, r, top_hz, joint, travel_frac * envelopes[joint].travel_rad)
        curves.append(
            SineCurve(pad_s, duration_s, taper_s, duration_s + 2 * pad_s, offset, tuple(scale * weights), freqs, phases)
        )
    return _finish(name, kind, interface, joints, tuple(curves), rate, seed, envelopes)


def multisine(
    envelopes: Mapping[str, Envelope],
    command_rate_hz: float,
    *,
    seed: int = 0,
    interface: str = "position",
    start: Mapping[str, float] | None = None,
    name: str | None = None,
    n_sines: int = 5,
    band_hz: tuple[float, float] = (0.2, 3.0),
    duration_s: float = 10.0,
    taper_s: float = 1.0,
    pad_s: float = 0.5,
) -> Tape:
    """Equal-weight sines at seeded frequencies in band_hz (top clipped to rate / 50) and phases."""
    rate = _rate(command_rate_hz)
    top = min(band_hz[1], rate / RATE_PER_TOP_HZ)
    low = min(band_hz[0], 0.5 * top)
    if n_sines < 1 or not 0.0 < low <= top:
        raise ConfigError(f"multisine needs n_sines >= 1 and a positive band, got {n_sines}, {band_hz}")

    def draw(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return np.full(n_sines, 1.0 / n_sines), rng.uniform(low, top, n_sines), rng.uniform(0, 2 * np.pi, n_sines)

    label = name or (f"multisine-s{seed}" if interface == "position" else f"multisine-torque-s{seed}")
    return _sine_tape(
        "multisine", label, envelopes, rate, seed, interface, start, draw, duration_s, taper_s, pad_s, top, TORQUE_USE
    )


def dither(
    envelopes: Mapping[str, Envelope],
    command_rate_hz: float,
    *,
    seed: int = 0,
    interface: str = "position",
    start: Mapping[str, float] | None = None,
    name: str | None = None,
    amplitude_frac: float = 0.02,
    freq_hz: float = 1.0,
    duration_s: float = 4.0,
    taper_s: float = 0.5,
    pad_s: float = 0.25,
) -> Tape:
    """A small sine about the start: amplitude_frac of travel (position) or of the torque limit (effort)."""
    rate = _rate(command_rate_hz)
    freq = min(freq_hz, rate / RATE_PER_TOP_HZ)
    if not (0.0 < amplitude_frac <= 1.0 and freq > 0.0):
        raise ConfigError(f"dither needs 0 < amplitude_frac <= 1 and a positive frequency, got {amplitude_frac}")

    def draw(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return np.ones(1), np.array([freq]), rng.uniform(0, 2 * np.pi, 1)

    return _sine_tape(
        "dither",
        name or f"dither-s{seed}",
        envelopes,
        rate,
        seed,
        interface,
        start,
        draw,
        duration_s,
        taper_s,
        pad_s,
        freq,
        min(amplitude_frac, TORQUE_USE),
        amplitude_frac,
    )


# ---- the servo sweep's step tape ------------------------------------------------------------------------


def steps(
    envelopes: Mapping[str, Envelope],
    command_rate_hz: float,
    *,
    start: Mapping[str, float] | None = None,
    name: str = "steps",
    small_frac: float = 0.05,
    large_frac: float = 0.15,
    hold_s: float = 0.8,
    lead_s: float = 0.8,
) -> Tape:
    """Six steps into holds: four of small_frac of travel as sharp as two command intervals and the envelope
    allow (only its own acceleration limit, if any), and two of large_frac (out and back) across the
    friction band."""
    rate = _rate(command_rate_hz)
    joints, rooms_ = rooms(envelopes, start, sharp=True)
    path = KnotPath(rooms_)
    path.hold(lead_s)
    small, large, back = [], [], []
    for joint, r in zip(joints, rooms_):
        travel = envelopes[joint].travel_rad
        sign = 1.0 if r.high - r.start >= r.start - r.low else -1.0
        small.append(r.start + sign * small_frac * travel)
        large.append(r.start + sign * large_frac * travel)
        other = r.start - sign * small_frac * travel
        back.append(other if r.low <= other <= r.high else small[-1])
    here = [r.start for r in rooms_]
    for targets in (small, here, back, here, large, here):
        path.move(targets, min_duration_s=2.0 / rate)
        path.hold(hold_s)
    return _finish(name, "steps", "position", joints, path.curves(), rate, 0, envelopes)


# ---- evaluation tapes (seeded) ----------------------------------------------------------------------------


def _eval_start(
    kind: str, envelopes: Mapping[str, Envelope], command_rate_hz: float, seed: int, start: Mapping[str, float] | None
) -> tuple[float, np.random.Generator, tuple[str, ...], list[Room], KnotPath]:
    """Rate, seeded generator, joints, rooms and a path that has rested LEAD_S: what every evaluation tape needs."""
    rate = _rate(command_rate_hz)
    rng = _rng(seed, kind)
    joints, rooms_ = rooms(envelopes, start)
    path = KnotPath(rooms_)
    path.hold(LEAD_S)
    return rate, rng, joints, rooms_, path


def _speeds(rooms_: list[Room], fraction: float) -> list[float]:
    return [fraction * r.speed for r in rooms_]


def pickplace(
    envelopes: Mapping[str, Envelope],
    command_rate_hz: float,
    seed: int,
    *,
    start: Mapping[str, float] | None = None,
    name: str | None = None,
    pairs: int = 3,
) -> Tape:
    """Pick on one side, place on the other, with dwells (stops), `pairs` times; seeded positions and speeds."""
    rate, rng, joints, rooms_, path = _eval_start("pickplace", envelopes, command_rate_hz, seed, start)
    for _ in range(pairs):
        side = rng.choice([-1.0, 1.0], len(rooms_))
        for sign in (side, -side):
            reach = rng.uniform(0.3, 0.9, len(rooms_))
            path.move(
                [r.origin + s * f * r.half_span for r, s, f in zip(rooms_, sign, reach)],
                _speeds(rooms_, rng.uniform(0.6, 1.0)),
            )
            path.hold(rng.uniform(0.4, 0.7))
    return _knot_tape(name or f"pickplace-s{seed}", "pickplace", path, joints, rate, seed, envelopes)


def cycle(
    envelopes: Mapping[str, Envelope],
    command_rate_hz: float,
    seed: int,
    *,
    start: Mapping[str, float] | None = None,
    name: str | None = None,
    cycles: int = 4,
) -> Tape:
    """Out-and-back moves from the start, alternating sides; seeded reach, speed and dwells."""
    rate, rng, joints, rooms_, path = _eval_start("cycle", envelopes, command_rate_hz, seed, start)
    sign = rng.choice([-1.0, 1.0])
    for _ in range(cycles):
        reach = rng.uniform(0.5, 0.9, len(rooms_))
        speeds = _speeds(rooms_, rng.uniform(0.7, 1.0))
        path.move([r.origin + sign * f * r.half_span for r, f in zip(rooms_, reach)], speeds)
        path.hold(rng.uniform(0.2, 0.4))
        path.move([r.start for r in rooms_], speeds)
        path.hold(rng.uniform(0.2, 0.4))
        sign = -sign
    return _knot_tape(name or f"cycle-s{seed}", "cycle", path, joints, rate, seed, envelopes)


def jog(
    envelopes: Mapping[str, Envelope],
    command_rate_hz: float,
    seed: int,
    *,
    start: Mapping[str, float] | None = None,
    name: str | None = None,
    jogs: int = 10,
) -> Tape:
    """Small jogs of 2-8 % of travel, a random walk kept inside half the room; seeded."""
    rate, rng, joints, rooms_, path = _eval_start("jog", envelopes, command_rate_hz, seed, start)
    travel = np.array([envelopes[j].travel_rad for j in joints])
    for _ in range(jogs):
        step = rng.choice([-1.0, 1.0], len(rooms_)) * rng.uniform(0.02, 0.08, len(rooms_)) * travel
        targets = []
        for r, p, s in zip(rooms_, path.position, step):
            inside = abs(p + s - r.origin) <= 0.5 * r.half_span or abs(p + s - r.origin) < abs(p - r.origin)
            targets.append(p + s if inside else p - s)
        path.move(targets, _speeds(rooms_, rng.uniform(0.3, 0.6)))
        path.hold(rng.uniform(0.3, 0.5))
    return _knot_tape(name or f"jog-s{seed}", "jog", path, joints, rate, seed, envelopes)


def sweep(
    envelopes: Mapping[str, Envelope],
    command_rate_hz: float,
    seed: int,
    *,
    start: Mapping[str, float] | None = None,
    name: str | None = None,
) -> Tape:
    """One slow sweep across 70-90 % of the room at 20-35 % of the tape speed; seeded."""
    rate, rng, joints, rooms_, path = _eval_start("sweep", envelopes, command_rate_hz, seed, start)
    sign = rng.choice([-1.0, 1.0])
    reach = rng.uniform(0.7, 0.9, len(rooms_))
    path.move([r.origin - sign * f * r.half_span for r, f in zip(rooms_, reach)])
    path.hold(0.5)
    slow = _speeds(rooms_, rng.uniform(0.2, 0.35))
    path.move([r.origin + sign * f * r.half_span for r, f in zip(rooms_, reach)], slow)
    path.hold(0.5)
    return _knot_tape(name or f"sweep-s{seed}", "sweep", path, joints, rate, seed, envelopes)


BUILDERS: dict[str, Callable[..., Tape]] = {
    "multisine": multisine,
    "chirp": chirp,
    "plateaus": plateaus,
    "fast_moves": fast_moves,
    "steps": steps,
    "pickplace": pickplace,
    "cycle": cycle,
    "jog": jog,
    "sweep": sweep,
    "dither": dither,
    "optimal": optimal,
}
SEEDED = ("multisine", "dither", "pickplace", "cycle", "jog", "sweep", "optimal")


def build(
    kind: str, envelopes: Mapping[str, Envelope], command_rate_hz: float, seed: int = 0, **options: object
) -> Tape:
    """A tape of `kind` (one of model.KINDS); `seed` is used by the seeded kinds and ignored by the others."""
    if kind not in BUILDERS:
        raise ConfigError(f"unknown tape kind {kind!r}; expected one of {tuple(BUILDERS)}")
    if kind in SEEDED:
        return BUILDERS[kind](envelopes, command_rate_hz, seed=seed, **options)
    return BUILDERS[kind](envelopes, command_rate_hz, **options)
