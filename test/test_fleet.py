"""`sysid-ros fleet identify` on six simulated pendulums, each with its own hidden physics, on Ray.

Day 1 (the baseline) all six record good bags; day 2 they record again (new noise, new excitation seeds):
r5's bag is corrupt (its mcap file cut short) and r6 carries a 0.25 kg payload. Day 2 must identify the
five others within their 95 % intervals of their truths, report r5 failed with the reason, flag r6's pole
mass as drifted and nothing else. Bags: 6 s training, 3 s held out, 500 Hz, 0.5 mrad noise.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
import yaml
from headless_browser import check_offline_page

from support.synthetic import record_pendulum, write_effort_bag
from sysid_ros.cli import main
from sysid_ros.core.errors import ConfigError
from sysid_ros.core.fleet import drift, fleet_statistics, identify_robot, load_manifest, longest_first, run_fleet

PHYSICS = {  # pole.mass kg, hinge.damping N m s/rad, hinge.frictionloss N m
    "r1": (1.20, 0.06, 0.040),
    "r2": (1.30, 0.08, 0.050),
    "r3": (1.40, 0.10, 0.060),
    "r4": (1.25, 0.07, 0.045),
    "r5": (1.35, 0.09, 0.055),
    "r6": (1.30, 0.08, 0.050),
}
PAYLOAD_KG = 0.25  # added to r6's pole on day 2
PARAMS = ("pole_mass", "hinge_damping", "hinge_frictionloss")
PROBLEM = {
    "model": "pendulum",
    "joints": ["hinge"],
    "training": ["placeholder"],
    "noise": {"position_rad": 5e-4, "velocity_rad_s": 5e-3},
    "parameters": [
        {"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0, "start": 1.0},
        {"name": "hinge_damping", "kind": "joint_damping", "joint": "hinge", "min": 0.0, "max": 1.0, "start": 0.02},
        {
            "name": "hinge_frictionloss",
            "kind": "joint_frictionloss",
            "joint": "hinge",
            "min": 0.0,
            "max": 1.0,
            "start": 0.02,
        },
    ],
}


def truth(robot: str, day: int) -> dict[str, float]:
    mass, damping, friction = PHYSICS[robot]
    if robot == "r6" and day == 2:
        mass += PAYLOAD_KG
    return {"pole_mass": mass, "hinge_damping": damping, "hinge_frictionloss": friction}


def record_day(folder: Path, day: int) -> Path:
    """Each robot's training and held-out bag; the manifest (r1 with a problem file of its own, the rest
    sharing one problem with their bags given per robot)."""
    robots = []
    for k, robot in enumerate(PHYSICS):
        t = truth(robot, day)
        physics = {
            "pole.mass": t["pole_mass"],
            "hinge.damping": t["hinge_damping"],
            "hinge.frictionloss": t["hinge_frictionloss"],
        }
        bags = []
        for role, seconds, seed in (("train", 6.0, 100 * day + 2 * k), ("val", 3.0, 100 * day + 2 * k + 1)):
            bags.append(write_effort_bag(folder / "bags" / f"{robot}_{role}", *record_pendulum(physics, seed, seconds)))
        robots.append(
            {
                "name": robot,
                "train": [f"bags/{robot}_train"],
                "validate": [f"bags/{robot}_val"],
                "control": "effort",
                "tags": {"site": "lab", "model": "pendulum"},
            }
        )
    if day == 2:  # r5's recording cut short mid-file
        mcap = next((folder / "bags" / "r5_train").glob("*.mcap"))
        mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])
    (folder / "pendulum.yaml").write_text(yaml.safe_dump(PROBLEM))
    own = {
        **PROBLEM,
        "training": [{"bag": "bags/r1_train", "control": "effort"}],
        "validation": [{"bag": "bags/r1_val", "control": "effort"}],
    }
    (folder / "r1.yaml").write_text(yaml.safe_dump(own))
    robots[0] = {"name": "r1", "problem": "r1.yaml"}
    manifest = folder / "fleet_manifest.yaml"
    manifest.write_text(yaml.safe_dump({"problem": "pendulum.yaml", "robots": robots}, sort_keys=False))
    return manifest


def cli(*args: str, env: dict | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sysid_ros.cli", "fleet", "identify", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kw,
    )


@pytest.fixture(scope="module")
def days(tmp_path_factory):
    """Both days' bags; day 1 identified serially in this process as the baseline."""
    root = tmp_path_factory.mktemp("fleet")
    manifests = {}
    for day in (1, 2):
        (root / f"day{day}").mkdir()
        manifests[day] = record_day(root / f"day{day}", day)
    baseline = run_fleet(manifests[1], root / "out1", engine="serial")
    return root, manifests, baseline


