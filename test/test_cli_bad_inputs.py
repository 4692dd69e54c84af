"""The command line's bad-input catalogue (issue 12, sections 3 and 4): every case gives ONE line on stderr,
a non-zero exit and no traceback; nothing is written (no partial output) and every input byte stays as it
was (hashed before and after). Problem files are refused before any optimisation."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from mujoco import sysid

from support.bags import sine_states, write_bag
from support.pendulum_data import pendulum_npz
from sysid_ros.cli import main
from sysid_ros.core.bags import load_npz, save_npz
from sysid_ros.core.signals import JointSamples

REPO = Path(__file__).resolve().parents[1]
YEAR_NS = 365 * 86400 * 10**9
RESULTS = ["identified.yaml", "identified_values.yaml", "mujoco_sysid", "pend.xml", "report.html", "report_data.npz"]


def digest(*paths: Path) -> str:
    """One hash over every file (name and bytes) under `paths`."""
    h = hashlib.sha256()
    for root in paths:
        files = sorted(p for p in ([root] if root.is_file() else root.rglob("*")) if p.is_file())
        for f in files:
            h.update(str(f).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv, match: str) -> str:
    """Run the command: non-zero exit, one stderr line matching `match`, no traceback."""
    code, _, err = run(capsys, *argv)
    lines = err.strip().splitlines()
    assert code != 0 and "Traceback" not in err and len(lines) == 1, (code, err)
    assert re.search(match, lines[0]), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    samples, commands = pendulum_npz(d)
    late = samples.time_ns.copy()
    late[-1] += 3 * YEAR_NS  # one sample three years after the rest
    save_npz(
        d / "late.npz",
        JointSamples(samples.joint_names, late, samples.position, samples.velocity, samples.effort),
        {"/effort_controller/commands": commands},
    )
    np.savez(
        d / "objects.npz",
        feedback_joint_names=np.array(["hinge"]),
        feedback_time_ns=np.array([1, {"a": 1}], dtype=object),
    )
    msgs, _ = sine_states(seconds=0.5)
    write_bag(d / "bag", msgs, "mcap")
    return d


def problem(d: Path, **changes) -> dict:
    doc = {
        "name": "pend",
        "model": "pendulum",
        "joints": ["hinge"],
        "training": [str(d / "ok.npz")],
        "noise": {"position_rad": 5e-4},
        "parameters": [
            {"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0},
            {"name": "hinge_damping", "kind": "joint_damping", "joint": "hinge", "min": 0, "max": 1},
        ],
        "optimizer": {"max_iters": 2},
    }
    doc.update(changes)
    return doc


def _param(**p):
    return [{"name": "p", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0, **p}]


@pytest.fixture
def no_optimisation(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("optimize was called before the problem was checked")

    monkeypatch.setattr(sysid, "optimize", boom)


PROBLEMS = [  # (changes to a good problem, the error line)
    ({"parameters": {"a": 1}}, r"parameters: must be a list"),
    ({"parameters": [5]}, r"parameters\[0\]: must be a mapping"),
    ({"joints": 5}, r"joints: must be a list or a mapping, got 5"),
    ({"training": [{"npz": "x.npz", "start_s": "abc"}]}, r"training\[0\]\.start_s: must be a number, got 'abc'"),
    ({"training": [{"npz": "x.npz", "start_s": 2, "end_s": 1}]}, r"training\[0\]\.end_s: must be after start_s"),
    ({"optimizer": {"max_iters": "ten"}}, r"optimizer\.max_iters: must be an integer, got 'ten'"),
    ({"optimizer": {"max_iters": -5}}, r"optimizer\.max_iters: must be >= 1"),
    ({"noise": [1, 2]}, r"noise: must be a mapping"),
    ({"noise": {"position_rad": 0}}, r"noise\.position_rad: must be >= 1e-09, got 0"),
    ({"noise": {"velocity_rad_s": -1e-3}}, r"noise\.velocity_rad_s: must be >= 1e-09"),
    ({"observe": "velocity"}, r"observe: must be a list .*\(write \[velocity\]\)"),
    ({"parameters": _param(min=[0, 0, 0])}, r"parameters\[0\]\.min: body_mass takes 1 value\(s\), got 3"),
    ({"parameters": _param(frozen="false")}, r"parameters\[0\]\.frozen: must be true or false, got 'false'"),
    ({"parameters": _param(fozen=True)}, r"parameters\[0\]\.fozen: unknown key \(did you mean 'frozen'\?\)"),
    ({"parameters": _param(kind="body_mas")}, r"parameters\[0\]\.kind: .*did you mean 'body_mass'"),
    ({"warm_start": "no"}, r"warm_start: must be true or false, got 'no'"),
    ({"segments_s": 0.5}, r"segments_s: unknown key \(did you mean 'segment_s'\?\)"),
    ({"window_s": 0.5}, r"window_s: renamed 'segment_s'"),
    ({"segment_s": 1e-9}, r"segment_s: must be >= 0\.001"),
    ({"smoothing_samples": "1e9"}, r"smoothing_samples: must be <= 1001"),
    ({"name": "../../x"}, r"name: must be a plain file name"),
    ({"name": "/tmp/absolute"}, r"name: must be a plain file name"),
]


@pytest.mark.parametrize("changes, match", PROBLEMS, ids=[m.split(":")[0] for _, m in PROBLEMS])
def test_bad_problem_file_refused_before_any_work(data, tmp_path, capsys, no_optimisation, changes, match):
    file = tmp_path / "problem.yaml"
    file.write_text(yaml.safe_dump(problem(data, **changes)))
    before = digest(file, data)
    refused(capsys, "identify", file, "--out", tmp_path / "out", match=match)
    assert not (tmp_path / "out").exists() and digest(file, data) == before


@pytest.mark.parametrize(
    "text, match",
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", r"the problem file is not UTF-8 text"),
        (b"model: [pendulum\njoints: x\n", r"not valid YAML: .*line \d"),
        (b"- just\n- a list\n", r"must be a mapping of keys"),
    ],
)
def test_unreadable_problem_files(tmp_path, capsys, no_optimisation, text, match):
    file = tmp_path / "problem.yaml"
    file.write_bytes(text)
    refused(capsys, "identify", file, "--out", tmp_path / "out", match=match)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "training, match",
    [
        ("objects.npz", r"object arrays .* never loaded"),
        ("late.npz", r"spans 9\.46\d*e\+07 s .* is one stamp far from the others"),
        ("nothere.npz", r"data file does not exist"),
    ],
)
def test_bad_data_refused_before_the_optimisation(data, tmp_path, capsys, no_optimisation, training, match):
    file = tmp_path / "problem.yaml"
    file.write_text(yaml.safe_dump(problem(data, training=[str(data / training)])))
    before = digest(data)
    refused(capsys, "identify", file, "--out", tmp_path / "out", "--quiet", match=match)
    assert digest(data) == before and not list((tmp_path / "out").glob("*"))


def test_identify_outputs_safe(data, tmp_path, capsys, monkeypatch):
    """Unwritable --out: refused before the run. A disk that fills while writing: nothing half-written.
    Earlier results: kept unless --force."""
    file = tmp_path / "problem.yaml"
    file.write_text(yaml.safe_dump(problem(data)))
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    calls = []
    real_optimize = sysid.optimize
    monkeypatch.setattr(sysid, "optimize", lambda *a, **k: calls.append(1) or real_optimize(*a, **k))
    refused(capsys, "identify", file, "--out", blocker / "out", match=r"cannot write into the output folder")
    assert not calls

    from sysid_ros.core.identify.output import write

    def disk_full(result, path):
        Path(path).write_text("<html>half")
        raise OSError(28, "No space left on device", str(path))

    out = tmp_path / "out"
    with monkeypatch.context() as m:
        m.setattr(write, "write_report", disk_full)
        refused(capsys, "identify", file, "--out", out, "--quiet", match=r"No space left on device")
    assert calls and list(out.iterdir()) == []  # no partial file, no staging folder

    code, stdout, err = run(capsys, "identify", file, "--out", out, "--quiet")
    assert code == 0 and "Traceback" not in err, err
    assert sorted(p.name for p in out.iterdir()) == RESULTS
    before = digest(out)
    refused(capsys, "identify", file, "--out", out, "--quiet", match=r"holds earlier results .*--force")
    assert digest(out) == before
    code, _, err = run(capsys, "identify", file, "--out", out, "--quiet", "--force")
    assert code == 0 and sorted(p.name for p in out.iterdir()) == RESULTS


def test_convert_outputs(data, tmp_path, capsys):
    bag = data / "bag"
    before = digest(bag)
    refused(capsys, "convert", bag, "--out", tmp_path / "foo.txt", match=r"--out must end in \.npz or \.csv")
    assert not list(tmp_path.iterdir())
    target = tmp_path / "new" / "folder" / "arrays.npz"  # missing folders are created
    code, out, err = run(capsys, "convert", bag, "--out", target)
    assert code == 0 and out.strip() == str(target) and "Traceback" not in err
    samples, _, _ = load_npz(target)
    assert len(samples) == 100
    stamp = target.stat().st_mtime_ns
    refused(capsys, "convert", bag, "--out", target, match=r"holds earlier results \['arrays\.npz'\].*--force")
    assert target.stat().st_mtime_ns == stamp
    code, _, _ = run(capsys, "convert", bag, "--out", target, "--force")
    assert code == 0 and sorted(p.name for p in target.parent.iterdir()) == ["arrays.npz"]
    assert digest(bag) == before


def test_metadata_claiming_a_trillion_messages(tmp_path, capsys):
    """The counts in metadata.yaml are a claim: reading allocates for what is there, not for what is claimed."""
    msgs, truth = sine_states(seconds=0.5)
    bag = write_bag(tmp_path / "bag", msgs, "sqlite3")
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())
    info = meta["rosbag2_bagfile_information"]
    info["message_count"] = 999_999_999_999
    for entry in info["topics_with_message_count"]:
        entry["message_count"] = 999_999_999_999
    (bag / "metadata.yaml").write_text(yaml.safe_dump(meta))
    code, _, err = run(capsys, "convert", bag, "--out", tmp_path / "a.npz")
    assert code == 0, err
    samples, _, _ = load_npz(tmp_path / "a.npz")
    np.testing.assert_array_equal(samples.position, truth["position"])


def test_unreadable_bag_folder(data, tmp_path, capsys):
    bag = tmp_path / "bag"
    msgs, _ = sine_states(seconds=0.2)
    write_bag(bag, msgs, "mcap")
    (bag / "metadata.yaml").unlink()
    (bag / "metadata.yaml").mkdir()  # not a file
    refused(capsys, "inspect", bag, match=r"sysid-ros inspect: .*metadata\.yaml")
    if os.geteuid() != 0:  # root reads everything
        locked = tmp_path / "locked"
        write_bag(locked, msgs, "mcap")
        locked.chmod(0)
        try:
            refused(capsys, "inspect", locked, match=r"sysid-ros inspect: ")
        finally:
            locked.chmod(0o755)


def _cli(*argv: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sysid_ros.cli", *argv],
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        **kwargs,
    )


def test_inspect_into_a_closed_pipe_is_quiet(data):
    """`sysid-ros inspect BAG | head -0`: the reader has gone before the first line; no traceback."""
    read, write = os.pipe()
    os.close(read)
    proc = _cli("inspect", str(data / "bag"), stdout=write)
    os.close(write)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err
    assert proc.returncode != 0


def test_rollback_without_a_tuner(tmp_path):
    proc = _cli("rollback", "--timeout", "1", stdout=subprocess.PIPE)
    _, err = proc.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert proc.returncode != 0 and "Traceback" not in err and len(lines) == 1, err
    assert re.search(r"sysid-ros rollback: no servo_tuner answered /servo_tuner/rollback within 1 s", lines[0])


@pytest.mark.parametrize(
    "node, reason",
    [
        ("tape_recorder", "parameter joints is empty"),
        ("servo_tuner", "parameter joints is empty"),
        ("identifier", "parameter problem_file is empty"),
    ],
)
def test_lifecycle_node_without_a_parameter_file(client, tmp_path, node, reason):
    """Started with no parameter file at all: the node comes up unconfigured; configure fails with the reason."""
    name = f"{node}_bare"
    log = tmp_path / f"{name}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", f"sysid_ros.nodes.{node}", "--ros-args", "-r", f"__node:={name}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    try:
        assert client.change_state(name, "configure") == (False, "unconfigured")
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(30)
    text = log.read_text()
    assert "Traceback" not in text and "ParameterUninitialized" not in text, text
    assert f"configure failed: {reason}" in text, text
