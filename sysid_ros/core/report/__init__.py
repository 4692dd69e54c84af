"""Reports people look at: one self-contained HTML page of tables and plotly plots (its JavaScript embedded,
nothing fetched), used by the identification, tuning, tape and fleet reports.

- `page`: `Page`, headings, a verdict, tables and plotly plots, written as one offline HTML file.
- `identification`, `tuning`, `tape`: the identification, tuning and tape reports.
- `redraw`: a results folder's report drawn again from the results and bags in it.
"""

from .. import front_door
from .redraw import redraw as redraw  # a submodule's name: imported now

EXPORTS = {
    "DATA_FILE": ".identification",
    "Page": ".page",
    "Trace": ".identification",
    "back_to_back": ".page",
    "figure": ".page",
    "line": ".page",
    "mark_windows": ".page",
    "parameter_table": ".identification",
    "periodogram": ".identification",
    "report_page": ".identification",
    "save_play": ".tuning",
    "save_report_data": ".identification",
    "tape_page": ".tape",
    "thin": ".page",
    "write_canary_report": ".tuning",
    "write_tape_page": ".tape",
    "write_tuning_report": ".tuning",
}
"""Name -> the module that defines it, imported on first use (callers pay only for what they use)."""

__getattr__, __dir__, __all__ = front_door(__name__, EXPORTS, eager=("redraw",))
