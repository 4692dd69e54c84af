"""Point a problem at other data (the bags just recorded) without editing its file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ...errors import ConfigError
from .file import CONTROLS, DataSource, Problem


def with_data(
    problem: Problem, training: Sequence[str | Path] = (), validation: Sequence[str | Path] = (), control: str = "auto"
) -> Problem:
    """`problem` with its training and/or validation data replaced by these bags or .npz files."""
    if control not in CONTROLS:
        raise ConfigError(f"control must be one of {CONTROLS}, not {control!r}")

    def sources(paths):
        return tuple(DataSource(Path(p).expanduser().resolve(), control=control) for p in paths)

    changes = {}
    if training:
        changes["training"] = sources(training)
    if validation:
        changes["validation"] = sources(validation)
    return replace(problem, **changes) if changes else problem
