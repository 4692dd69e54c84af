"""The canary rule: keep a gain change only if the live cost ratio <= 1 - (1 - predicted) / 2, else roll back.

`predicted` is the tuner's own after / before cost ratio on held-out tapes; `live` is the same ratio measured
on the robot after the change. Half of the promised improvement must show up live; an aborted or non-finite
live run always rolls back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class CanaryVerdict:
    keep: bool
    live_ratio: float
    threshold: float
    reason: str


def canary_threshold(predicted_ratio: float) -> float:
    return 1.0 - 0.5 * (1.0 - predicted_ratio)


def judge_canary(live_ratio: float, predicted_ratio: float, failure: str | None = None) -> CanaryVerdict:
    """Keep or roll back; `failure` (an abort, telemetry not finite) rolls back whatever the ratio."""
    threshold = canary_threshold(predicted_ratio)
    if failure:
        return CanaryVerdict(False, live_ratio, threshold, f"roll back: {failure}")
    if not math.isfinite(live_ratio):
        return CanaryVerdict(False, live_ratio, threshold, "roll back: live cost not finite")
    if live_ratio <= threshold:
        return CanaryVerdict(True, live_ratio, threshold, f"keep: live ratio {live_ratio:.3f} <= {threshold:.3f}")
    return CanaryVerdict(False, live_ratio, threshold, f"roll back: live ratio {live_ratio:.3f} > {threshold:.3f}")
