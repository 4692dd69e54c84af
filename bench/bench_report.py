"""Report size and time for the demo's runs, plotly (what sysid_ros writes) and matplotlib side by side.

For each report of a demo run (identification, tuning, canary, a tape page) the same figures, with the same
thinned data, are drawn two ways: plotly with its JavaScript embedded (interactive, zoomable) and matplotlib
as inline SVG (static, no script). Measured: the file size, the time to draw and write the page from the
results on disk (best of --reps, after one warm-up; imports reported apart), and the time headless chromium
takes to load the page and finish its scripts. Goal for the written reports: < 5 MB and < 2 s.

    .venv/bin/python bench/bench_report.py [--demo DIR]   # DIR from `python -m sysid_ros.demo --out DIR`;
                                                          # without it the demo runs first (~3-5 min)
"""

from __future__ import annotations

import argparse
import html
import io
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GOAL_MB, GOAL_S = 5.0, 2.0


def timed(fn, reps: int):
    fn()  # warm-up (imports, caches)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def series(trace) -> tuple[np.ndarray, np.ndarray]:
    """x and y of a plotly scatter trace as numbers (x may be a start and a step)."""
    y = np.asarray(trace.y, dtype=float)
    x = (
        np.asarray(trace.x, dtype=float)
        if trace.x is not None
        else (trace.x0 or 0.0) + (trace.dx or 1.0) * np.arange(len(y))
    )
    return x, y


def matplotlib_page(page) -> str:
    """The page with each plotly figure drawn by matplotlib as inline SVG (lines, markers, bars, log axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    for fig in page.figures:
        mfig, ax = plt.subplots(figsize=(11, fig.layout.height / 100 if fig.layout.height else 3))
        for trace in fig.data:
            if trace.type == "bar":
                ax.bar(list(trace.x), [v or 0 for v in trace.y])
                continue
            x, y = series(trace)
            style = "o" if trace.mode and "lines" not in trace.mode else "-"
            ax.plot(x, y, style, lw=1, ms=4, label=trace.name or None)
        for shape in fig.layout.shapes or ():
            if shape.xref == "x domain":
                ax.axhline(shape.y0, ls="--", c="r", lw=0.8)
            elif shape.yref == "y domain":
                ax.axvline(shape.x0, ls=":", c="grey", lw=0.6)
        if fig.layout.xaxis.type == "log":
            ax.set_xscale("log")
        if fig.layout.yaxis.type == "log":
            ax.set_yscale("log")
        ax.set_title(fig.layout.title.text or "", fontsize=10)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        buf = io.StringIO()
        mfig.savefig(buf, format="svg", bbox_inches="tight")
        plt.close(mfig)
        text = buf.getvalue()
        out.append(text[text.index("<svg") :])
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(page.title)}</title></head>"
        "<body>" + "\n".join(page.parts).split("<div id=")[0] + "\n".join(out) + "</body></html>"
    )


def browser_s(path: Path, reps: int) -> float:
    exe = shutil.which("chromium-headless-shell") or shutil.which("chromium")
    if exe is None:
        return float("nan")
    best = float("inf")
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as profile:
            t0 = time.perf_counter()
            subprocess.run(
                [
                    exe,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    f"--user-data-dir={profile}",
                    "--dump-dom",
                    path.resolve().as_uri(),
                ],
                capture_output=True,
                timeout=300,
                check=True,
            )
            best = min(best, time.perf_counter() - t0)
    return best


def reports(demo: Path):
    """(name, function drawing the page, folder to write it in) of the demo run's reports."""
    from sysid_ros.core import tapes
    from sysid_ros.core.report import identification, tape_page, tuning
    from sysid_ros.core.tapes import Envelope

    out = []
    if (demo / "identified" / "identified.yaml").is_file():
        out.append(("identification", lambda: identification.regenerate(demo / "identified"), demo / "identified"))
    tune = sorted((demo / "tuner").glob("tune_*"))
    canary = sorted(p.parent for p in (demo / "tuner").glob("canary_*/canary.yaml"))
    if tune:
        out.append(("tuning", lambda: tuning.write_tuning_report(tune[-1]), tune[-1]))
    if canary:
        out.append(("canary", lambda: tuning.write_canary_report(canary[-1]), canary[-1]))
    env = {"hinge": Envelope(0.0, 0.4, 2.0, 3.0)}
    tape = tapes.build("pickplace", env, 250.0, 0)
    out.append(("tape (pickplace)", lambda: tape_page(tape, env, "pendulum").write(demo / "tape.html"), demo))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", type=Path, default=None, help="a demo run's folder (default: run the demo)")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    demo = args.demo
    if demo is None:
        demo = Path(tempfile.mkdtemp(prefix="bench_report_demo_"))
        print(f"running the demo into {demo} ...", flush=True)
        subprocess.run(
            [sys.executable, "-m", "sysid_ros.demo", "--out", str(demo)], check=True, stdout=subprocess.DEVNULL
        )
    t0 = time.perf_counter()
    import plotly.graph_objects  # noqa: F401

    t1 = time.perf_counter()
    import matplotlib.pyplot  # noqa: F401

    t2 = time.perf_counter()
    print(f"imports: plotly.graph_objects {t1 - t0:.2f} s, matplotlib.pyplot {t2 - t1:.2f} s")
    from sysid_ros.core.report import Page

    print(
        f"{'report':<18}{'plots':>6} | {'plotly MB':>9}{'draw s':>8}{'browser s':>10} | "
        f"{'mpl-SVG MB':>10}{'draw s':>8}{'browser s':>10} | goal < {GOAL_MB:g} MB, < {GOAL_S:g} s"
    )
    ok = True
    for name, draw, folder in reports(demo):
        pages: list[Page] = []
        original = Page.write
        Page.write = lambda self, path, _w=original: (pages.append(self), _w(self, path))[1]
        try:
            path, draw_s = timed(draw, args.reps)
        finally:
            Page.write = original
        page = pages[-1]
        size = path.stat().st_size / 1e6
        svg, mpl_s = timed(lambda: matplotlib_page(page), args.reps)
        svg_path = Path(folder) / f".bench_{path.stem}_matplotlib.html"
        svg_path.write_text(svg)
        ok &= size < GOAL_MB and draw_s < GOAL_S
        print(
            f"{name:<18}{page.plots:>6} | {size:>9.2f}{draw_s:>8.2f}{browser_s(path, args.reps):>10.2f} | "
            f"{len(svg.encode()) / 1e6:>10.2f}{mpl_s:>8.2f}{browser_s(svg_path, args.reps):>10.2f} |"
            f" {'ok' if size < GOAL_MB and draw_s < GOAL_S else 'OVER'}"
        )
        svg_path.unlink()
    print("all reports within the goal" if ok else "some report is over the goal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
