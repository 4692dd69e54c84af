"""Hardening round 3 (issue 27): the refusal table. Each row is one hostile-but-honest input from the issue;
each is refused with one line on stderr (exit 2, no traceback) or one error naming the fault, and nothing
is written or changed (inputs hashed before and after). The files the project reads go through one door
(`core/files/reading.py`), the files it writes through another (`core/files/writing.py`)."""

from __future__ import annotations

import hashlib
import os
import re
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_identify_problem import pendulum_record

from sysid_ros.cli import main
from sysid_ros.core.bags.arrays_io import save_npz
from sysid_ros.core.errors import ConfigError, DataError
from sysid_ros.core.files.reading import load_yaml, npz_headers, read_bytes
from sysid_ros.core.files.writing import folder_lock, refuse_inputs_inside, remove_stale, replace_file

REPO = Path(__file__).resolve().parents[1]


def digest(*paths: Path) -> str:
    """One hash over every file (name and bytes) under `paths`, links not followed."""
    h = hashlib.sha256()
    for root in paths:
        files = sorted(p for p in ([root] if not root.is_dir() else root.rglob("*")) if p.is_file())
        for f in files:
            h.update(str(f).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def refused(capsys, *argv, match: str) -> str:
    """Run the command in this process: exit 2, one stderr line matching `match`, no traceback."""
    code = main([str(a) for a in argv])
    _, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err and len(lines) == 1, (code, err)
    assert re.search(match, lines[0]), lines[0]
    return lines[0]


def alias_bomb(levels: int = 30) -> str:
    """Billion laughs: 9^levels strings through nested aliases, a few hundred bytes of YAML."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    samples, commands = pendulum_record()
    save_npz(d / "ok.npz", samples, {"/effort_controller/commands": commands})
    return d


def problem(d: Path, **changes) -> dict:
    doc = {"name": "pend", "model": "pendulum", "joints": ["hinge"], "training": [str(d / "ok.npz")],
           "noise": {"position_rad": 5e-4},
           "parameters": [{"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0}],
           "optimizer": {"max_iters": 2}}
    doc.update(changes)
    return doc


PROPOSAL = {"controller": "arm_controller", "controller_style": "pid_controller", "joints": ["elbow"],
            "change": True, "parameters": {"gains.elbow.p": 42.0, "gains.elbow.d": 0.5},
            "as_found": {"gains.elbow.p": 200.0, "gains.elbow.d": 0.4}, "summary": "elbow: change"}

CONTROLLERS = """\
left_controller:
  ros__parameters:
    gains: &shared          # one block written once for both arms
      elbow: {p: 200.0, d: 0.4}
right_controller:
  ros__parameters:
    gains: *shared
arm_controller:
  ros__parameters:
    gains:
      elbow: {p: 200.0, d: 0.4}   # factory
"""


def proposal_file(folder: Path, **changes) -> Path:
    from sysid_ros.core.tuner.proposal import GainProposal

    doc = {**GainProposal(("elbow",), True, {"gains.elbow.p": 42.0, "gains.elbow.d": 0.5},
                          {"gains.elbow.p": 200.0, "gains.elbow.d": 0.4}).to_dict(),
           "controller": "arm_controller", "controller_style": "pid_controller", **changes}
    path = folder / "proposal.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# ---- reading: /dev/zero, alias bombs, endless and huge files, forged npz headers ----------------------------

def test_the_reading_door(tmp_path):
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(17 << 20)  # sparse: 17 MiB of nothing
    with pytest.raises(ConfigError, match=r"17 MiB, more than the 16 MiB"):
        read_bytes(big, "problem file")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_yaml(fifo, "manifest")  # an open FIFO with no writer never blocks
    (tmp_path / "self.yaml").write_text("a: &a [1, *a]\n")
    with pytest.raises(ConfigError, match="alias that contains itself"):
        load_yaml(tmp_path / "self.yaml", "manifest")
    (tmp_path / "bin.yaml").write_bytes(b"a: \xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_yaml(tmp_path / "bin.yaml", "manifest")
    (tmp_path / "deep.yaml").write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(ConfigError, match="not valid YAML.*nesting|nests too deep"):
        load_yaml(tmp_path / "deep.yaml", "manifest")


def forged_npz(path: Path, rows: int, stored: int = 1000) -> Path:
    """An npz whose feedback_time_ns header declares `rows` int64 rows but holds `stored` bytes."""
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<i8", "fortran_order": False, "shape": (rows,)})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("feedback_joint_names.npy", _npy(np.array(["hinge"])))
        z.writestr("feedback_time_ns.npy", header.getvalue() + b"\0" * stored)
    return path


def _npy(a: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def test_a_forged_npz_header_is_refused_before_allocation(tmp_path):
    small = forged_npz(tmp_path / "forged.npz", rows=5_000_000)  # 40 MB declared, 1 kB stored
    with pytest.raises(DataError, match="declares .* but holds"):
        npz_headers(small)
    huge = forged_npz(tmp_path / "huge.npz", rows=100_000_000)
    with pytest.raises(DataError, match="declares 1e\\+08 rows"):
        npz_headers(huge)


# ---- writing: planted links, modes, inputs inside --out, locks, stale staging --------------------------------

def test_replace_file_never_follows_a_planted_temporary(tmp_path):
    target, victim = tmp_path / "c.yaml", tmp_path / "victim"
    target.write_text("a: 1\n")
    victim.write_text("precious\n")
    (tmp_path / "c.yaml.tmp").symlink_to(victim)
    for k in range(3):  # any name beside the target, also the ones a writer might pick
        (tmp_path / f".c.yaml.{k}.tmp").symlink_to(victim)
    replace_file(target, b"a: 2\n")
    assert target.read_text() == "a: 2\n" and victim.read_text() == "precious\n"
    assert not target.is_symlink() and (tmp_path / "c.yaml.tmp").is_symlink()


def test_replace_file_keeps_the_mode_and_refuses_read_only_and_links(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: 1\n")
    path.chmod(0o600)
    replace_file(path, b"a: 2\n")
    assert (path.stat().st_mode & 0o777) == 0o600 and path.read_text() == "a: 2\n"
    path.chmod(0o444)
    with pytest.raises(ConfigError, match=r"read-only \(mode 0444\)"):
        replace_file(path, b"a: 3\n")
    assert path.read_text() == "a: 2\n"
    link = tmp_path / "link.yaml"
    link.symlink_to(tmp_path / "nowhere.yaml")
    with pytest.raises(ConfigError, match="symbolic link"):
        replace_file(link, b"x")
    with pytest.raises(ConfigError, match="link to nothing"):
        replace_file(link, b"x", through_link=True)
    assert not (tmp_path / "nowhere.yaml").exists()


def test_a_folder_lock_refuses_the_second_run(tmp_path):
    with folder_lock(tmp_path / "out"):
        with pytest.raises(ConfigError, match=rf"another sysid-ros run \(pid {os.getpid()}\)"):
            with folder_lock(tmp_path / "out"):
                pass
    with folder_lock(tmp_path / "out"):  # released: the next run goes on
        pass
    assert list((tmp_path / "out").iterdir()) == []


def test_stale_staging_of_dead_processes_is_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    for name in (f".staging-{dead}-abc", f".r1.partial-{dead}", f".staging-{os.getpid()}-mine", ".staging-xyz"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_text("x")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    (tmp_path / f".staging-{dead}-link").symlink_to(outside)
    assert sorted(remove_stale(tmp_path)) == sorted([f".staging-{dead}-abc", f".r1.partial-{dead}",
                                                     f".staging-{dead}-link"])
    assert (outside / "keep").read_text() == "keep"  # a link is unlinked, never followed
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".staging-{os.getpid()}-mine", ".staging-xyz"]


def test_an_out_holding_the_inputs_is_refused(tmp_path):
    (tmp_path / "bags" / "b1").mkdir(parents=True)
    with pytest.raises(ConfigError, match="holds this run's input"):
        refuse_inputs_inside(tmp_path, [tmp_path / "bags" / "b1"])
    with pytest.raises(ConfigError, match="lies inside this run's input"):
        refuse_inputs_inside(tmp_path / "bags" / "b1" / "results", [tmp_path / "bags" / "b1"])
    (tmp_path / "via").symlink_to(tmp_path)
    with pytest.raises(ConfigError, match="holds this run's input"):
        refuse_inputs_inside(tmp_path / "via", [tmp_path / "bags" / "b1"])
    refuse_inputs_inside(tmp_path / "out", [tmp_path / "bags" / "b1"])  # a folder beside them is fine


# ---- the last guard ------------------------------------------------------------------------------------------

def test_the_last_guard_turns_any_escaping_exception_into_one_line(capsys, monkeypatch):
    import sysid_ros.cli as cli

    def boom(args):
        raise np.linalg.LinAlgError("Singular matrix\nsecond line")

    monkeypatch.setattr(cli, "_models", boom)
    line = refused(capsys, "models", match=r"^sysid-ros models: unexpected numpy\.LinAlgError: Singular matrix; "
                                           r"second line$")
    assert line

    def memory(args):
        raise MemoryError()

    monkeypatch.setattr(cli, "_models", memory)
    refused(capsys, "models", match=r"unexpected MemoryError: no message")
