"""Bounds on sizes derived from input (time spans, sample counts), checked before anything is allocated.

A stamp years away from the rest, a tiny step or a bag's metadata claiming 1e12 messages would otherwise ask
for gigabytes to terabytes; these give a one-line error naming what is at fault instead.
"""

from __future__ import annotations

from ..errors import DataError

MAX_GRID_POINTS = 20_000_000  # 5.5 h at 1 kHz; 160 MB per float64 column


def grid_points(span_ns: int, step_ns: int, what: str, **where: object) -> int:
    """The number of `step_ns` steps in `span_ns`; DataError when above MAX_GRID_POINTS."""
    points = int(span_ns) // max(int(step_ns), 1) + 1
    if points > MAX_GRID_POINTS:
        raise DataError(
            f"{what} spans {span_ns * 1e-9:.6g} s = {points:.3g} steps of {step_ns * 1e-9:.3g} s, "
            f"more than {MAX_GRID_POINTS:.0e}: is one stamp far from the others?",
            **where,
        )
    return points