@pytest.fixture(scope="module")
def ray_run(days):
    """Day 2 on Ray (a local instance of the CLI's own, 2 workers), against day 1; Ray's files in a folder
    of this test so that its processes can be found afterwards."""
    root, manifests, _ = days
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's unix sockets live under it
    env = {**os.environ, "RAY_TMPDIR": ray_tmp}
    proc = cli(
        str(manifests[2]),
        "--out",
        str(root / "out2"),
        "--engine",
        "ray",
        "--workers",
        "2",
        "--baseline",
        str(root / "out1"),
        env=env,
    )
    out, err = proc.communicate(timeout=600)
    yield proc.returncode, out, err, yaml.safe_load((root / "out2" / "fleet.yaml").read_text()), ray_tmp
    shutil.rmtree(ray_tmp, ignore_errors=True)  # Ray's session logs


def test_baseline_all_ok_and_within_intervals(days):
    _, _, baseline = days
    assert [r["status"] for r in baseline["robots"].values()] == ["ok"] * 6
    for robot, r in baseline["robots"].items():
        for name, value in truth(robot, 1).items():
            p = r["parameters"][name]
            assert abs(p["value"] - value) <= p["half_width_95"], (robot, name, p, value)
    assert all(not s["outliers"] for s in baseline["parameters"].values())


def test_ray_run_reports_failed_drifted_and_the_rest_clean(days, ray_run):
    root, _, _ = days
    rc, out, err, doc, _ = ray_run
    assert rc == 1, (out, err)  # one robot failed: non-zero, everyone else's results written
    robots = doc["robots"]
    assert doc["fleet"]["engine"] == "ray" and doc["fleet"]["counts"] == {
        "ok": 5,
        "suspect": 0,
        "failed": 1,
        "resumed": 0,
    }
    assert robots["r5"]["status"] == "failed" and "r5_train" in robots["r5"]["reason"], robots["r5"]
    assert not (root / "out2" / "r5").exists()
    assert "r5" in out and robots["r5"]["reason"][:40] in out
    for robot in ("r1", "r2", "r3", "r4", "r6"):
        r = robots[robot]
        assert r["status"] == "ok" and r["verdict"] == "ok", r
        for name, value in truth(robot, 2).items():  # within the 95 % interval of its truth
            p = r["parameters"][name]
            assert abs(p["value"] - value) <= p["half_width_95"], (robot, name, p, value)
        assert (root / "out2" / robot / "identified.yaml").is_file()
        assert r["drifted"] == (["pole_mass"] if robot == "r6" else []), (robot, r["drifted"])
    moved = doc["drift"]["drifted"]["r6"]["pole_mass"]
    assert moved["moved"] == pytest.approx(PAYLOAD_KG, rel=0.02)
    assert set(doc["drift"]["drifted"]) == {"r6"} and "drifted: r6 pole_mass" in out
    assert "ray: 2 worker(s) ready in" in out  # the start-up printed apart from the robots
    assert doc["drift"]["not_compared"] == {"r5": "not identified ok now (failed)"}
    assert set(doc["parameters"]) == set(PARAMS)


