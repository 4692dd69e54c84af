"""`sysid-ros report DIR`: draw a results folder's report.html again from the results and bags in it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import DataError
from . import identification, tuning


def _kinds() -> list[tuple[str, Callable[[Path], Path]]]:
    return [
        ("identified.yaml", identification.regenerate),
        ("proposal.yaml", tuning.write_tuning_report),
        ("canary.yaml", tuning.write_canary_report),
    ]


def redraw(folder: str | Path) -> Path:
    """Write `folder/report.html` again; DataError when the folder holds no results a report is drawn from."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder} is not a folder")
    for marker, regenerate in _kinds():
        if (folder / marker).is_file():
            try:
                return regenerate(folder)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError) as exc:
                raise DataError(
                    f"{folder / marker} (or a file beside it) is malformed: {type(exc).__name__}: {exc}"
                ) from None
    names = ", ".join(marker for marker, _ in _kinds())
    raise DataError(f"{folder} holds no results to draw a report from (none of: {names})")
