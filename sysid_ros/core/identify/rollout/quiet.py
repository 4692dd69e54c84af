"""Silencing the optimizer backends (their `verbose=False` does not)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_output(enabled: bool = True) -> Iterator[None]:
    """Silence the optimizer backends: `optimize(verbose=False)` does not. Python-level streams and
    file descriptors 1 and 2 (output from C) are both redirected."""
    if not enabled:
        yield
        return
    absl_logger = logging.getLogger("absl")
    level = absl_logger.level
    absl_logger.setLevel(logging.ERROR)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    sink = io.StringIO()
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)
        absl_logger.setLevel(level)
