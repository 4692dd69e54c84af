"""The online estimator's input guard: stale efforts, position jumps and runs of garbage rows pause estimation.

A drive that stops reporting (every effort exactly 0, or frozen at its last value) while the arm still moves,
an encoder that wraps (+2 pi on one joint at the same pose) or glitches, a logger that writes garbage for a
while: fitted, each looks like a payload change (a zeroed effort fitted as -3.9 kg, a wrap as -6.9 kg). The
guard looks at each row once, in time order (so its verdict does not depend on how the rows are chunked):

- a joint's effort bit-identical over `stale_effort_s` and at least `STALE_MIN_SAMPLES` rows while the joint
  moves (more than `JUMP_NOISE_RAD` over the last `stale_effort_s`) is stale (a measured torque carries noise;
  on a controller log quantized to 1 mA, five equal values in a row are a 1e-7 chance). A joint at rest with a
  constant torque (a simulated drive without torque noise, a hanging pendulum at 0 N m) is not a fault: it
  excites nothing, which the excitation request handles;
- a joint whose position moves faster than `max_jump_speed_rad_s` (plus `JUMP_NOISE_RAD`) from the previous
  good row has jumped: a wrap or a glitch, never motion;
- `STALE_MIN_SAMPLES` or more garbage rows in a row (non-finite or absurd values) are a dead input.

Each fault moves the estimator's *break* to its newest faulty row: no window and no detector check reaches
across it, so nothing measured before or during the fault is fitted with anything after it. A single garbage
row is only blanked (the filter steps around it), as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STALE_MIN_SAMPLES = 5  # rows: a stale effort or a dead input needs at least this many in a row
JUMP_NOISE_RAD = 0.01  # allowance for encoder noise on top of the speed bound


@dataclass(frozen=True)
class Fault:
    """A fault the guard found: its kind (`stale_effort`, `position_jump`, `dead_input`), the joint, the time of
    its newest faulty row (the estimator's break) and a one-line reason."""

    kind: str
    joint: str
    time_ns: int
    reason: str


class InputGuard:
    """Looks at the rows in time order (state kept across calls); `check` returns the faults they hold."""

    def __init__(self, joints: tuple[str, ...], stale_effort_s: float, max_jump_speed_rad_s: float) -> None:
        self.joints = joints
        self.stale_ns = int(round(stale_effort_s * 1e9))
        self.max_speed = float(max_jump_speed_rad_s)
        n = len(joints)
        self._effort = np.full(n, np.nan)  # the value each joint's effort has held since ...
        self._since_ns = np.zeros(n, dtype=np.int64)  # ... this row's time
        self._count = np.zeros(n, dtype=int)  # ... for this many rows
        self._q_mark = np.full(n, np.nan)  # positions at the start of the current motion check period ...
        self._mark_ns: int | None = None  # ... which began at this time
        self._moving = np.zeros(n, dtype=bool)  # moved over JUMP_NOISE_RAD in the last full period
        self._q = np.full(n, np.nan)  # the last good row's positions and time
        self._q_ns: int | None = None
        self._garbage_since: int | None = None
        self._garbage_count = 0

    def check(self, t: np.ndarray, q: np.ndarray, tau: np.ndarray, garbage: np.ndarray) -> list[Fault]:
        """The faults in these rows (`garbage`: rows the estimator blanks), oldest first."""
        faults: list[Fault] = []
        for k in range(len(t)):
            now = int(t[k])
            if garbage[k]:
                if self._garbage_count == 0:
                    self._garbage_since = now
                self._garbage_count += 1
                if self._garbage_count >= STALE_MIN_SAMPLES:
                    faults.append(
                        Fault(
                            "dead_input",
                            "",
                            now,
                            f"{self._garbage_count} rows in a row with a non-finite or absurd position or effort",
                        )
                    )
                continue
            self._garbage_count = 0
            faults += self._efforts(now, tau[k], q[k]) + self._positions(now, q[k])
        return faults

    def _efforts(self, now: int, tau: np.ndarray, q: np.ndarray) -> list[Fault]:
        same = tau == self._effort
        self._count = np.where(same, self._count + 1, 1)
        self._since_ns = np.where(same, self._since_ns, now)
        self._effort = tau.copy()
        if self._mark_ns is None or now - self._mark_ns >= self.stale_ns:
            if self._mark_ns is not None:
                self._moving = np.abs(q - self._q_mark) > JUMP_NOISE_RAD
            self._q_mark, self._mark_ns = q.copy(), now
        stale = (self._count >= STALE_MIN_SAMPLES) & (now - self._since_ns >= self.stale_ns) & self._moving
        return [
            Fault(
                "stale_effort",
                self.joints[j],
                now,
                f"the effort of {self.joints[j]} has been exactly {tau[j]:g} for "
                f"{(now - self._since_ns[j]) * 1e-9:.3f} s ({self._count[j]} rows): the drive reports nothing",
            )
            for j in np.flatnonzero(stale)
        ]

    def _positions(self, now: int, q: np.ndarray) -> list[Fault]:
        out = []
        if self._q_ns is not None:
            step = np.abs(q - self._q)
            bound = self.max_speed * (now - self._q_ns) * 1e-9 + JUMP_NOISE_RAD
            for j in np.flatnonzero(step > bound):
                wrap = abs(step[j] - 2 * np.pi * round(step[j] / (2 * np.pi))) < 0.1 and step[j] > np.pi
                out.append(
                    Fault(
                        "position_jump",
                        self.joints[j],
                        now,
                        f"the position of {self.joints[j]} jumped by {q[j] - self._q[j]:+.4g} rad in "
                        f"{(now - self._q_ns) * 1e-6:.3g} ms (over {self.max_speed:g} rad/s: "
                        f"{'an encoder wrap' if wrap else 'a glitch'})",
                    )
                )
        self._q, self._q_ns = q.copy(), now
        return out
