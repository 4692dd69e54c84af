"""The identification report of an `IdentificationResult` (drawn by `core.report.identification`)."""

from __future__ import annotations

from pathlib import Path
from ..report.identification import DATA_FILE, report_page, save_report_data
from .results import IdentificationResult, results_document


def _document(result: IdentificationResult) -> dict:
    document = results_document(result)
    document.setdefault("verdict", getattr(result, "verdict", None))
    document.setdefault("warnings", list(getattr(result, "warnings", ())))
    return document


def _page(result: IdentificationResult):
    return report_page(_document(result), result.traces, result.objective, result.problem.position_noise_rad,
                       result.problem.name)


def render_report(result: IdentificationResult) -> str:
    """The report as an HTML string."""
    return _page(result).render()


def write_report(result: IdentificationResult, path: str | Path) -> Path:
    """Write the offline HTML report and, next to it, the traces it draws (`report_data.npz`)."""
    path = Path(path)
    save_report_data(path.with_name(DATA_FILE), result.traces, result.objective, result.problem.position_noise_rad,
                     result.problem.name)
    return _page(result).write(path)
