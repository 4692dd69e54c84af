"""Fuzzing the files a user hands the command line (issues 27 and 34): problem files, fleet manifests, gain
proposals and their gain values, and controllers files, each a valid document with parts replaced by arbitrary
YAML values (hypothesis); whatever is written holds only gains the tuner's guard allows. Whatever the
document, the command ends in one line on stderr and exit 2 (or succeeds), never a traceback and never an
`unexpected` error from the last guard, writes nothing outside its `--out`, and answers within a bounded
time per example (the identification itself is replaced by a marker: the fuzz is about the reading)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.pendulum_data import pendulum_npz
from sysid_ros.cli import main
from sysid_ros.core.tuner import GainProposal

SETTINGS = settings(
    max_examples=40,
    deadline=None,  # examples run the CLI in-process: on a loaded 2-core machine one can take over 10 s
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class WouldRun(Exception):
    """Raised where the real work would start: the document passed every check."""


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(["", ".", "..", "/", "/dev/zero", "fleet.yaml", "r1\n", "../../etc", "1e-300", "-1e300", "nan"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12,
)


def mutate(doc: dict, data: st.DataObject) -> dict:
    """`doc` with one to three keys (at any depth) replaced, removed or added."""
    doc = yaml.safe_load(yaml.safe_dump(doc))
    for _ in range(data.draw(st.integers(1, 3))):
        node = doc
        while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
            key = data.draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
            if not isinstance(node[key], (dict, list)) or not node[key]:
                break
            node = node[key]
        if isinstance(node, dict) and node:
            key = data.draw(st.sampled_from(list(node) + ["unknown_key"]))
            action = data.draw(st.sampled_from(["replace", "remove"]))
            if action == "remove":
                node.pop(key, None)
            else:
                node[key] = data.draw(values)
        elif isinstance(node, list) and node:
            node[data.draw(st.integers(0, len(node) - 1))] = data.draw(values)
    return doc


def tree(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p).encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    pendulum_npz(root)
    return root


def check(capsys, folder: Path, argv: list[str]) -> None:
    """Run the command: exit 0, or 2 with one line (never the last guard's `unexpected` but for the
    marker), no traceback, and the input folder `folder` unchanged."""
    before = tree(folder)
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "Traceback" not in captured.err
    if code != 0:
        lines = err.splitlines()
        assert code == 2 and len(lines) == 1, (code, err)
        assert "unexpected" not in lines[0] or "WouldRun" in lines[0], lines[0]
    assert tree(folder) == before, "a write outside --out"


PROBLEM = {
    "name": "pend",
    "model": "pendulum",
    "joints": ["hinge"],
    "training": ["ok.npz"],
    "noise": {"position_rad": 5e-4, "velocity_rad_s": 5e-3},
    "parameters": [
        {"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0},
        {"name": "delay", "kind": "signal_delay", "min": -0.01, "max": 0.01},
    ],
    "optimizer": {"max_iters": 2},
}


@SETTINGS
@given(data=st.data())
def test_problem_files(capsys, monkeypatch, tmp_path_factory, folder, data):
    import sysid_ros.core.identify as identify

    monkeypatch.setattr(identify, "identify", lambda *a, **k: (_ for _ in ()).throw(WouldRun()))
    doc = mutate(PROBLEM, data)
    work = tmp_path_factory.mktemp("p")
    (work / "ok.npz").symlink_to(folder / "ok.npz")
    (work / "p.yaml").write_text(yaml.safe_dump(doc))
    out = tmp_path_factory.mktemp("out") / "results"
    check(capsys, work, ["identify", work / "p.yaml", "--out", out])
    assert not out.exists() or not list(out.iterdir())


@SETTINGS
@given(data=st.data())
def test_manifests(capsys, monkeypatch, tmp_path_factory, folder, data):
    import sysid_ros.core.fleet.run as run

    monkeypatch.setattr(run, "_run", lambda *a, **k: (_ for _ in ()).throw(WouldRun()))
    doc = mutate(
        {
            "problem": "p.yaml",
            "robots": [
                {"name": "r1", "train": ["ok.npz"], "control": "effort", "tags": {"site": "lab"}},
                {"name": "r2"},
            ],
        },
        data,
    )
    work = tmp_path_factory.mktemp("m")
    (work / "ok.npz").symlink_to(folder / "ok.npz")
    (work / "p.yaml").write_text(yaml.safe_dump(PROBLEM))
    (work / "m.yaml").write_text(yaml.safe_dump(doc))
    out = tmp_path_factory.mktemp("out") / "fleet"
    check(capsys, work, ["fleet", "identify", work / "m.yaml", "--out", out, "--engine", "serial"])
    assert not out.exists() or not list(out.iterdir())


@SETTINGS
@given(data=st.data())
def test_proposals(capsys, tmp_path_factory, data):
    gains = {"gains.elbow.p": 42.0, "gains.elbow.d": 0.5}
    found = {"gains.elbow.p": 200.0, "gains.elbow.d": 0.4}
    base = {
        **GainProposal(("elbow",), True, gains, found, {"elbow": None}, (), {}, {}, 0.8, "x").to_dict(),
        "controller": "arm_controller",
        "controller_style": "pid_controller",
    }
    work = tmp_path_factory.mktemp("g")
    (work / "proposal.yaml").write_text(yaml.safe_dump(mutate(base, data)))
    out = tmp_path_factory.mktemp("out") / "block.yaml"
    check(capsys, work, ["export", work / "proposal.yaml", "--out", out])
    assert sorted(p.name for p in out.parent.iterdir()) in ([], ["block.yaml"])


# ---- issue 34: proposals' gain values and controllers files: nothing absurd is ever written --------------------

plausible = st.floats(0.0, 1e3)  # drawn as often as all the rest: the writes are exercised, not only refusals
gain_values = st.one_of(
    plausible,
    plausible,
    plausible,
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e6, 1e6),
    st.integers(-(10**20), 10**20),
    st.sampled_from([0.0, -0.0, 1e308, -5, 1e5, 100000.01, 5e-324, "1e3", "fast", True, None, [1.0], {"p": 1}]),
)


def gains_proposal(data: st.DataObject) -> dict:
    """A proposal whose gains, viscous feed-forward and as-found velocity feed-forward are drawn."""
    draw = lambda: data.draw(gain_values)  # noqa: E731
    gains = {"gains.elbow.p": 42.0, "gains.elbow.d": 0.5}
    found = {"gains.elbow.p": 200.0, "gains.elbow.d": 0.4}
    doc = {
        **GainProposal(("elbow",), True, gains, found, {"elbow": None}, (), {}, {}, 0.8, "x").to_dict(),
        "controller": "arm_controller",
        "controller_style": "jtc",
        "trajectory_feedforward": "added by the controller",
    }
    doc["parameters"] = {
        "gains.elbow.p": draw(),
        "gains.elbow.d": draw(),
        **({"gains.elbow.i": draw()} if data.draw(st.booleans()) else {}),
    }
    doc["as_found"] = {k: 1.0 for k in doc["parameters"]}
    if data.draw(st.booleans()):
        doc["host_feedforward"] = {"elbow": {"viscous_nm_s_rad": draw()}}
        doc["ff_velocity_scale_as_found"] = {"gains.elbow.ff_velocity_scale": draw()}
    return doc


def written_gains_are_plausible(path: Path, controller: str = "arm_controller", joint: str = "elbow") -> dict:
    """The gains the file holds for `controller`'s `joint`, each checked against the tuner's guard."""
    from sysid_ros.core.files import load_ros_parameters
    from sysid_ros.core.gains import GainGuard

    gains = {
        k: v
        for k, v in load_ros_parameters(path, controller).items()
        if k.startswith(f"gains.{joint}.") and k.rsplit(".", 1)[1] in ("p", "i", "d", "ff_velocity_scale")
    }
    for name, value in gains.items():
        assert GainGuard().parameter_refusal(name, value) is None, (name, value)
    return gains


@SETTINGS
@given(data=st.data())
def test_proposal_gain_values(capsys, tmp_path_factory, data):
    work = tmp_path_factory.mktemp("v")
    (work / "proposal.yaml").write_text(yaml.safe_dump(gains_proposal(data)))
    out = tmp_path_factory.mktemp("out") / "block.yaml"
    extra = ["--gains-only"] if data.draw(st.booleans()) else []
    check(capsys, work, ["export", work / "proposal.yaml", "--out", out, *extra])
    if out.exists():
        written_gains_are_plausible(out)


CONTROLLERS = {
    "controller_manager": {"ros__parameters": {"update_rate": 1000}},
    "arm_controller": {
        "ros__parameters": {"joints": ["elbow"], "gains": {"elbow": {"p": 200.0, "d": 0.4, "i": 0.0, "i_clamp": 1.0}}}
    },
    "other_controller": {"ros__parameters": {"gains": {"elbow": {"p": 7.0}}}},
}


@SETTINGS
@given(data=st.data())
def test_controllers_files(capsys, monkeypatch, tmp_path_factory, data):
    """`apply --persist` with drawn proposal gains into a mutated controllers file; the canary replaced by a marker
    that keeps the change (the file is then written for real). Either the file holds the proposal's gains, every
    one inside the guard, beside its backup, or nothing changed in its folder."""
    import sysid_ros.cli.tuner as tuner

    monkeypatch.setattr(
        tuner, "_request", lambda args, pending: tuner._persist(args.persist, {"kept": True}, *pending) or 0
    )
    work = tmp_path_factory.mktemp("c")
    proposal = (
        gains_proposal(data)
        if data.draw(st.booleans())
        else {
            **yaml.safe_load(yaml.safe_dump(gains_proposal(data))),
            "parameters": {"gains.elbow.p": 42.0},
            "as_found": {"gains.elbow.p": 1.0},
        }
    )
    (work / "proposal.yaml").write_text(yaml.safe_dump(proposal))
    folder = tmp_path_factory.mktemp("config")
    text = yaml.safe_dump(mutate(CONTROLLERS, data) if data.draw(st.booleans()) else CONTROLLERS)
    if data.draw(st.integers(0, 3)) == 0:
        text = text[: data.draw(st.integers(0, len(text)))]  # cut anywhere
    (folder / "controllers.yaml").write_text(text)
    before = tree(folder)
    check(capsys, work, ["apply", work / "proposal.yaml", "--persist", folder / "controllers.yaml", "--gains-only"])
    names = sorted(p.name for p in folder.iterdir())
    if names == ["controllers.yaml"]:
        assert tree(folder) == before
    else:
        assert names == ["controllers.yaml", "controllers.yaml.bak"], names
        assert (folder / "controllers.yaml.bak").read_text() == text
        gains = written_gains_are_plausible(folder / "controllers.yaml")
        for name, value in proposal["parameters"].items():
            assert gains[name] == float(value), (name, gains)
