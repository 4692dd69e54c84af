"""Whether an arm has come to rest before a play: every joint slower than a fraction of its speed limit for a
stretch of robot time. One slow sample is not rest: a ringing joint passes zero speed at each swing."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SPEED_FRAC = 0.1  # at rest: every joint slower than this fraction of its envelope's speed limit
HOLD_S = 0.2  # for this long (robot seconds)


@dataclass
class RestWatch:
    """Fed joint speeds in time order; `update` says whether the arm has been at rest for `hold_s`. A speed that
    is not finite is not rest."""

    speed_limits_rad_s: np.ndarray
    hold_s: float = HOLD_S
    since_ns: int | None = field(default=None, init=False)

    @classmethod
    def for_limits(cls, max_speeds_rad_s: list[float], hold_s: float = HOLD_S) -> RestWatch:
        """At rest below `SPEED_FRAC` of each joint's speed limit."""
        return cls(SPEED_FRAC * np.asarray(max_speeds_rad_s, dtype=float), hold_s)

    def update(self, stamp_ns: int, speeds_rad_s: np.ndarray) -> bool:
        if not np.all(np.abs(np.asarray(speeds_rad_s, dtype=float)) <= self.speed_limits_rad_s):
            self.since_ns = None
            return False
        if self.since_ns is None:
            self.since_ns = stamp_ns
        return stamp_ns - self.since_ns >= self.hold_s * 1e9
