"""What every engine's worker shares: a job's outcome, and the warm-up each worker runs once before its first job."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

from threadpoolctl import threadpool_limits

Outcome = tuple[int, Any, BaseException | None]
"""(index of the job, fn(job) or None, the exception that escaped fn or None)."""
Warm = Callable[[int], "dict[str, Any] | None"]
"""Run once per worker before its first job, given the cores that worker may use (its share of the
machine); returns facts about it (e.g. models compiled) or None."""


def warm_up(warm: Warm | None, cores: int) -> dict[str, Any]:
    """Warm this process for jobs that may use `cores`; its facts: pid, host, cores, the CPU seconds it took to
    get ready (its imports and `warm`), and what `warm` returned (or the error it raised).

    A worker given fewer than all of the machine's cores also gets its native thread pools (BLAS, OpenMP)
    cut to its share: an idle OpenBLAS thread spins (1.4 s of CPU beside 3.4 s of work in one 30 s pendulum
    identification here), and two workers' spinning threads take the cores from each other's work."""
    try:
        facts = (warm(cores) if warm is not None else None) or {}
    except Exception as exc:  # a job meeting the same fault reports it as that robot's failure
        facts = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    if cores < (os.cpu_count() or 1):
        threadpool_limits(limits=cores)  # the libraries loaded by now (warm's imports); for this process's life
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "cores": cores,
        "cpu_seconds": round(time.process_time(), 3),
        **facts,
    }
