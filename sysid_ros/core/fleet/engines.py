"""The one seam between the fleet and where its work runs: map a pure function over jobs.

`serial` runs in this process, `local` on a process pool of this machine, `ray` on Ray (`ray_engine.py`: a
local instance of its own by default, or the cluster at `address`). Every engine first starts its workers
and warms each of them once (`warm`: imports, caches), reports that start-up apart (`on_start`), then hands
out the jobs one at a time in the order given, so that every worker stays busy to the end. Results come
back as each job finishes, so a caller can keep them before the rest are done; an interrupt cancels what
has not finished.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .ray_engine import map_on_ray
from .workers import Outcome, Warm, warm_up

ENGINES = ("serial", "local", "ray")
STARTUP_TIMEOUT_S = 600.0
"""How long a pool worker waits for the others to be warm before it takes jobs anyway (a loaded machine)."""


@dataclass(frozen=True)
class Startup:
    """The engine's start-up, apart from the jobs: from the call until every worker was warm."""

    seconds: float
    workers: tuple[dict[str, Any], ...]  # per worker: pid, host, cores, CPU seconds to get ready, `warm`'s facts


def map_jobs(
    fn: Callable[[Any], Any],
    jobs: Sequence[Any],
    *,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    warm: Warm | None = None,
    on_start: Callable[[Startup], None] | None = None,
) -> Iterator[Outcome]:
    """Yield (index, fn(job), None) for every job as it finishes, or (index, None, error) when fn raised or
    its worker died. `fn` and `warm` must be picklable (module-level functions, or functools.partials of
    them). `warm` never fails a job: an exception in it is recorded in the worker's start-up facts.
    Cores per worker: serial all of the machine's, local the machine's cores / workers (`local_workers`: at
    most one worker per core and per GiB of memory), Ray one per actor."""
    check_engine(engine, workers, address)
    t0 = time.perf_counter()

    def started(facts: list[dict[str, Any]]) -> None:
        if on_start is not None:
            on_start(Startup(time.perf_counter() - t0, tuple(facts)))

    if engine == "serial":
        return _serial(fn, jobs, warm, started)
    if engine == "local":
        return _pool(fn, jobs, local_workers(workers)[0], warm, started)
    return map_on_ray(fn, jobs, workers, address, warm, started)


WORKER_BYTES = 1 << 30
"""Memory one local worker may need (imports ~300 MB, an identification's peak): the pool's cap per GiB."""


def _available_bytes() -> int:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 62


def local_workers(requested: int | None) -> tuple[int, str]:
    """How many pool workers this machine holds for a request (None: the CPU count): at most one per core
    and one per `WORKER_BYTES` of available memory; and why, when fewer than asked."""
    cores = os.cpu_count() or 1
    memory = max(_available_bytes() // WORKER_BYTES, 1)
    wanted = requested or cores
    n = max(min(wanted, cores, memory), 1)
    if n == wanted:
        return n, ""
    why = f"{cores} cores" if n == cores else f"{memory} GiB of memory available, {WORKER_BYTES >> 30} GiB each"
    return n, f"workers capped at {n} of the {wanted} asked ({why})"


def check_engine(engine: str, workers: int | None = None, address: str | None = None) -> None:
    """ConfigError for an engine, worker count or address that cannot work."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}; choose from {ENGINES}")
    if workers is not None and workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    if address and engine != "ray":
        raise ConfigError("address joins a Ray cluster: use it with engine ray")
    if engine == "ray" and importlib.util.find_spec("ray") is None:
        raise ConfigError("engine ray needs Ray: pip install ray (see requirements.txt)")


def _serial(
    fn: Callable[[Any], Any], jobs: Sequence[Any], warm: Warm | None, started: Callable[[list], None]
) -> Iterator[Outcome]:
    started([warm_up(warm, os.cpu_count() or 1)])
    for k, job in enumerate(jobs):
        try:
            result = fn(job)
        except Exception as exc:
            yield k, None, exc
        else:
            yield k, result, None


_WORKER: dict[str, Any] = {}  # in a pool worker: its start-up facts and the barrier of the pool's start-up


def _start_worker(warm: Warm | None, cores: int, barrier: threading.Barrier) -> None:
    """A pool worker's initializer: warm this process before it takes any job."""
    _WORKER.update(facts=warm_up(warm, cores), barrier=barrier)


def _ready() -> dict[str, Any]:
    """Hold this worker until every worker of the pool is warm (so each takes one of these), then report."""
    try:
        _WORKER["barrier"].wait(STARTUP_TIMEOUT_S)
    except threading.BrokenBarrierError:
        pass
    return _WORKER["facts"]


def _pool(
    fn: Callable[[Any], Any], jobs: Sequence[Any], workers: int, warm: Warm | None, started: Callable[[list], None]
) -> Iterator[Outcome]:
    # spawn, not fork: the parent may hold threads (ROS, Ray, BLAS) that a forked child would inherit mid-lock
    n = min(workers, max(len(jobs), 1))
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        max_workers=n,
        mp_context=context,
        initializer=_start_worker,
        initargs=(warm, max((os.cpu_count() or 1) // n, 1), context.Barrier(n)),
    )
    try:
        try:
            facts = [f.result() for f in [pool.submit(_ready) for _ in range(n)]]
        except Exception as exc:  # a worker died starting: the pool is broken, no job can run
            for k in range(len(jobs)):
                yield k, None, exc
            return
        started(facts)
        # submitted in order, each worker takes the next job when it is free (one at a time: chunksize 1)
        pending = {pool.submit(fn, job): k for k, job in enumerate(jobs)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                k = pending.pop(future)
                exc = future.exception()
                yield k, None if exc else future.result(), exc
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
