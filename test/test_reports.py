"""The report module: plotly pages that open offline, the spectrum, `sysid-ros report` on bad input."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.signal

from headless_browser import check_offline_page
from sysid_ros.core.report import Page, figure, line, thin
from sysid_ros.core.report.identification import periodogram


@pytest.mark.parametrize("n", [1000, 1001])
def test_periodogram_is_scipys(n):
    x = np.random.default_rng(3).normal(size=n)
    f, p = periodogram(x, 250.0)
    g, q = scipy.signal.periodogram(x, 250.0, window="hann")
    assert np.allclose(f, g) and np.allclose(p, q)


def test_thinning_keeps_at_most_the_points_asked():
    x = np.arange(10_001.0)
    xs, ys = thin(x, 2 * x, max_points=1500)
    assert len(xs) <= 1500 and xs[0] == 0 and np.all(ys == 2 * xs)


def test_a_page_draws_its_plots_offline(tmp_path):
    page = Page("two plots")
    page.verdict("verdict: ok", "ok", ["nothing to say"])
    page.table(["a", "b"], [[1.0, float("inf")], ["x", None]], flagged=[False, True])
    t = np.arange(0, 20, 0.002)
    fig = figure("even x", "t [s]", "y")
    line(fig, t, np.sin(t), "sine")
    page.plot(fig)
    fig = figure("uneven x, markers", "x", "y", log_y=True)
    line(fig, [1, 2, 5], [1, 10, 100], "points", mode="markers")
    page.plot(fig)
    path = page.write(tmp_path / "page.html")
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]  # no temporary file left behind
    check_offline_page(path, 2)
    # 10 000 samples became at most MAX_POINTS float32 values, base64-packed: the page is plotly.js plus little
    from plotly.offline import get_plotlyjs

    assert path.stat().st_size - len(get_plotlyjs()) < 30_000


@pytest.mark.parametrize("make", [lambda d: d / "missing", lambda d: d])
def test_report_of_a_folder_without_results_is_one_line(tmp_path, make):
    folder = make(tmp_path)
    done = subprocess.run([sys.executable, "-m", "sysid_ros.cli", "report", str(folder)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "report.html").exists()
