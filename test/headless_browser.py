"""Open an HTML report in a real headless browser (Debian's chromium, installed by `make test`) and read back
the page after its scripts ran, with every console message the page produced and no network at all."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

BROWSERS = ("chromium-headless-shell", "chromium")
PLOT_DIV = re.compile(r'<div id="[^"]+" class="sysid-plot"')
DRAWN_PLOT = re.compile(r'class="[^"]*\bjs-plotly-plot\b')
DRAWN_TRACE = re.compile(r'class="[^"]*\btrace scatter\b')
NET_URL = re.compile(r'"url":"([^"]+)"')
REMOTE = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?(?:https?:)?//|@import""", re.I)


@dataclass(frozen=True)
class Rendered:
    dom: str
    console: list[str]
    requests: list[str]

    @property
    def plots(self) -> int:
        """Plots plotly drew (each gets the js-plotly-plot class once drawn)."""
        return len(DRAWN_PLOT.findall(self.dom))

    @property
    def traces(self) -> int:
        return len(DRAWN_TRACE.findall(self.dom))


def browser() -> str:
    """The headless browser's path, or skip the test saying why there is none."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        "no headless chromium on PATH: `make test` installs Debian's chromium-headless-shell when run as "
        "root with apt-get; install it (or chromium) to run the browser checks"
    )


def render(html_file: Path, budget_ms: int = 20000, timeout_s: float = 180.0) -> Rendered:
    """Load `html_file` headless with every host name unresolvable; the DOM after scripts, console messages."""
    with tempfile.TemporaryDirectory(prefix="sysid_ros_browser_") as profile:
        done = subprocess.run(
            [
                browser(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--enable-logging=stderr",
                "--v=0",
                f"--user-data-dir={profile}",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                f"--log-net-log={profile}/net.json",
                f"--virtual-time-budget={budget_ms}",
                "--dump-dom",
                Path(html_file).resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        requests = sorted(set(NET_URL.findall(Path(profile, "net.json").read_text(errors="replace"))))
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return Rendered(done.stdout, console, requests)


def check_offline_page(html_file: Path, expected_plots: int) -> Rendered:
    """The page names no remote resource and the browser requests none; it draws `expected_plots` plots with
    lines in them and logs nothing on the console. (plotly.js itself holds link strings, never fetched.)"""
    from plotly.offline import get_plotlyjs

    page = Path(html_file).read_text(encoding="utf-8")
    own = page.replace(get_plotlyjs(), "")
    assert len(own) < len(page) or "Plotly" not in page
    assert not REMOTE.findall(own), REMOTE.findall(own)[:5]
    assert len(PLOT_DIV.findall(page)) == expected_plots
    shown = render(html_file)
    assert shown.console == [], shown.console
    assert shown.requests == [], shown.requests
    assert shown.plots == expected_plots, (shown.plots, expected_plots)
    assert shown.traces >= expected_plots
    return shown
