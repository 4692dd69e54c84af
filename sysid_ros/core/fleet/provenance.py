"""What produced a result: sha256 of every input file, the software, the engine, the host and the times."""

from __future__ import annotations

import hashlib
import platform
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files.paths import model_path
from ..identify.problem import Problem


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_files(path: Path) -> list[Path]:
    """A file, or every file under a folder (a rosbag2 bag: metadata.yaml and its storage files)."""
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    raise ConfigError("data file does not exist", bag=str(path))


def input_hashes(problem: Problem, problem_file: Path) -> dict[str, dict[str, str]]:
    """{problem|model|bags: {absolute path: sha256}} of every file the identification reads."""
    bags = {str(f): sha256_file(f) for src in (*problem.training, *problem.validation) for f in data_files(src.path)}
    model = model_path(problem.model)
    return {"problem": {str(problem_file): sha256_file(problem_file)}, "model": {str(model): sha256_file(model)},
            "bags": bags}


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def software() -> dict[str, Any]:
    import mujoco
    import numpy

    from ... import __version__

    return {"sysid_ros": __version__, "mujoco": mujoco.__version__, "numpy": numpy.__version__,
            "python": platform.python_version(), "host": socket.gethostname()}
