"""The report module: plotly pages that open offline, the spectrum, `sysid-ros report` on bad input."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
import scipy.signal
import yaml
from headless_browser import check_offline_page

from sysid_ros.core.report import Page, figure, line, periodogram, thin


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
    done = subprocess.run(
        [sys.executable, "-m", "sysid_ros.cli", "report", str(folder)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "report.html").exists()


def _cli(*args: str, timeout: float = 180.0) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sysid_ros.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_tape_plot_draws_position_velocity_acceleration_and_torque_against_the_envelope(tmp_path):
    out = tmp_path / "steps.html"
    done = _cli("tapes", "plot", "--tape", "steps", "--out", str(out))  # config/tape_recorder.yaml: the pendulum
    assert done.returncode == 0 and done.stdout.strip() == str(out), done.stderr
    page = out.read_text()
    check_offline_page(out, 5)  # the plan's predicted intervals; position, velocity, acceleration, torque the
    # nominal pendulum needs
    again = _cli("tapes", "plot", "--tape", "multisine", "--out", str(out))
    assert again.returncode == 2 and "not overwritten" in again.stderr and out.read_text() == page
    # the envelope's limits as dashed lines: travel +-0.4 rad, speed +-2 rad/s, torque +-3 N m (no acceleration
    # limit in the file: none drawn)
    limits = sorted(float(v) for v in re.findall(r'"xref":"x domain","y0":(-?[\d.]+)', page))
    assert limits == [-3.0, -2.0, -0.4, 0.4, 2.0, 3.0]


def test_an_effort_tape_shows_its_torque_only(tmp_path):
    params = tmp_path / "effort.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "tape_recorder": {
                    "ros__parameters": {
                        "joints": ["hinge"],
                        "command_mode": "stream",
                        "forward_interface": "effort",
                        "command_rate_hz": 500.0,
                        "envelope": {
                            "hinge": {
                                "origin_rad": 0.0,
                                "travel_rad": 1.5,
                                "max_speed_rad_s": 6.0,
                                "max_torque_nm": 2.0,
                            }
                        },
                        "tape": {"kind": "multisine", "seed": 1},
                    }
                }
            }
        )
    )
    out = tmp_path / "multisine.html"
    done = _cli("tapes", "plot", "--params-file", str(params), "--out", str(out))
    assert done.returncode == 0, done.stderr
    check_offline_page(out, 1)
    assert "(multisine, seed 1, effort)" in out.read_text()


def test_tape_plot_of_a_missing_file_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "x.html"
    done = _cli("tapes", "plot", "--file", str(tmp_path / "none.yaml"), "--out", str(out))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not out.exists()


def test_the_foxglove_and_plotjuggler_layouts_watch_the_recorders_topics():
    import json
    import xml.etree.ElementTree as ET

    from sysid_ros.core.files import config_dir, load_ros_parameters

    params = load_ros_parameters(config_dir() / "tape_recorder.yaml", "tape_recorder")
    # the recorder's names are relative (a namespace moves them); the layouts watch a robot at the root
    topics = {
        "/" + params["feedback_topic"].lstrip("/"),
        "/diagnostics",
        f"/{params['forward_controller']}/commands",
        f"/{params['trajectory_controller']}/joint_trajectory",
    }
    joint = params["joints"][0]

    fox = json.loads((config_dir() / "foxglove_tape_recorder.json").read_text())
    panels = set(fox["configById"])

    def leaves(node):
        return [node] if isinstance(node, str) else leaves(node["first"]) + leaves(node["second"])

    assert sorted(leaves(fox["layout"])) == sorted(panels)  # every panel shown, none missing
    paths = [p["value"] for c in fox["configById"].values() for p in c.get("paths", [])]
    paths += [c["topicPath"] for c in fox["configById"].values() if "topicPath" in c]
    assert {re.match(r"(/[\w/]+?)(?:\.|$)", p).group(1) for p in paths} == topics
    assert {"/joint_states.position[0]", "/joint_states.velocity[0]", "/joint_states.effort[0]"} <= set(paths)

    root = ET.parse(config_dir() / "plotjuggler_tape_recorder.xml").getroot()
    for splitter in root.iter("DockSplitter"):
        assert int(splitter.get("count")) == len(splitter) == len(splitter.get("sizes").split(";"))
    curves = [c.get("name") for c in root.iter("curve")]
    assert {f"/joint_states/{joint}/{f}" for f in ("position", "velocity", "effort")} <= set(curves)
    assert any(c.startswith("/diagnostics/tape_recorder//tape_recorder/") for c in curves)
    [subscriber] = [p for p in root.iter("plugin") if p.get("ID") == "ROS2 Topic Subscriber"]
    selected = set(subscriber.find("selected_topics").get("value").split(";"))
    assert selected == topics
    assert all(any(c.startswith(t + "/") for t in selected) for c in curves)


def test_the_tuning_report_states_units_cost_keep_rule_and_the_feed_forward(tmp_path):
    """A proposal with a host feed-forward and a canary whose live ratio is 100x below its threshold: the gains
    table has units, cost and the keep rule are defined in words, the feed-forward is shown as part of the
    proposal, and the canary's ratios are on a log axis beside the threshold line."""
    from sysid_ros.core.report import write_tuning_report

    run = tmp_path / "tune_20261202T000000Z"
    run.mkdir()
    feedforward = {
        "inertia_kg_m2": 0.33,
        "viscous_nm_s_rad": 0.05,
        "coulomb_nm": 0.05,
        "gravity_sin_nm": 6.4,
        "gravity_cos_nm": 0.0,
        "offset_nm": 0.0,
        "coulomb_band_rad_s": 0.01,
    }
    (run / "proposal.yaml").write_text(
        yaml.safe_dump(
            {
                "joints": ["hinge"],
                "controller": "sim_robot",
                "improved": True,
                "predicted_cost_ratio": 0.01,
                "summary": "poor factory gains",
                "as_found": {"gains.hinge.p": 5.0, "gains.hinge.d": 0.2},
                "parameters": {"gains.hinge.p": 80.0, "gains.hinge.d": 1.57},
                "host_feedforward": {"hinge": feedforward},
                "bags": [],
                "seconds_of_motion": 300.0,
                "seconds_by_stage": {"identify": 87.0, "as found": 35.0, "sweep": 35.0, "refine": 83.0, "verify": 60.0},
            }
        )
    )
    canary = tmp_path / "canary_20261202T001000Z"
    canary.mkdir()
    (canary / "canary.yaml").write_text(
        yaml.safe_dump(
            {
                "proposal_file": str((run / "proposal.yaml").resolve()),
                "kept": True,
                "live_cost_ratio": 0.004,
                "predicted_cost_ratio": 0.01,
                "threshold": 0.505,
                "joints": ["hinge"],
                "bags": [],
                "reason": "keep: live ratio 0.004 <= 0.505",
            }
        )
    )
    page = write_tuning_report(run).read_text()
    text = re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>", "", page, flags=re.S))
    assert re.search(r"gains\.hinge\.p\s+N m/rad", text) and re.search(r"gains\.hinge\.d\s+N m s/rad", text)
    assert "Cost, on the same tapes" in page and "As found scores about 2" in page
    assert "Keep rule: the change is kept only if the live cost ratio &lt;= 1 - (1 - predicted ratio) / 2" in text
    assert "Host feed-forward (part of the proposal)" in page and "gravity_sin_nm" in page and "6.4" in page
    assert re.search(
        r"300 s of motion in 0 plays \(identify 87 s, as found 35 s, sweep 35 s, refine 83 s, verify 60 s\)", page
    ), page
    assert '"type":"log"' in page.replace(" ", "") and "keep threshold 0.505" in page
    check_offline_page(run / "report.html", 1)


def test_the_identification_parameter_table_gives_each_kinds_unit():
    """Each parameter row names the unit of its kind's values, next to the value."""
    from sysid_ros.core.report import parameter_table

    page = Page("parameters")
    row = {
        "value": 0.1,
        "half_width_95": 0.01,
        "start": 0.2,
        "min": 0.0,
        "max": 1.0,
        "frozen": False,
        "identifiable": True,
    }
    parameter_table(
        page,
        {
            "damping": {**row, "kind": "joint_damping", "target": "hinge"},
            "pole": {**row, "kind": "body_mass", "target": "pole"},
        },
    )
    text = re.sub(r"<[^>]+>", "|", page.render().split("</head>")[1])
    assert re.search(r"joint_damping hinge\|+N m s/rad\|+0\.1\|", text) and re.search(r"body_mass pole\|+kg\|", text)
