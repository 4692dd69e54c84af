"""The one seam between the fleet and where its work runs: map a pure function over jobs.

`serial` runs in this process, `local` on a process pool of this machine, `ray` on Ray (a local
instance of its own by default, or the cluster at `address`). Results come back as each job finishes,
so a caller can keep them before the rest are done; an interrupt cancels what has not finished.
"""

from __future__ import annotations

import importlib.util
import logging
import multiprocessing
import os
import socket
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Callable, Iterator, Sequence

from ..errors import ConfigError

ENGINES = ("serial", "local", "ray")
STARTS = 3
"""Attempts to start Ray: its raylet must register within a fixed 30 s, which a loaded machine can miss."""

Outcome = tuple[int, Any, BaseException | None]
"""(index of the job, fn(job) or None, the exception that escaped fn or None)."""


def map_jobs(fn: Callable[[Any], Any], jobs: Sequence[Any], *, engine: str = "local", workers: int | None = None,
             address: str | None = None) -> Iterator[Outcome]:
    """Yield (index, fn(job), None) for every job as it finishes, or (index, None, error) when fn raised or
    its worker died. `fn` must be picklable (a module-level function, or a functools.partial of one)."""
    check_engine(engine, workers, address)
    if engine == "serial":
        return _serial(fn, jobs)
    if engine == "local":
        return _pool(fn, jobs, workers or os.cpu_count() or 1)
    return _ray(fn, jobs, workers, address)


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


def _serial(fn: Callable[[Any], Any], jobs: Sequence[Any]) -> Iterator[Outcome]:
    for k, job in enumerate(jobs):
        try:
            result = fn(job)
        except Exception as exc:
            yield k, None, exc
        else:
            yield k, result, None


def _pool(fn: Callable[[Any], Any], jobs: Sequence[Any], workers: int) -> Iterator[Outcome]:
    # spawn, not fork: the parent may hold threads (ROS, Ray, BLAS) that a forked child would inherit mid-lock
    pool = ProcessPoolExecutor(max_workers=min(workers, max(len(jobs), 1)),
                               mp_context=multiprocessing.get_context("spawn"))
    try:
        pending = {pool.submit(fn, job): k for k, job in enumerate(jobs)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                k = pending.pop(future)
                exc = future.exception()
                yield k, None if exc else future.result(), exc
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _call(fn: Callable[[Any], Any], job: Any) -> Any:
    return fn(job)


def start_ray(workers: int | None = None, address: str | None = None) -> bool:
    """Connect to the Ray cluster at `address`, or start a local instance of our own with `workers` CPUs
    (never an instance someone else started on this machine). Quiet; no dashboard. True when this call
    connected (the caller shuts it down), False when Ray was already initialized."""
    import ray

    if ray.is_initialized():
        return False
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
    if address:
        _check_reachable(address)
    for attempt in range(STARTS):
        try:
            if address:
                ray.init(address=address, **quiet)
            else:
                ray.init(address="local", num_cpus=workers or os.cpu_count() or 1, include_dashboard=False, **quiet)
            return True
        except Exception as exc:  # ConnectionError, a timeout, a version mismatch with the cluster, ...
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            ray.shutdown()
            if "timed out during startup" not in reason or attempt == STARTS - 1:
                raise ConfigError(f"cannot {'join' if address else 'start'} Ray: {reason}", address=address) from exc
    return True


def _check_reachable(address: str, timeout_s: float = 10.0) -> None:
    """Ray retries an address nobody answers at for minutes, logging every attempt: try it once first."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto" and the like: Ray resolves them
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConfigError(f"no Ray cluster answers at {address}: {exc.strerror or exc}") from exc


def _ray(fn: Callable[[Any], Any], jobs: Sequence[Any], workers: int | None, address: str | None
         ) -> Iterator[Outcome]:
    import ray

    started = start_ray(workers, address)
    pending: dict[Any, int] = {}
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(_call)  # a function, not a partial, for Ray
        pending = {remote.remote(fn, job): k for k, job in enumerate(jobs)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                k = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:  # RayTaskError wraps fn's own, WorkerCrashedError a dead worker
                    yield k, None, exc
                else:
                    yield k, result, None
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()
