"""Reports people look at: one self-contained HTML page of tables and plotly plots (its JavaScript embedded,
nothing fetched), used by the identification, tuning, tape and fleet reports."""

from .page import Page, figure, line, thin

__all__ = ["Page", "figure", "line", "thin"]
