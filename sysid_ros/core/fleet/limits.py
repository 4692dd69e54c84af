"""The memory limits a fleet engine runs under: this process's address-space limit (`ulimit -v`, inherited by
every process it starts) and its cgroup's memory limit (v2 `memory.max`, v1 `memory.limit_in_bytes`).

Ray maps its whole object store into every process of a node (the raylet, the driver, each worker) at start;
its default size (30 % of the memory available, which reads the cgroup but not `ulimit -v`) does not fit an
8 GiB address space beside a worker's own 2.3 GB, and the driver then aborts in native code
(`shared_memory.cc: mmap failed`) leaving Ray's agents running. `ray_object_store_bytes` sizes the store to
the limits found, or refuses in one line naming the limit.
"""

from __future__ import annotations

import mmap
import resource
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

GIB = 1 << 30

RAY_PROCESS_BYTES = 3 * GIB
"""Address space a Ray worker maps besides the object store: measured 2.3 GB at its peak (VmPeak, a pendulum
robot's identification; the driver 2.1 GB, the raylet 0.8 GB), rounded up for a larger robot's job."""

RAY_STORE_MIN_BYTES = 78_643_200
"""Ray's smallest object store (`ray_constants.OBJECT_STORE_MINIMUM_MEMORY_BYTES`, 75 MiB)."""

RAY_WORKER_MEMORY_BYTES = GIB
"""Memory one Ray worker may use (as a pool worker: imports ~300 MB, an identification's peak)."""

CGROUP_FILES = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as 2^63 rounded to a page


@dataclass(frozen=True)
class MemoryLimit:
    """A limit on this process's memory: what it is called (for a message) and its size."""

    name: str
    bytes: int


def address_space_limit() -> MemoryLimit | None:
    """This process's soft RLIMIT_AS, or None when there is none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    return MemoryLimit("address-space limit (ulimit -v)", soft)


def cgroup_memory_limit(files: tuple[Path, ...] = CGROUP_FILES) -> MemoryLimit | None:
    """The memory limit of this process's cgroup (v2, else v1), or None when there is none."""
    for path in files:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < UNLIMITED:
            return MemoryLimit(f"cgroup memory limit ({path})", int(text))
    return None


def describe(limit: MemoryLimit) -> str:
    return f"the {limit.name} of {limit.bytes / GIB:.1f} GiB"


def ray_object_store_bytes(
    workers: int, address_space: MemoryLimit | None = None, cgroup: MemoryLimit | None = None
) -> int | None:
    """The object store for a local Ray instance of `workers` workers under these limits: None (Ray's own
    default) when nothing limits it; else half of what a process's address space holds beside Ray's own
    mappings, and no more than 30 % of the cgroup's memory left after the workers'. ConfigError naming the
    limit when even Ray's smallest store does not fit."""
    sizes = []
    if address_space is not None:
        room = (address_space.bytes - RAY_PROCESS_BYTES) // 2
        if room < RAY_STORE_MIN_BYTES:
            raise ConfigError(
                f"engine ray cannot run under {describe(address_space)}: each Ray process maps "
                f"{RAY_PROCESS_BYTES / GIB:.0f} GiB of its own and an object store of at least "
                f"{RAY_STORE_MIN_BYTES >> 20} MiB; raise the limit or use --engine local"
            )
        sizes.append(room)
    if cgroup is not None:
        room = int((cgroup.bytes - workers * RAY_WORKER_MEMORY_BYTES) * 0.3)
        if room < RAY_STORE_MIN_BYTES:
            raise ConfigError(
                f"engine ray with {workers} worker(s) cannot run under {describe(cgroup)}: each worker "
                f"needs {RAY_WORKER_MEMORY_BYTES / GIB:.0f} GiB and the object store at least "
                f"{RAY_STORE_MIN_BYTES >> 20} MiB; use fewer --workers or --engine local"
            )
        sizes.append(room)
    return min(sizes) if sizes else None


def check_mappable(size: int, limit: MemoryLimit) -> None:
    """ConfigError naming `limit` when this process cannot map `size` more bytes now (what Ray's driver does
    at start, in native code that aborts on failure)."""
    try:
        mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)).close()
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"engine ray cannot map its {size / GIB:.2f} GiB object store under {describe(limit)} "
            f"in this process ({exc.strerror or exc}); raise the limit or use --engine local"
        ) from exc
