"""Reports people look at: one self-contained HTML page of tables and plotly plots (its JavaScript embedded,
nothing fetched), used by the identification, tuning, tape and fleet reports."""

from .page import Page, back_to_back, figure, line, mark_windows, thin

__all__ = ["Page", "back_to_back", "figure", "line", "mark_windows", "thin"]
