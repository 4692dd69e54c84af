"""Reports people look at: one self-contained HTML page of tables and plotly plots (its JavaScript embedded,
nothing fetched), used by the identification, tuning, tape and fleet reports.

- `page`: `Page`, headings, a verdict, tables and plotly plots, written as one offline HTML file.
- `identification`, `tuning`, `tape`: the identification, tuning and tape reports.
- `redraw`: a results folder's report drawn again from the results and bags in it.
"""

from .page import Page, back_to_back, figure, line, mark_windows, thin

__all__ = ["Page", "back_to_back", "figure", "line", "mark_windows", "thin"]
