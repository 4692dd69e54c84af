"""What a tape is: per-joint curves with analytic derivatives, sampling, duration and plain-dict form.

A curve is one of four shapes, each C2 and at rest at both ends:
- `KnotCurve`: piecewise quintic Hermite through (time, position, velocity, acceleration) knots
  (a scipy PPoly); moves, plateaus, holds and steps are all knots.
- `SineCurve`: an offset plus a tapered sum of sines (multisine, dither; position or torque).
- `ChirpCurve`: an offset plus a tapered linear chirp.
- `FourierCurve`: whole periods of a band-limited Fourier series, at rest where each period starts (optimal).
The taper is a quintic smoothstep, so value, first and second derivative are zero where it is zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np
from scipy.interpolate import PPoly

from ..errors import ConfigError
from ..signals import JointCommands

KINDS = (
    "multisine",
    "chirp",
    "plateaus",
    "fast_moves",
    "steps",
    "pickplace",
    "cycle",
    "jog",
    "sweep",
    "dither",
    "optimal",
)
EFFORT_KINDS = ("multisine", "dither")
MODEL_KINDS = ("optimal",)  # designed for a robot model: their builders need `model=`
INTERFACES = ("position", "effort")
FORMAT_VERSION = 1


def _floats(name: str, values: object) -> tuple[float, ...]:
    try:
        out = tuple(float(v) for v in values)  # type: ignore[union-attr]
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"curve {name} must be a list of numbers") from exc
    if not all(math.isfinite(v) for v in out):
        raise ConfigError(f"curve {name} must be finite")
    return out


def _finite(name: str, value: object) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"curve {name} must be a number, got {value!r}") from exc
    if not math.isfinite(out):
        raise ConfigError(f"curve {name} must be finite, got {out}")
    return out


def smoothstep(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quintic smoothstep 10s^3 - 15s^4 + 6s^5 on s clipped to [0, 1], with d/ds and d2/ds2."""
    s = np.clip(s, 0.0, 1.0)
    return s**3 * (10 - 15 * s + 6 * s**2), 30 * s**2 * (1 - s) ** 2, 60 * s * (1 - s) * (1 - 2 * s)