def test_provenance_hashes_every_input(days, ray_run):
    root, manifests, _ = days
    doc = ray_run[3]
    sha = lambda p: hashlib.sha256(Path(p).read_bytes()).hexdigest()  # noqa: E731
    for robot in ("r2", "r6"):
        prov = yaml.safe_load((root / "out2" / robot / "provenance.yaml").read_text())
        assert prov == doc["robots"][robot]["provenance"]
        bags = root / "day2" / "bags"
        files = sorted(str(f) for role in ("train", "val") for f in (bags / f"{robot}_{role}").iterdir())
        assert sorted(prov["inputs"]["bags"]) == files and len(files) == 4  # metadata.yaml + .mcap per bag
        assert all(prov["inputs"]["bags"][f] == sha(f) for f in files)
        assert prov["inputs"]["problem"] == {str(root / "day2" / "pendulum.yaml"): sha(root / "day2" / "pendulum.yaml")}
        ((model, digest),) = prov["inputs"]["model"].items()
        assert model.endswith("pendulum.xml") and digest == sha(model)
        assert prov["engine"] == "ray" and prov["verdict"] == "ok" and prov["warnings"] == []
        assert prov["mujoco"] == "4.0.0" and prov["host"] and prov["start"] < prov["end"]
    assert doc["robots"]["r1"]["provenance"]["inputs"]["problem"] == {
        str(root / "day2" / "r1.yaml"): sha(root / "day2" / "r1.yaml")
    }
    # two warm Ray workers: each compiled the shared model once at start-up, no robot's job compiled it
    provs = [r["provenance"] for r in doc["robots"].values() if r["status"] == "ok"]
    startup = doc["fleet"]["startup"]
    assert [(w["cores"], w["models_compiled"]) for w in startup["workers"]] == [(1, 1), (1, 1)], startup
    assert not any(p["model_compiled"] for p in provs) and {p["pid"] for p in provs} <= {
        w["pid"] for w in startup["workers"]
    }


def test_ray_left_no_process_behind(ray_run):
    assert not ray_processes_of(ray_run[4])


def test_fleet_html_is_an_offline_page(days, ray_run):
    """One plot per parameter, drawn by the embedded plotly.js in a real headless browser, nothing fetched."""
    root, _, _ = days
    page = root / "out2" / "fleet.html"
    check_offline_page(page, len(PARAMS))
    text = page.read_text()
    assert "r5" in text and "drifted" in text and "pole_mass" in text


def test_rerun_resumes_finished_robots(days, ray_run):
    root, manifests, _ = days
    before = {r: (root / "out2" / r / "identified.yaml").stat().st_mtime_ns for r in ("r1", "r6")}
    proc = cli(str(manifests[2]), "--out", str(root / "out2"), "--engine", "serial", "--baseline", str(root / "out1"))
    out, err = proc.communicate(timeout=300)
    doc = yaml.safe_load((root / "out2" / "fleet.yaml").read_text())
    assert proc.returncode == 1, err
    assert {r for r, d in doc["robots"].items() if d["resumed"]} == {"r1", "r2", "r3", "r4", "r6"}
    assert doc["robots"]["r5"]["status"] == "failed" and doc["robots"]["r6"]["drifted"] == ["pole_mass"]
    assert before == {r: (root / "out2" / r / "identified.yaml").stat().st_mtime_ns for r in ("r1", "r6")}


def test_interrupt_keeps_finished_robots_and_resumes(days, tmp_path):
    """Ctrl-C after the first robot finished: exit 130, its results complete, no half-written folder."""
    _, manifests, _ = days
    out = tmp_path / "out"
    # Ctrl-C as a terminal delivers it: SIGINT at its default in the child, also when this suite runs in the
    # background (`cmd &` in a script starts with SIGINT ignored, Python keeps it so, and the run went on to exit 0)
    proc = cli(
        str(manifests[1]),
        "--out",
        str(out),
        "--engine",
        "serial",
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    first = proc.stdout.readline()  # whichever robot ends first (largest bags start first; sizes vary with load)
    robot = first.split()[0] if first.strip() else ""
    assert robot.startswith("r") and " ok " in first, (first, proc.stderr.read() if proc.poll() else "")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    assert (out / robot / "provenance.yaml").is_file() and not (out / "fleet.yaml").exists()
    assert not list(out.glob(".*")), list(out.glob(".*"))
    done = sorted(p.name for p in out.iterdir())
    doc = run_fleet(manifests[1], out, engine="serial")
    assert {r for r, d in doc["robots"].items() if d["resumed"]} == set(done)
    assert doc["fleet"]["counts"]["ok"] == 6


@pytest.mark.parametrize(
    "args, message",
    [
        (["--baseline", "{root}/nowhere"], "no readable fleet run"),
        (["--engine", "local", "--address", "1.2.3.4:6379"], "address joins a Ray cluster"),
        (["--workers", "0"], "workers must be >= 1"),
        (["--engine", "ray", "--address", "127.0.0.1:1"], "no Ray cluster answers at 127.0.0.1:1"),
    ],
)
def test_bad_input_one_line_nothing_written(days, tmp_path, capsys, args, message):
    root, manifests, _ = days
    rc = main(
        ["fleet", "identify", str(manifests[2]), "--out", str(tmp_path / "out"), *[a.format(root=root) for a in args]]
    )
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"robots": []}, "non-empty list"),
        ({"robots": [{"name": "a b", "problem": "p.yaml"}]}, "needs a name"),
        ({"robots": [{"name": "a", "problem": "p.yaml"}, {"name": "a", "problem": "p.yaml"}]}, "share this name"),
        ({"robots": [{"name": "a"}]}, "names no problem file"),
        ({"robots": [{"name": "a", "problem": "p.yaml", "bag": "x"}]}, "unknown keys"),
        ({"problem": "p.yaml", "robots": [{"name": "a", "control": "torque"}]}, "control must be"),
    ],
)
def test_manifest_refused(tmp_path, doc, message):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=message):
        load_manifest(path)


