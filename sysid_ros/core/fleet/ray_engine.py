"""The fleet's Ray engine: start or join Ray, then a pool of warm worker actors that each take one job at
a time. An actor imports and compiles once (`warm`) and keeps its caches for every robot it identifies,
which a fresh Ray task per robot would not.

A worker that dies (a crash in native code) fails the robot it was running; a fresh actor takes its place
for the robots still to come.

A local instance's object store is sized to the memory limits this process runs under (`limits.py`), an
address is asked for Ray's handshake with a bounded wait before Ray is let at it (Ray itself retries a
silent port for minutes, printing warnings), and every process the engine started is gone when it ends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import ConfigError
from .limits import address_space_limit, cgroup_memory_limit, check_mappable, ray_object_store_bytes
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

HANDSHAKE_TIMEOUT_S = 5.0
"""How long a Ray address may take to answer the HTTP/2 handshake its GCS (a gRPC server) answers at once."""

LOG_LEVEL = "error"
"""Ray's native log level for this process and what it starts (`RAY_BACKEND_LOG_LEVEL`): its warnings (20 lines
of "Failed to connect to GCS" for one silent address) stay out of the terminal; the one-line error says why."""


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
    (never an instance someone else started on this machine) and an object store that fits this process's
    memory limits. Quiet; no dashboard. True when this call connected (the caller shuts it down), False when
    Ray was already initialized."""
    import ray

    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", LOG_LEVEL)
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
    local: dict[str, Any] = {}
    if address:
        check_ray_address(address)
    else:
        cpus = workers or os.cpu_count() or 1
        local = {"num_cpus": cpus, "include_dashboard": False, "_system_config": LOCAL_CONFIG}
        limit = address_space_limit()
        store = ray_object_store_bytes(cpus, limit, cgroup_memory_limit())
        if store is not None:
            local["object_store_memory"] = store
            if limit is not None:
                check_mappable(2 * store, limit)  # the store, and as much again for what the driver maps next
    for attempt in range(STARTS):
        try:
            with _native_errors_captured() as captured:
                ray.init(address=address or "local", **local, **quiet)
            return True
        except Exception as exc:  # ConnectionError, a timeout, a version mismatch with the cluster, ...
            reason = _first_line(str(exc)) or _first_line(captured.read()) or type(exc).__name__
            ray.shutdown()
            if "timed out during startup" not in reason or attempt == STARTS - 1:
                raise ConfigError(f"cannot {'join' if address else 'start'} Ray: {reason}", address=address) from exc
    return True


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


@contextlib.contextmanager
def _native_errors_captured() -> Iterator[Any]:
    """File descriptor 2 into a temporary file while Ray starts (its native core logs there); the file, for the
    reason of a failure."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile("w+") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield sink
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)


def check_ray_address(address: str, timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
    """ConfigError unless something at `address` answers Ray's handshake within `timeout_s`: to a port nobody
    listens on, or one that accepts and never answers, Ray retries for minutes (13 min measured) logging every
    attempt. A Ray GCS and a Ray client server are gRPC servers: they answer an HTTP/2 preface with their
    SETTINGS frame at once. (With RAY_USE_TLS the handshake is TLS's: only the port is tried.)"""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto" and the like: Ray resolves them
    deadline = time.monotonic() + timeout_s
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    except OSError as exc:
        raise ConfigError(f"no Ray cluster answers at {address}: {exc.strerror or exc}") from exc
    reply = b""
    with sock:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            return
        try:
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            while len(reply) < 9:
                sock.settimeout(max(deadline - time.monotonic(), 0.01))
                chunk = sock.recv(9 - len(reply))
                if not chunk:
                    break
                reply += chunk
        except TimeoutError as exc:
            raise ConfigError(
                f"no Ray cluster answers at {address}: the port accepts but nothing answered "
                f"Ray's handshake within {timeout_s:g} s"
            ) from exc
        except OSError as exc:  # a reset
            raise ConfigError(f"no Ray cluster answers at {address}: {exc.strerror or exc}") from exc
    if len(reply) < 9 or reply[3] != 4:  # an HTTP/2 frame header whose type is SETTINGS
        raise ConfigError(
            f"no Ray cluster answers at {address}: what listens there does not speak Ray's "
            f"protocol (it answered {reply[:16]!r})"
        )


def _ray_processes(before: set[int] = frozenset()) -> list[Any]:
    """This process's descendants that are Ray's (raylet, GCS, agents, workers) and not among `before`."""
    import psutil

    found = []
    with contextlib.suppress(psutil.Error):
        for p in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if p.pid not in before and "ray" in " ".join(p.cmdline()):
                    found.append(p)
    return found


def stop_processes(processes: list[Any], grace_s: float = 3.0) -> list[int]:
    """End those of `processes` still alive (SIGTERM, then SIGKILL after `grace_s`: Ray's agents outlive their
    raylet and ignore SIGTERM); their pids."""
    import psutil

    alive = []
    for p in processes:
        with contextlib.suppress(psutil.Error):
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, left = psutil.wait_procs(alive, timeout=grace_s)
    for p in left:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(left, timeout=grace_s)
    return [p.pid for p in alive]


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

    before = {p.pid for p in _ray_processes()}
    try:
        began = start_ray(workers, address)
    except BaseException:  # Ray refused to start: what it started on the way goes with it
        stop_processes(_ray_processes(before))
        raise
    ours = _ray_processes(before) if began else []
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
            stop_processes(ours + _ray_processes(before))  # none are left after a clean shut-down
