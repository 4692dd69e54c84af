"""Does the controller add the feed-forward sent in trajectory points' `effort`? Decided from one play.

ros2_control controllers differ: some add the points' effort to their PID output, others ignore it. With
the drive's reported torque, the PD law the play ran under explains the torque with the feed-forward
added or without it; whichever leaves the smaller residual says what the controller does. Samples near
the torque cap are left out (the output saturates there either way); a play with less than a second of
the rest, a feed-forward too small to tell
(its RMS under the residual of the better law), or two laws explaining the torque about as well,
decide nothing.
"""

from __future__ import annotations

import numpy as np

from .plants.joint import Telemetry

SATURATED = 0.95  # |torque| above this fraction of the cap: the law is not visible
MIN_SECONDS = 1.0  # of unsaturated samples: a short play (a move to a tape's start) may end before it shows
DECISIVE = 2.0  # one law must explain the torque this many times better than the other


def honours_feedforward(tel: Telemetry) -> bool | None:
    """True when the torque shows the feed-forward added, False when it shows it ignored, None when the
    play cannot tell (no feed-forward, too few unsaturated samples, or a feed-forward within the noise)."""
    pd = tel.kp * (tel.reference - tel.position) + tel.kd * (tel.reference_velocity - tel.velocity)
    ff = tel.feedforward
    ok = (np.abs(tel.torque) < SATURATED * tel.torque_limit_nm) & np.isfinite(tel.torque) & np.isfinite(pd)
    if ok.sum() < MIN_SECONDS * tel.command_rate_hz or not np.any(ff[ok]):
        return None
    without = float(np.sqrt(np.mean((tel.torque[ok] - pd[ok]) ** 2)))
    added = float(np.sqrt(np.mean((tel.torque[ok] - pd[ok] - ff[ok]) ** 2)))
    small = float(np.sqrt(np.mean(ff[ok] ** 2))) < min(without, added)
    if small or max(without, added) < DECISIVE * min(without, added):
        return None
    return added < without
