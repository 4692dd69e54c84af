"""Files and folders that cannot be written, even by root (these machines run the tests as root, who ignores a
read-only mode), and a process that cannot grow a file (a full filesystem as the writer meets it)."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def unwritable(path: Path) -> Iterator[str]:
    """`path` (a file, or a folder: no file created, renamed or removed in it) unwritable while inside; yields how.

    Root: the immutable attribute (`chattr +i`; EPERM for every write, root included, as on a read-only mount).
    Another user: mode 0444 / 0555. Skips the test where neither is possible (no chattr, a filesystem without
    attributes, no CAP_LINUX_IMMUTABLE)."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield "read-only mode"
        finally:
            path.chmod(mode)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("no way to make a file unwritable for root here (chattr +i refused)")
    try:
        yield "immutable (chattr +i)"
    finally:
        subprocess.run([chattr, "-i", str(path)], check=True)


def file_size_limit(limit_bytes: int):
    """A `preexec_fn` for a child that cannot write a file past `limit_bytes` (RLIMIT_FSIZE, root included: the
    kernel refuses the bytes, EFBIG, as a full filesystem refuses them with ENOSPC; SIGXFSZ ignored so the write
    fails instead of killing the process)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return limit
