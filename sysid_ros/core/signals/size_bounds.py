"""Bounds on sizes derived from input (time spans, sample counts), checked before anything is allocated.

A stamp years away from the rest, a tiny step or a bag's metadata claiming 1e12 messages would otherwise ask
for gigabytes to terabytes; these give a one-line error naming what is at fault instead.
"""

from __future__ import annotations

import os
import resource

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


def memory_left() -> tuple[int, str]:
    """(bytes this process can still take, what limits it): the smaller of the address-space limit (`ulimit -v`,
    RLIMIT_AS) less the address space in use, and the memory the system has available (MemAvailable)."""
    limits = []
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm") as f:
                used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            used = 0
        text = f"the address-space limit (ulimit -v) of {soft / 2**30:.3g} GiB, {used / 2**30:.2f} GiB of it in use"
        limits.append((soft - used, text))
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
        limits.append((avail, f"the {avail / 2**30:.3g} GiB of memory the system has available"))
    except (OSError, StopIteration, ValueError):
        pass
    return min(limits) if limits else (1 << 62, "no known limit")


def check_memory(needed: int, what: str, advice: str, **where: object) -> None:
    """DataError, before anything is allocated, when `needed` bytes exceed `memory_left()`, naming the limit."""
    left, limit = memory_left()
    if needed > left:
        raise DataError(
            f"{what} needs about {needed / 2**30:.2f} GiB, more than {limit} leaves "
            f"({max(left, 0) / 2**30:.2f} GiB): {advice}",
            **where,
        )
