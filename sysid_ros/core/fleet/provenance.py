"""What produced a result: sha256 of every input file, the software, the engine, the host and the times."""

from __future__ import annotations

import hashlib
import platform
import socket
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mujoco
import numpy

from ... import __version__
from ..errors import ConfigError
from ..files import model_path
from ..identify import Problem

MAX_HASHED_BYTES = 16 << 30
"""The data one robot's provenance hashes at most (16 GiB: days of joint states at 1 kHz)."""
BAG_FILES = (".mcap", ".db3", ".zstd")
"""A rosbag2 folder's storage files, hashed with its metadata.yaml; nothing else in the folder is."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_files(path: Path) -> list[Path]:
    """The files that make a data source: a regular file, or a rosbag2 folder's metadata.yaml and storage
    files (regular files in it, never a link out of it, nothing else in it). ConfigError for anything else
    (an entry linked to /etc is no bag), and before any byte is read."""
    if path.is_file():
        return [path]
    if path.is_dir():
        try:
            files = sorted(
                p
                for p in path.iterdir()
                if (p.name == "metadata.yaml" or p.suffix in BAG_FILES) and stat.S_ISREG(p.lstat().st_mode)
            )
        except OSError as exc:
            raise ConfigError(f"cannot list the bag: {exc.strerror or exc}", bag=str(path)) from None
        if not any(p.suffix in BAG_FILES for p in files):
            raise ConfigError("not a rosbag2 bag: no .mcap or .db3 storage file in it", bag=str(path))
        return files
    raise ConfigError("data file does not exist", bag=str(path))


def _hashes(paths: list[Path]) -> dict[str, str]:
    files = [f for p in paths for f in data_files(p)]
    total = sum(f.stat().st_size for f in files)
    if total > MAX_HASHED_BYTES:
        raise ConfigError(
            f"the data files hold {total / (1 << 30):.3g} GiB, more than the "
            f"{MAX_HASHED_BYTES >> 30} GiB provenance hashes"
        )
    return {str(f): sha256_file(f) for f in files}


def input_hashes(problem: Problem, problem_file: Path) -> dict[str, dict[str, str]]:
    """{problem|model|bags: {absolute path: sha256}} of every file the identification reads."""
    bags = _hashes([src.path for src in (*problem.training, *problem.validation)])
    model = model_path(problem.model)
    return {
        "problem": {str(problem_file): sha256_file(problem_file)},
        "model": {str(model): sha256_file(model)},
        "bags": bags,
    }


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def software() -> dict[str, Any]:
    return {
        "sysid_ros": __version__,
        "mujoco": mujoco.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "host": socket.gethostname(),
    }