def test_robust_outliers_and_drift_rules():
    # six alike robots and one 0.3 kg heavier: MAD 0.01, scale 0.0148, z = 0.3 / 0.0148 = 20 > 3.5 for g;
    # the others |z| <= 0.02 / 0.0148 = 1.35 (g's own deviation does not widen the scale, as a std would)
    values = {"a": 1.30, "b": 1.32, "c": 1.28, "d": 1.31, "e": 1.29, "f": 1.30, "g": 1.60}
    stats = fleet_statistics({"m": {r: (v, 1e-3) for r, v in values.items()}})["m"]
    assert stats["outliers"] == ["g"] and stats["median"] == pytest.approx(1.30)
    assert stats["z"]["g"] == pytest.approx(0.3 / (1.4826 * 0.01))
    assert max(abs(z) for r, z in stats["z"].items() if r != "g") == pytest.approx(0.02 / (1.4826 * 0.01))
    # identical robots: the spread is 0, the scale falls back to the estimates' own standard error
    same = fleet_statistics({"m": {r: (1.3 + 1e-4 * (r == "a"), 1.96e-4) for r in "abcd"}})["m"]
    assert same["outliers"] == [] and same["scale"] == pytest.approx(1e-4)
    # drift: intervals that still overlap are not drift; disjoint ones are; an infinite interval is not judged
    ok = lambda v, h: {"status": "ok", "parameters": {"m": {"value": v, "half_width_95": h}}}  # noqa: E731
    moved = drift(
        {"a": ok(1.0019, 0.001), "b": ok(1.0021, 0.001), "c": ok(2.0, float("inf"))},
        {"robots": {"a": ok(1.0, 0.001), "b": ok(1.0, 0.001), "c": ok(1.0, 0.001)}},
    )
    assert set(moved["drifted"]) == {"b"} and moved["compared"] == ["a", "b", "c"]


def three_robots(days, folder: Path) -> Path:
    """A manifest of three of day 1's robots (r2, r3, r4), with absolute paths."""
    root, manifests, _ = days
    doc = yaml.safe_load(manifests[1].read_text())
    doc = {
        "problem": str(root / "day1" / doc["problem"]),
        "robots": [
            {
                **r,
                "train": [str(root / "day1" / p) for p in r["train"]],
                "validate": [str(root / "day1" / p) for p in r["validate"]],
            }
            for r in doc["robots"][1:4]
        ],
    }
    (folder / "three.yaml").write_text(yaml.safe_dump(doc))
    return folder / "three.yaml"