def taper(tau: np.ndarray, duration_s: float, taper_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Window rising over [0, taper_s], 1 until duration_s - taper_s, falling to 0 at duration_s; and derivatives."""
    up, dup, ddup = smoothstep(tau / taper_s)
    down, ddown, dddown = smoothstep((duration_s - tau) / taper_s)
    w = up * down
    dw = dup / taper_s * down - up * ddown / taper_s
    ddw = ddup / taper_s**2 * down - 2 * dup * ddown / taper_s**2 + up * dddown / taper_s**2
    return w, dw, ddw


@dataclass(frozen=True)
class KnotCurve:
    """Piecewise quintic Hermite through knots; holds the last knot after it."""

    time_s: tuple[float, ...]
    position: tuple[float, ...]
    velocity: tuple[float, ...]
    acceleration: tuple[float, ...]

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _floats(f.name, getattr(self, f.name)))
        n = len(self.time_s)
        if n < 2 or any(len(getattr(self, f.name)) != n for f in fields(self)):
            raise ConfigError("a knot curve needs at least two knots and equal-length columns")
        if self.time_s[0] != 0.0 or any(b <= a for a, b in zip(self.time_s, self.time_s[1:])):
            raise ConfigError("knot times must start at 0 and strictly increase")

    @property
    def end_s(self) -> float:
        return self.time_s[-1]

    @cached_property
    def _polys(self) -> tuple[PPoly, PPoly, PPoly]:
        """Position, velocity and acceleration as power-basis piecewise polynomials in t - t_k.

        The quintic's coefficients are written from each segment's change in position, so rounding scales
        with the move, not with how far from zero the joint sits (a BPoly converted to powers loses that).
        """
        t, p, v, a = (np.array(x) for x in (self.time_s, self.position, self.velocity, self.acceleration))
        h, dp = np.diff(t), np.diff(p)
        v0, v1, a0, a1 = v[:-1], v[1:], a[:-1], a[1:]
        c3 = (20 * dp - (8 * v1 + 12 * v0) * h - (3 * a0 - a1) * h**2) / (2 * h**3)
        c4 = (-30 * dp + (14 * v1 + 16 * v0) * h + (3 * a0 - 2 * a1) * h**2) / (2 * h**4)
        c5 = (12 * dp - 6 * (v1 + v0) * h - (a0 - a1) * h**2) / (2 * h**5)
        poly = PPoly(np.array([c5, c4, c3, a0 / 2, v0, p[:-1]]), t)
        return poly, poly.derivative(1), poly.derivative(2)

    def evaluate(self, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t = np.clip(t_s, 0.0, self.end_s)
        out = [poly(t) for poly in self._polys]
        for index, value in ((t <= 0.0, 0), (t >= self.end_s, -1)):  # the knots themselves at both ends
            for column, knot in zip(out, (self.position, self.velocity, self.acceleration)):
                column[index] = knot[value]
        return out[0], out[1], out[2]


@dataclass(frozen=True)
class SineCurve:
    """offset + taper(t - start_s) * sum_i amplitude_i sin(2 pi freq_i (t - start_s) + phase_i); rest until end_s."""

    start_s: float
    duration_s: float
    taper_s: float
    end_s: float
    offset: float
    amplitudes: tuple[float, ...]
    freqs_hz: tuple[float, ...]
    phases_rad: tuple[float, ...]

    def __post_init__(self) -> None:
        for name in ("start_s", "duration_s", "taper_s", "end_s", "offset"):
            object.__setattr__(self, name, _finite(name, getattr(self, name)))
        for name in ("amplitudes", "freqs_hz", "phases_rad"):
            object.__setattr__(self, name, _floats(name, getattr(self, name)))
        _check_window(self)
        if not (len(self.amplitudes) == len(self.freqs_hz) == len(self.phases_rad) >= 1):
            raise ConfigError("a sine curve needs equal numbers (>= 1) of amplitudes, frequencies and phases")

    def evaluate(self, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tau = np.clip(t_s - self.start_s, 0.0, self.duration_s)
        w, dw, ddw = taper(tau, self.duration_s, self.taper_s)
        s = np.zeros_like(tau)
        ds = np.zeros_like(tau)
        dds = np.zeros_like(tau)
        for a, f, p in zip(self.amplitudes, self.freqs_hz, self.phases_rad):
            omega = 2 * math.pi * f
            sin, cos = np.sin(omega * tau + p), np.cos(omega * tau + p)
            s += a * sin
            ds += a * omega * cos
            dds -= a * omega**2 * sin
        return self.offset + w * s, dw * s + w * ds, ddw * s + 2 * dw * ds + w * dds


@dataclass(frozen=True)
class ChirpCurve:
    """offset + taper * amplitude * sin(phase) with frequency rising linearly f0_hz -> f1_hz over duration_s."""

    start_s: float
    duration_s: float
    taper_s: float
    end_s: float
    offset: float
    amplitude: float
    f0_hz: float
    f1_hz: float

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _finite(f.name, getattr(self, f.name)))
        _check_window(self)
        if not 0.0 <= self.f0_hz <= self.f1_hz:
            raise ConfigError(f"chirp frequencies must satisfy 0 <= f0 <= f1, got {self.f0_hz}, {self.f1_hz}")

    def evaluate(self, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tau = np.clip(t_s - self.start_s, 0.0, self.duration_s)
        w, dw, ddw = taper(tau, self.duration_s, self.taper_s)
        rate = (self.f1_hz - self.f0_hz) / self.duration_s
        phase = 2 * math.pi * (self.f0_hz * tau + 0.5 * rate * tau**2)
        dphase = 2 * math.pi * (self.f0_hz + rate * tau)
        ddphase = 2 * math.pi * rate
        s, c = np.sin(phase), np.cos(phase)
        a = self.amplitude
        value = a * w * s
        d1 = a * (dw * s + w * dphase * c)
        d2 = a * (ddw * s + 2 * dw * dphase * c + w * (ddphase * c - dphase**2 * s))
        return self.offset + value, d1, d2


@dataclass(frozen=True)
class FourierCurve:
    """offset + sum_l sines_l sin(l w tau) + cosines_l cos(l w tau), w = 2 pi / period_s, tau = t - start_s, over
    `periods` whole periods; its value at tau = 0 before and after. At rest where each period starts:
    sum_l l sines_l = 0 (velocity) and sum_l l^2 cosines_l = 0 (acceleration), checked when built."""

    start_s: float
    period_s: float
    periods: int
    end_s: float
    offset: float
    sines: tuple[float, ...]
    cosines: tuple[float, ...]

    def __post_init__(self) -> None:
        for name in ("start_s", "period_s", "end_s", "offset"):
            object.__setattr__(self, name, _finite(name, getattr(self, name)))
        for name in ("sines", "cosines"):
            object.__setattr__(self, name, _floats(name, getattr(self, name)))
        periods = self.periods
        if isinstance(periods, bool) or not isinstance(periods, (int, np.integer)) or periods < 1:
            raise ConfigError(f"a fourier curve needs a whole number of periods >= 1, got {periods!r}")
        object.__setattr__(self, "periods", int(periods))
        if not (self.start_s >= 0.0 and self.period_s > 0.0 and self.end_s >= self.motion_end_s):
            raise ConfigError("a fourier curve needs start_s >= 0, period_s > 0 and end_s after its periods")
        if not len(self.sines) == len(self.cosines) >= 1:
            raise ConfigError("a fourier curve needs equal numbers (>= 1) of sine and cosine coefficients")
        order = np.arange(1, len(self.sines) + 1)
        s, c = np.array(self.sines), np.array(self.cosines)
        if (
            abs(order @ s) > 1e-9 * (order @ np.abs(s)) + 1e-12
            or abs(order**2 @ c) > 1e-9 * (order**2 @ np.abs(c)) + 1e-12
        ):
            raise ConfigError(
                "a fourier curve must be at rest where its periods start: sum l sines_l and sum l^2 cosines_l must be 0"
            )

    @property
    def motion_end_s(self) -> float:
        return self.start_s + self.periods * self.period_s

    @property
    def harmonics_hz(self) -> np.ndarray:
        return np.arange(1, len(self.sines) + 1) / self.period_s

    def evaluate(self, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tau = np.clip(np.asarray(t_s, dtype=np.float64) - self.start_s, 0.0, self.periods * self.period_s)
        omega = 2 * math.pi * self.harmonics_hz
        phase = np.multiply.outer(tau, omega)
        sin, cos = np.sin(phase), np.cos(phase)
        s, c = np.array(self.sines), np.array(self.cosines)
        value = self.offset + sin @ s + cos @ c
        d1 = cos @ (omega * s) - sin @ (omega * c)
        d2 = -(sin @ (omega**2 * s) + cos @ (omega**2 * c))
        return value, d1, d2


def _check_window(curve: SineCurve | ChirpCurve) -> None:
    if not (
        curve.start_s >= 0.0
        and curve.duration_s > 0.0
        and 0.0 < 2 * curve.taper_s <= curve.duration_s
        and curve.end_s >= curve.start_s + curve.duration_s
    ):
        raise ConfigError("curve window needs start_s >= 0, 0 < 2 taper_s <= duration_s, end_s after the window")


Curve = KnotCurve | SineCurve | ChirpCurve | FourierCurve
_CURVE_TYPES: dict[str, type] = {"knots": KnotCurve, "sines": SineCurve, "chirp": ChirpCurve, "fourier": FourierCurve}


@dataclass(frozen=True)
class Tape:
    """A named, seeded motion for `joints` (one curve each) played at `command_rate_hz` on `interface`.

    Position tapes give position with velocity and acceleration feed-forward; effort tapes give torque.
    """

    name: str
    kind: str
    interface: str
    joints: tuple[str, ...]
    curves: tuple[Curve, ...]
    command_rate_hz: float
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "joints", tuple(str(j) for j in self.joints))
        object.__setattr__(self, "curves", tuple(self.curves))
        object.__setattr__(self, "command_rate_hz", _finite("command_rate_hz", self.command_rate_hz))
        if not self.name:
            raise ConfigError("a tape needs a name")
        if self.kind not in KINDS:
            raise ConfigError(f"unknown tape kind {self.kind!r}; expected one of {KINDS}", tape=self.name)
        if self.interface not in INTERFACES or (self.interface == "effort" and self.kind not in EFFORT_KINDS):
            raise ConfigError(f"a {self.kind} tape cannot use interface {self.interface!r}", tape=self.name)
        if not self.joints or len(set(self.joints)) != len(self.joints) or len(self.curves) != len(self.joints):
            raise ConfigError("a tape needs distinct joints and one curve per joint", tape=self.name)
        if not all(isinstance(c, (KnotCurve, SineCurve, ChirpCurve, FourierCurve)) for c in self.curves):
            raise ConfigError("tape curves must be KnotCurve, SineCurve, ChirpCurve or FourierCurve", tape=self.name)
        if self.interface == "effort" and not all(isinstance(c, SineCurve) for c in self.curves):
            raise ConfigError("effort tapes are sums of sines", tape=self.name)
        if self.command_rate_hz <= 0.0:
            raise ConfigError("command_rate_hz must be positive", tape=self.name)
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise ConfigError(f"tape seed must be an integer, got {self.seed!r}", tape=self.name)
        object.__setattr__(self, "seed", int(self.seed))

    def to_dict(self) -> dict[str, object]:
        """Plain lists, strings and numbers only (yaml.safe_dump-able; floats round-trip exactly)."""
        curves = []
        for curve in self.curves:
            kind = next(k for k, cls in _CURVE_TYPES.items() if isinstance(curve, cls))
            body = {f.name: (list(v) if isinstance(v := getattr(curve, f.name), tuple) else v) for f in fields(curve)}
            curves.append({"type": kind, **body})
        return {
            "format": FORMAT_VERSION,
            "name": self.name,
            "kind": self.kind,
            "interface": self.interface,
            "joints": list(self.joints),
            "command_rate_hz": self.command_rate_hz,
            "seed": self.seed,
            "curves": curves,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Tape:
        """The inverse of `to_dict`; raises ConfigError naming what is missing or wrong."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"a tape must be a mapping, got {type(data).__name__}")
        name = data.get("name")
        if data.get("format") != FORMAT_VERSION:
            raise ConfigError(f"unsupported tape format {data.get('format')!r}", tape=name)
        missing = [
            k for k in ("name", "kind", "interface", "joints", "command_rate_hz", "seed", "curves") if k not in data
        ]
        if missing:
            raise ConfigError(f"tape is missing {missing}", tape=name)
        if not isinstance(data["joints"], (list, tuple)) or not isinstance(data["curves"], (list, tuple)):
            raise ConfigError("tape joints and curves must be lists", tape=name)
        curves = []
        for raw in data["curves"]:  # type: ignore[union-attr]
            if not isinstance(raw, Mapping) or raw.get("type") not in _CURVE_TYPES:
                raise ConfigError("each curve must be a mapping with type knots, sines, chirp or fourier", tape=name)
            curve_cls = _CURVE_TYPES[raw["type"]]  # type: ignore[index]
            keys = {f.name for f in fields(curve_cls)}
            if set(raw) - {"type"} != keys:
                raise ConfigError(f"{raw['type']} curve needs exactly the keys {sorted(keys)}", tape=name)
            curves.append(curve_cls(**{k: raw[k] for k in keys}))
        return cls(
            name=str(name),
            kind=str(data["kind"]),
            interface=str(data["interface"]),
            joints=tuple(data["joints"]),
            curves=tuple(curves),  # type: ignore[arg-type]
            command_rate_hz=data["command_rate_hz"],
            seed=data["seed"],
        )  # type: ignore[arg-type]


@dataclass(frozen=True)
class TapeSample:
    """A tape at `time_s`: (N, J) position, velocity, acceleration for position tapes, or effort for effort tapes."""

    joints: tuple[str, ...]
    time_s: np.ndarray
    position: np.ndarray | None = None
    velocity: np.ndarray | None = None
    acceleration: np.ndarray | None = None
    effort: np.ndarray | None = None


def duration_s(tape: Tape) -> float:
    """Seconds from the first command to rest at the end."""
    return max(curve.end_s for curve in tape.curves)


def sample(tape: Tape, t_s: np.ndarray | Sequence[float]) -> TapeSample:
    """The tape at times `t_s` (seconds from its start; held at rest before 0 and after the end)."""
    t = np.asarray(t_s, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(t)):
        raise ConfigError("sample times must be finite", tape=tape.name)
    columns = [curve.evaluate(t) for curve in tape.curves]
    stacked = [np.column_stack([c[k] for c in columns]) if len(t) else np.zeros((0, len(columns))) for k in range(3)]
    if tape.interface == "effort":
        return TapeSample(tape.joints, t, effort=stacked[0])
    return TapeSample(tape.joints, t, position=stacked[0], velocity=stacked[1], acceleration=stacked[2])


def probe_times(tape: Tape, step_s: float = 1e-3, per_segment: int = 11) -> np.ndarray:
    """Sorted times that find a tape's peaks: every `step_s`, every knot, and `per_segment` evenly spaced
    points inside each knot segment (odd, so a ramp's mid-point, where its acceleration peaks, is one)."""
    total = duration_s(tape)
    parts = [np.linspace(0.0, total, max(2, int(math.ceil(total / step_s)) + 1))]
    fill = np.linspace(0.0, 1.0, per_segment + 2)
    for curve in tape.curves:
        if isinstance(curve, KnotCurve):
            edges = np.array(curve.time_s)
            parts.append((edges[:-1, None] + np.diff(edges)[:, None] * fill).ravel())
    return np.unique(np.concatenate(parts))


def to_commands(tape: Tape, start_ns: int = 0) -> JointCommands:
    """The tape as commands at its command rate from `start_ns` (position or effort, by the tape's interface)."""
    period_ns = 1e9 / tape.command_rate_hz
    count = int(math.ceil(duration_s(tape) * tape.command_rate_hz - 1e-9)) + 1
    offsets = np.round(np.arange(count) * period_ns).astype(np.int64)
    got = sample(tape, offsets.astype(np.float64) * 1e-9)
    values = got.effort if tape.interface == "effort" else got.position
    return JointCommands(tape.joints, np.int64(start_ns) + offsets, values, tape.interface, source=tape.name)
