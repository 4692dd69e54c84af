"""The fleet's Ray engine: start or join Ray, then a pool of warm worker actors that each take one job at
a time. An actor imports and compiles once (`warm`) and keeps its caches for every robot it identifies,
which a fresh Ray task per robot would not.

A worker that dies (a crash in native code) fails the robot it was running; a fresh actor takes its place
for the robots still to come.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import ConfigError
from .workers import Outcome, Warm, warm_up

STARTS = 3
"""Attempts to start Ray: its raylet must register within a fixed 30 s, which a loaded machine can miss."""


LOCAL_CONFIG = {
    "enable_worker_prestart": False,
    "prestart_worker_first_driver": False,
    "enable_metrics_collection": False,
}
"""A local instance of our own: no idle task workers started ahead (the fleet runs actors, which get workers
of their own) and no metrics collection; on 2 cores they took 2.4 % of a core from the jobs while idle."""

CORES = 1
"""CPUs each worker actor reserves (and uses: its rollouts get one thread, as Ray gives it OMP_NUM_THREADS=1)."""


class Worker:
    """One warm worker process (a Ray actor): warmed when created, then runs jobs one at a time."""

    def __init__(self, warm: Warm | None) -> None:
        self.facts = warm_up(warm, CORES)

    def ready(self) -> dict[str, Any]:
        return self.facts

    def run(self, fn: Callable[[Any], Any], job: Any) -> Any:
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
                ray.init(
                    address="local",
                    num_cpus=workers or os.cpu_count() or 1,
                    include_dashboard=False,
                    _system_config=LOCAL_CONFIG,
                    **quiet,
                )
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


def map_on_ray(
    fn: Callable[[Any], Any],
    jobs: Sequence[Any],
    workers: int | None,
    address: str | None,
    warm: Warm | None,
    started: Callable[[list], None],
) -> Iterator[Outcome]:
    """`map_jobs` on Ray: `workers` actors (at most, and by default, as many as the cluster has CPUs), each
    fed its next job as it finishes one."""
    import ray
    from ray.exceptions import RayActorError

    began = start_ray(workers, address)
    actor = ray.remote(num_cpus=CORES)(Worker)
    actors: list[Any] = []
    running: dict[Any, tuple[int, Any]] = {}
    try:
        fits = max(int(ray.cluster_resources().get("CPU", 1)) // CORES, 1)  # more actors would wait for CPUs
        n = min(workers or fits, fits, max(len(jobs), 1))
        actors = [actor.remote(warm) for _ in range(n)]
        facts = []
        for ref in [a.ready.remote() for a in actors]:
            try:
                facts.append(ray.get(ref))
            except RayActorError as exc:  # it could not start; its first job fails with the reason, see below
                facts.append({"error": str(exc).strip().splitlines()[0]})
        started(facts)
        queue = deque(enumerate(jobs))

        def feed(worker: Any) -> None:
            if queue:
                k, job = queue.popleft()
                running[worker.run.remote(fn, job)] = (k, worker)

        for a in actors:
            feed(a)
        while running:
            (ref,), _ = ray.wait(list(running), num_returns=1)
            k, worker = running.pop(ref)
            try:
                outcome: Outcome = (k, ray.get(ref), None)
            except RayActorError as exc:  # the worker process died with this job: a fresh one for the rest
                outcome = (k, None, exc)
                ray.kill(worker)
                if not queue:  # nothing left for a fresh worker to do: no warm-up for nothing
                    yield outcome
                    continue
                worker = actor.remote(warm)
                actors.append(worker)
            except Exception as exc:  # RayTaskError wraps fn's own
                outcome = (k, None, exc)
            feed(worker)  # before handing the outcome over: the worker does not wait for the caller
            yield outcome
    finally:
        for a in actors:
            ray.kill(a)
        if began:
            ray.shutdown()