def test_local_pool_warms_each_worker_once_and_agrees_with_serial(days, tmp_path):
    """Three of day 1's robots on a pool of 2: both workers warmed (imports, the model compiled, one rollout
    thread each on 2 cores) before any job, every job run in one of them, values bit-identical to serial."""
    root, manifests, baseline = days
    doc = run_fleet(three_robots(days, tmp_path), tmp_path / "out", engine="local", workers=2)
    workers = doc["fleet"]["startup"]["workers"]
    assert len(workers) == 2 and all(w["models_compiled"] == 1 and "error" not in w for w in workers), workers
    assert all(w["cores"] == max((os.cpu_count() or 1) // 2, 1) for w in workers)
    fleet = doc["fleet"]
    assert fleet["startup"]["seconds"] > 0 and fleet["jobs_seconds"] > 0 and fleet["shutdown_seconds"] >= 0
    # the run's time split in three: start-up, the jobs (until the last robot's result), the pool's shut-down
    assert (
        abs(fleet["startup"]["seconds"] + fleet["jobs_seconds"] + fleet["shutdown_seconds"] - fleet["seconds"]) < 0.01
    )
    assert max(r["seconds"] for r in doc["robots"].values()) <= fleet["jobs_seconds"]
    provs = [r["provenance"] for r in doc["robots"].values()]
    assert not any(p["model_compiled"] for p in provs) and {p["pid"] for p in provs} <= {w["pid"] for w in workers}
    values = {n: {k: p["value"] for k, p in r["parameters"].items()} for n, r in doc["robots"].items()}
    assert values == {n: {k: p["value"] for k, p in baseline["robots"][n]["parameters"].items()} for n in values}
    assert sorted(values) == ["r2", "r3", "r4"]


def test_cluster_of_two_ray_nodes_joined_by_address(days, tmp_path):
    """`--address` joins a Ray cluster of two nodes on this machine (`ray.cluster_utils.Cluster`: a head and a
    second node, each its own raylet with one CPU, as `ray start --head` and `ray start --address` make on two
    machines). The CLI asks the cluster for its CPUs (2 workers), three of day 1's robots run on both nodes (a
    worker's node: the raylet that started its process), and every value and interval equals the serial
    baseline's bit for bit."""
    from ray.cluster_utils import Cluster

    _, _, baseline = days
    manifest = three_robots(days, tmp_path)
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's unix sockets live under it
    node_of: dict[int, int] = {}  # worker pid -> its raylet's pid
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_TMPDIR", ray_tmp)
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        try:
            cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            raylets = [psutil.Process(node.all_processes["raylet"][0].process.pid) for node in cluster.list_all_nodes()]
            proc = cli(
                str(manifest),
                "--out",
                str(tmp_path / "out"),
                "--engine",
                "ray",
                "--address",
                cluster.address,
                env={**os.environ},
            )
            while proc.poll() is None:  # the workers live only as long as the run
                for raylet in raylets:
                    node_of.update({child.pid: raylet.pid for child in raylet.children()})
                time.sleep(0.2)
            out, err = proc.communicate(timeout=600)
        finally:
            cluster.shutdown()
            shutil.rmtree(ray_tmp, ignore_errors=True)
    assert proc.returncode == 0, (out, err)
    doc = yaml.safe_load((tmp_path / "out" / "fleet.yaml").read_text())
    workers = [w["pid"] for w in doc["fleet"]["startup"]["workers"]]
    assert len(workers) == 2 and {node_of[w] for w in workers} == {r.pid for r in raylets}, (workers, node_of)
    assert {node_of[r["provenance"]["pid"]] for r in doc["robots"].values()} == {r.pid for r in raylets}
    assert sorted(doc["robots"]) == ["r2", "r3", "r4"]
    for name, r in doc["robots"].items():
        assert r["status"] == "ok"
        for k, p in r["parameters"].items():
            same = baseline["robots"][name]["parameters"][k]
            assert (p["value"], p["half_width_95"]) == (same["value"], same["half_width_95"]), (name, k)


def ray_processes_of(ray_tmp: str) -> list[dict]:
    """Every live process whose command line names this run's Ray folder (raylet, GCS)."""
    return [
        p.info
        for p in psutil.process_iter(["pid", "cmdline", "status"])
        if ray_tmp in " ".join(p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE
    ]


def run_watching_descendants(proc: subprocess.Popen) -> tuple[str, str, list[psutil.Process]]:
    """Wait for `proc`, collecting every process it starts (polled every 0.1 s): Ray's agents and workers rename
    themselves (`ray::DashboardAgent`) and their environment is overwritten, so nothing else tells them apart
    from another run's once their parent is gone."""
    seen: dict[int, psutil.Process] = {}
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            seen.update({c.pid: c for c in root.children(recursive=True)})
        except psutil.Error:
            pass
        time.sleep(0.1)
    out, err = proc.communicate(timeout=600)
    return out, err, list(seen.values())


def still_running(processes: list[psutil.Process], timeout_s: float = 10.0) -> list[str]:
    """Those of `processes` alive after `timeout_s` (a clean exit's children are already gone)."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = []
        for p in processes:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{p.pid} {' '.join(p.cmdline())[:60]}")
            except psutil.Error:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


@pytest.mark.parametrize("limit_gib, refused", [(8, False), (2, True)])
def test_ray_under_an_address_space_limit(days, tmp_path, limit_gib, refused):
    """`ulimit -v` of 8 GiB (what Ray's default object store, 30 % of the memory, overflowed: the driver aborted in
    native code and left two Ray agents running) identifies three robots, the store sized to the limit; 2 GiB
    is refused in one line naming the limit. Either way no Ray process of the run is left."""
    import resource

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_gib << 30, resource.RLIM_INFINITY))

    _, _, baseline = days
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's unix sockets live under it
    try:
        proc = cli(
            str(three_robots(days, tmp_path)),
            "--out",
            str(tmp_path / "out"),
            "--engine",
            "ray",
            "--workers",
            "2",
            env={**os.environ, "RAY_TMPDIR": ray_tmp},
            preexec_fn=limited,
        )
        out, err, started = run_watching_descendants(proc)
        left = still_running(started) + ray_processes_of(ray_tmp)
    finally:
        for p in started if "started" in locals() else []:  # the test's own clean-up, after the check
            with contextlib.suppress(psutil.Error):
                p.kill()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert not left, left
    if refused:
        assert proc.returncode == 2 and len(err.strip().splitlines()) == 1, err
        assert "address-space limit (ulimit -v) of 2.0 GiB" in err and not (tmp_path / "out").exists()
        return
    assert proc.returncode == 0 and err.strip() == "", err
    doc = yaml.safe_load((tmp_path / "out" / "fleet.yaml").read_text())
    for name, r in doc["robots"].items():
        values = {k: p["value"] for k, p in r["parameters"].items()}
        assert r["status"] == "ok" and values == {
            k: p["value"] for k, p in baseline["robots"][name]["parameters"].items()
        }


def test_ray_address_that_accepts_and_never_answers(days, tmp_path, capsys):
    """A port that accepts connections and never answers (Ray retried one for 13 minutes, printing 20 warnings):
    one line, nothing written, no Ray started."""
    import socket

    root, manifests, _ = days
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        rc = main(
            [
                "fleet",
                "identify",
                str(manifests[2]),
                "--out",
                str(tmp_path / "out"),
                "--engine",
                "ray",
                "--address",
                address,
            ]
        )
    captured = capsys.readouterr()
    assert rc == 2 and len(captured.err.strip().splitlines()) == 1, captured.err
    assert f"no Ray cluster answers at {address}: the port accepts but nothing answered" in captured.err
    assert not (tmp_path / "out").exists()


def test_ray_object_store_sized_to_the_limits(tmp_path):
    """The store: Ray's default with no limit; half of what an address space holds beside a process's own 3 GiB;
    30 % of a cgroup's memory left after the workers' GiB each; refusals name the limit."""
    from sysid_ros.core.fleet import GIB, MemoryLimit, cgroup_memory_limit, ray_object_store_bytes

    assert ray_object_store_bytes(2) is None
    assert ray_object_store_bytes(2, MemoryLimit("address-space limit (ulimit -v)", 8 * GIB)) == int(2.5 * GIB)
    assert ray_object_store_bytes(2, None, MemoryLimit("cgroup", 4 * GIB)) == int(0.6 * GIB)
    assert ray_object_store_bytes(2, MemoryLimit("a", 8 * GIB), MemoryLimit("c", 4 * GIB)) == int(0.6 * GIB)
    with pytest.raises(ConfigError, match="with 3 worker.* cgroup .* of 3.0 GiB"):
        ray_object_store_bytes(3, None, MemoryLimit("cgroup memory limit (x)", 3 * GIB))
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text("max\n")
    v1.write_text("9223372036854771712\n")  # cgroup v1's "no limit"
    assert cgroup_memory_limit((v2, v1)) is None
    v1.write_text(f"{2 * GIB}\n")
    assert cgroup_memory_limit((v2, v1)).bytes == 2 * GIB


def test_longest_jobs_first(days):
    """r5's training bag was cut to half its size: its job goes last."""
    _, manifests, _ = days
    order = [r.name for r in longest_first(load_manifest(manifests[2]).robots)]
    assert order[-1] == "r5" and sorted(order) == sorted(PHYSICS), order


def test_model_cache_compiles_once_per_model_and_mass_bodies(days, monkeypatch):
    """Same file and mass bodies: a copy of the compiled model; other mass bodies (load_spec gives them
    explicit inertials): compiled again. The cache starts empty (earlier tests in this process filled it)."""
    from collections import OrderedDict

    from sysid_ros.core.identify import load_problem
    from sysid_ros.core.identify.problem import model_cache

    monkeypatch.setattr(model_cache, "_CACHE", OrderedDict())
    root, _, _ = days
    problem = load_problem(root / "day2" / "pendulum.yaml")
    first_spec, first_model = model_cache.compiled_model(problem)
    before = dict(model_cache.stats)
    spec, model = model_cache.compiled_model(problem)
    assert model_cache.stats == {"compiles": before["compiles"], "hits": before["hits"] + 1}
    assert spec is not first_spec and model is not first_model and model.nbody == first_model.nbody
    no_mass = replace(problem, parameters=tuple(p for p in problem.parameters if p.kind != "body_mass"))
    model_cache.compiled_model(no_mass)
    assert model_cache.stats["compiles"] == before["compiles"] + 1


def test_results_of_other_inputs_are_replaced_only_with_force(days, ray_run, tmp_path):
    """A robot's folder holding results of other inputs (day 2's r2, day 1's manifest): failed and left as it
    was; with force identified again and replaced."""
    root, manifests, _ = days
    shutil.copytree(root / "out2" / "r2", tmp_path / "r2")
    before = (tmp_path / "r2" / "provenance.yaml").read_text()
    job = next(r for r in load_manifest(manifests[1]).robots if r.name == "r2")
    refused = identify_robot(job, tmp_path)
    assert refused["status"] == "failed" and "--force replaces them" in refused["reason"], refused
    assert (tmp_path / "r2" / "provenance.yaml").read_text() == before
    replaced = identify_robot(job, tmp_path, force=True)
    assert replaced["status"] == "ok" and not replaced["resumed"]
    prov = yaml.safe_load((tmp_path / "r2" / "provenance.yaml").read_text())
    assert all("/day1/" in f for f in prov["inputs"]["bags"]) and not list(tmp_path.glob(".*"))


def test_a_robot_with_its_own_training_bags_never_validates_on_the_shared_problems(tmp_path):
    """README's manifest: the shared problem names held-out data of its own; a robot that names only `train:`
    is validated on nothing (its provenance says so), one that names `validate:` too on its own, and a robot
    that names neither keeps the shared problem's data."""
    from sysid_ros.core.fleet import robot_problem

    shared = tmp_path / "shared.yaml"
    shared.write_text(
        yaml.safe_dump(
            {
                "name": "pendulum",
                "model": "pendulum",
                "joints": ["hinge"],
                "training": ["shared_train.npz"],
                "validation": ["shared_heldout.npz"],
                "parameters": [{"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0}],
            }
        )
    )
    manifest = tmp_path / "fleet.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "problem": "shared.yaml",
                "robots": [
                    {"name": "r1", "train": ["r1_train.npz"], "control": "effort"},
                    {"name": "r2", "train": ["r2_train.npz"], "validate": ["r2_val.npz"]},
                    {"name": "r3"},
                ],
            }
        )
    )
    r1, r2, r3 = (robot_problem(job) for job in load_manifest(manifest).robots)
    assert [s.path.name for s in r1.training] == ["r1_train.npz"] and r1.validation == ()
    assert [s.path.name for s in r2.validation] == ["r2_val.npz"]
    assert [s.path.name for s in r3.validation] == ["shared_heldout.npz"]
