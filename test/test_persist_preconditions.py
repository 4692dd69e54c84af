"""`apply --persist` over DDS (issue 34): a controllers file that cannot take the gains is refused before anything
reaches the robot. sim_robot (the demo's pendulum as a PID position servo, gains as found), its tape_recorder and
the servo_tuner run as processes; each case runs `sysid-ros apply P --persist FILE --gains-only --controller
sim_robot --style jtc` as a user would, and the controller's gains afterwards are the as-found ones bit for bit,
the tuner published no outcome, its journal holds no change, and the file's folder is as it was. The last case,
the same command with a writable file, shows the command does reach the robot (no tune runs in this module: the
proposal's canary has no tapes, so it fails and the change is rolled back; the file stays untouched).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support.unwritable import file_size_limit, unwritable
from sysid_ros.core.gains import GainsJournal
from sysid_ros.core.linear import JointModel
from sysid_ros.core.tuner import GainProposal
from sysid_ros.demo import AS_FOUND, TuningRig

pytestmark = [pytest.mark.ros]

PROPOSED = {"gains.hinge.p": 31.5, "gains.hinge.i": 0.0, "gains.hinge.d": 1.57, "gains.hinge.i_clamp": 0.0}
CONTROLLERS = "sim_robot:\n  ros__parameters:\n    gains:\n      hinge: {p: 5.0, d: 0.2}  # factory\n"


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    rig = TuningRig(tmp_path_factory.mktemp("persist"), real_time_factor=3.0)
    try:
        yield rig
    finally:
        rig.close()


def proposal(folder: Path, **parameters: float) -> Path:
    """A proposal of the demo's kind (gravity, friction and inertia host feed-forward), as the servo_tuner writes it."""
    model = JointModel(inertia_kg_m2=0.33, viscous_nm_s_rad=0.08, coulomb_nm=0.05, gravity_sin_nm=6.38)
    found = GainProposal(
        ("hinge",), True, {**PROPOSED, **parameters}, AS_FOUND, {"hinge": model}, (), {}, {}, 0.4, "hinge: change"
    )
    path = folder / "proposal.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                **found.to_dict(),
                "controller": "sim_robot",
                "controller_style": "jtc",
                "trajectory_feedforward": "added by the controller",
                "ff_velocity_scale_as_found": {"gains.hinge.ff_velocity_scale": 0.0},
            }
        )
    )
    return path


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.iterdir()):
        h.update(p.name.encode() + (p.read_bytes() if p.is_file() else b"/"))
        h.update(oct(p.stat().st_mode).encode())
    return h.hexdigest()


def apply(proposal_path: Path, controllers: Path, preexec=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sysid_ros.cli",
            "apply",
            str(proposal_path),
            "--persist",
            str(controllers),
            "--gains-only",
            "--controller",
            "sim_robot",
            "--style",
            "jtc",
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=preexec,
    )


def bits(gains: dict[str, float]) -> dict[str, str]:
    return {k: float(v).hex() for k, v in gains.items()}


@pytest.mark.parametrize(
    "case", ["immutable-file", "immutable-folder", "read-only-mode", "full-filesystem", "no-block", "absurd-gain"]
)
def test_a_persist_that_cannot_be_done_leaves_the_robot_as_found(rig, tmp_path, case):
    folder = tmp_path / "config"
    folder.mkdir()
    controllers = folder / "controllers.yaml"
    controllers.write_text(CONTROLLERS.replace("sim_robot", "other_robot") if case == "no-block" else CONTROLLERS)
    if case == "read-only-mode":
        controllers.chmod(0o444)
    path = proposal(tmp_path, **({"gains.hinge.d": 1e308} if case == "absurd-gain" else {}))
    journal = GainsJournal(rig.folder / "tuner" / "gains_journal.jsonl")
    changes, seen, before = len(journal.changes()), len(rig.results), digest(folder)
    assert bits(rig.gains()) == bits(AS_FOUND)
    lock = {"immutable-file": controllers, "immutable-folder": folder}.get(case)
    # the real conditions: chattr +i (EPERM for root too); RLIMIT_FSIZE 64 bytes in the command's process (the
    # kernel refuses the backup's bytes, EFBIG, as a full disk refuses them with ENOSPC)
    with unwritable(lock) if lock else contextlib.nullcontext():
        done = apply(path, controllers, file_size_limit(64) if case == "full-filesystem" else None)
        assert digest(folder) == before and os.listdir(folder) == ["controllers.yaml"]
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert (
        "gains.hinge.d=1e+308 outside the guard" if case == "absurd-gain" else "nothing was sent to the robot"
    ) in lines[0]
    assert bits(rig.gains()) == bits(AS_FOUND)  # bit for bit
    assert len(journal.changes()) == changes and rig.results[seen:] == []  # nothing journaled, nothing applied


def test_the_same_command_with_a_writable_file_reaches_the_robot(rig, tmp_path):
    folder = tmp_path / "config"
    folder.mkdir()
    controllers = folder / "controllers.yaml"
    controllers.write_text(CONTROLLERS)
    journal = GainsJournal(rig.folder / "tuner" / "gains_journal.jsonl")
    changes, before = len(journal.changes()), digest(folder)
    done = apply(proposal(tmp_path), controllers)
    assert done.returncode == 1 and "not persisted" in done.stdout, done.stdout + done.stderr
    [change] = list(journal.changes().values())[changes:]
    assert change.new == PROPOSED and change.previous == AS_FOUND and change.state == "rolled_back"
    assert bits(rig.gains()) == bits(AS_FOUND)
    assert digest(folder) == before and os.listdir(folder) == ["controllers.yaml"]  # the pending files discarded
