"""Every PID naming of the ros2_control controllers in use, over DDS, against stand-in controllers.

Each stand-in (test/standin_controller.py, a real rclpy node in its own process) declares exactly the
parameters of one upstream definition, cited there: Jazzy joint_trajectory_controller, Jazzy
pid_controller, and both with control_toolbox >= 5 names. Each starts from the block `sysid-ros export`
wrote (taken with `--params-file`, as a controller manager would), is detected from its own parameter
list, and gets a change applied and rolled back bit for bit (infinite clamps, strings and bools too).
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sysid_ros.cli import main
from sysid_ros.core.errors import GainsError
from sysid_ros.core.files import load_ros_parameters
from sysid_ros.core.gains import GainsJournal
from sysid_ros.core.tuner import GainProposal
from sysid_ros.ros.client import RosClient, wait_for
from sysid_ros.ros.controller_gains import ControllerGains, GainsOverridden

pytestmark = pytest.mark.ros

STANDIN = Path(__file__).with_name("standin_controller.py")
JOINTS = ("shoulder", "elbow")
T = 20.0  # parameter service timeout (s): generous, the machine is shared
STYLES = ("jtc", "pid_controller", "jtc_toolbox5", "pid_controller_toolbox5")
# The start-up gains, exported into each stand-in's parameter file: floats that must survive exactly.
START = {
    "gains.shoulder.p": 30.0 + 1e-12,
    "gains.shoulder.d": 1.0 / 3.0,
    "gains.elbow.p": 0.1 + 0.2,
    "gains.elbow.d": 2.5,
}
NAMES = [f"gains.{j}.{g}" for j in JOINTS for g in ("p", "i", "d", "i_clamp")]
# Upstream defaults of what the export leaves alone: i = 0, and the integral clamp 0 (Jazzy) or +-inf (toolbox 5).
CLAMP = {"jtc": 0.0, "pid_controller": 0.0, "jtc_toolbox5": math.inf, "pid_controller_toolbox5": math.inf}
SWITCH = {
    "pid_controller": ("antiwindup", False, True),
    "jtc_toolbox5": ("antiwindup_strategy", "none", "conditional_integration"),
    "pid_controller_toolbox5": ("antiwindup_strategy", "none", "conditional_integration"),
}


def write_proposal(path: Path, parameters: dict[str, float], style: str | None = None) -> Path:
    joints = tuple(sorted({n.split(".")[1] for n in parameters}))
    proposal = GainProposal(
        joints, True, parameters, dict(parameters), {j: None for j in joints}, (), {}, {}, 0.5, "test proposal"
    )
    document = {**proposal.to_dict(), "controller": "arm_controller"}
    if style:
        document["controller_style"] = style
    path.write_text(yaml.safe_dump(document))
    return path


class Standin:
    def __init__(self, style: str, name: str, params_file: Path | None, joints=JOINTS) -> None:
        self.name = name
        extra = ["--params-file", str(params_file)] if params_file else []
        self.proc = subprocess.Popen(
            [sys.executable, str(STANDIN), style, *joints, "--ros-args", "-r", f"__node:={name}", *extra]
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)


@pytest.fixture(scope="module")
def ros(tmp_path_factory):
    """One stand-in per style (started from `sysid-ros export` output) and one unknown layout, and a client."""
    folder = tmp_path_factory.mktemp("standins")
    proposal = write_proposal(folder / "proposal.yaml", START)
    standins = {}
    for style in STYLES:
        out = folder / f"{style}.yaml"
        assert (
            main(["export", str(proposal), "--style", style, "--controller", f"standin_{style}", "--out", str(out)])
            == 0
        )
        standins[style] = Standin(style, f"standin_{style}", out)
    standins["velocity_pid"] = Standin("velocity_pid", "standin_unknown", None)
    standins["pendulum"] = Standin("pid_controller_toolbox5", "standin_pendulum", None, ("hinge",))
    client = RosClient("test_styles_client")
    try:
        for s in standins.values():
            wait_for(
                lambda: f"/{s.name}/describe_parameters" in str(client.node.get_service_names_and_types()),
                60.0,
                f"{s.name}'s parameter services",
            )
        yield client, standins, folder
    finally:
        client.close()
        for s in standins.values():
            s.stop()


def all_gains(client: RosClient, node: str) -> dict:
    """Every gains.* parameter of the node as it holds it (their names)."""
    names = sorted(client.parameter_types(node, ["gains"]))
    return dict(zip(names, client.get_parameters(node, names)))


@pytest.mark.parametrize("style", STYLES)
def test_detect_apply_and_rollback_bit_exact(ros, style, tmp_path):
    client, _, _ = ros
    node = f"standin_{style}"
    gains = ControllerGains(client, node, GainsJournal(tmp_path / "gains.jsonl"), timeout_s=T)  # style "auto"
    assert gains.style.name == style
    # As found: the exported block, taken with --params-file, exactly; the rest at the upstream defaults.
    as_found = {**{n: 0.0 for n in NAMES}, **START, **{f"gains.{j}.i_clamp": CLAMP[style] for j in JOINTS}}
    assert gains.read(NAMES) == as_found
    before = all_gains(client, node)

    new = {
        "gains.shoulder.p": 42.123456789012345,
        "gains.shoulder.i": 2.5,
        "gains.shoulder.i_clamp": 0.75,
        "gains.shoulder.d": 1.7,
        "gains.elbow.p": 12.0,
        "gains.elbow.i": 0.0,
        "gains.elbow.d": 0.9,
    }
    change = gains.apply(new, "test")
    raw = all_gains(client, node)
    if style == "jtc":
        assert raw["gains.shoulder.i_clamp"] == 0.75
    else:  # a symmetric pair on the controller
        assert (raw["gains.shoulder.i_clamp_max"], raw["gains.shoulder.i_clamp_min"]) == (0.75, -0.75)
    if style in SWITCH:  # integral action on the shoulder switched its anti-windup on; the elbow's left as found
        name, off, on = SWITCH[style]
        assert raw[f"gains.shoulder.{name}"] == on and raw[f"gains.elbow.{name}"] == off
        assert change.previous[f"gains.shoulder.{name}"] == off
    changed = {n for n in raw if raw[n] != before[n]}
    assert all(
        n.rpartition(".")[2]
        in ("p", "i", "d", "i_clamp", "i_clamp_max", "i_clamp_min", "antiwindup", "antiwindup_strategy")
        for n in changed
    )  # nothing else touched
    assert gains.read(list(new)) == new

    gains.rollback(change)
    assert all_gains(client, node) == before  # bit for bit, +-inf, strings and bools included
    assert GainsJournal(tmp_path / "gains.jsonl").changes()[change.change_id].state == "rolled_back"


def test_unknown_layout_refused_with_its_names(ros, tmp_path):
    client, _, _ = ros
    gains = ControllerGains(client, "standin_unknown", GainsJournal(tmp_path / "gains.jsonl"), timeout_s=T)
    with pytest.raises(GainsError, match=r"unknown controller layout.*'elbow': \['kp', 'kv'\]"):
        gains.read(["gains.elbow.p"])
    assert not (tmp_path / "gains.jsonl").exists()


def test_explicit_style_wins(ros, tmp_path):
    client, _, _ = ros
    gains = ControllerGains(
        client, "standin_jtc", GainsJournal(tmp_path / "gains.jsonl"), style="pid_controller", timeout_s=T
    )
    assert gains.style.name == "pid_controller"  # not detected: as configured, so the jtc's names are missing
    with pytest.raises(GainsError, match="does not have all of the parameters"):
        gains.read(["gains.elbow.i_clamp"])
    with pytest.raises(GainsError, match="unknown controller parameter style 'velocity_pid'"):
        ControllerGains(client, "standin_jtc", GainsJournal(tmp_path / "g.jsonl"), style="velocity_pid")


def test_a_reloaded_controller_is_noticed_not_rolled_back(ros, tmp_path):
    """The controller is restarted from an edited parameter file while our change is applied: the journal
    notices the gains changed under it and says so, and the stale previous values are not sent."""
    client, standins, folder = ros
    gains = ControllerGains(client, "standin_jtc", GainsJournal(tmp_path / "gains.jsonl"), timeout_s=T)
    change = gains.apply({"gains.elbow.p": 55.0, "gains.elbow.d": 3.0})
    edited = folder / "edited.yaml"
    edited.write_text(yaml.safe_dump({"standin_jtc": {"ros__parameters": {"gains": {"elbow": {"p": 77.0}}}}}))
    standins["jtc"].stop()
    standins["jtc"] = Standin("jtc", "standin_jtc", edited)

    def reloaded() -> bool:
        try:
            return client.get_parameters("standin_jtc", ["gains.elbow.p"], 2.0) == [77.0]
        except TimeoutError:  # not up yet
            return False

    wait_for(reloaded, 60.0, "the reloaded stand-in")
    with pytest.raises(GainsOverridden, match=r"changed under us.*'gains.elbow.p': 77.0.*not rolled back"):
        gains.rollback(change)
    assert client.get_parameters("standin_jtc", ["gains.elbow.p", "gains.elbow.d"]) == [77.0, 0.0]
    assert gains.journal.changes()[change.change_id].state == "overridden" and gains.journal.unfinished() == []
    assert gains.recover() == []
    # a kept change lost in a reload is noticed too (the servo_tuner says so when it configures)
    kept = gains.keep(gains.apply({"gains.elbow.p": 66.0}))
    assert gains.lost() is None
    client.set_parameters("standin_jtc", {"gains.elbow.p": 77.0})  # as a reload from the file would
    lost = gains.lost()
    assert lost.change_id == kept.change_id and lost.state == "overridden" and "77.0" in lost.reason
    assert gains.lost() is None  # said once


def test_the_tuner_reads_infinite_clamps_and_its_trials_restore_them(ros, tmp_path):
    """control_toolbox >= 5 defaults the integral clamp to +-inf (no clamp): the tuner models it at the
    joint's torque cap, and a trial session on the controller ends with +-inf exactly."""
    from sysid_ros.core.tapes import Envelope
    from sysid_ros.core.tuner import Controller, DriveGains
    from sysid_ros.ros.ros_plant import RosArm

    client, _, _ = ros
    gains = ControllerGains(client, "standin_pendulum", GainsJournal(tmp_path / "gains.jsonl"), timeout_s=T)
    arm = RosArm(
        "pendulum",
        ("hinge",),
        {"hinge": Envelope(0.0, 0.4, 2.0, 3.0)},
        250.0,
        client=client,
        gains=gains,
        workdir=tmp_path / "tuner",
    )
    [found] = arm.read_gains().values()
    assert found == DriveGains(kp=0.0, kd=0.0, ki=0.0, i_clamp_nm=arm.caps["hinge"])
    before = all_gains(client, "standin_pendulum")
    with arm.trials("test"):
        arm._ensure_gains({"hinge": Controller(DriveGains(kp=20.0, kd=1.0, ki=4.0, i_clamp_nm=0.5))})
        raw = all_gains(client, "standin_pendulum")
        assert (raw["gains.hinge.i_clamp_max"], raw["gains.hinge.i_clamp_min"]) == (0.5, -0.5)
        assert raw["gains.hinge.antiwindup_strategy"] == "conditional_integration"  # integral action: on
    assert all_gains(client, "standin_pendulum") == before and math.isinf(before["gains.hinge.i_clamp_max"])


def test_export_loads_as_a_parameter_file(tmp_path, capsys):
    proposal = write_proposal(
        tmp_path / "p.yaml",
        {**START, "gains.shoulder.i": 1.5, "gains.shoulder.i_clamp": 2.0},
        style="pid_controller_toolbox5",
    )
    assert main(["export", str(proposal)]) == 0  # style and controller as the proposal recorded them
    out = tmp_path / "block.yaml"
    out.write_text(capsys.readouterr().out)
    assert load_ros_parameters(out, "arm_controller") == {
        "gains.shoulder.p": START["gains.shoulder.p"],
        "gains.shoulder.d": 1.0 / 3.0,
        "gains.shoulder.i": 1.5,
        "gains.shoulder.i_clamp_max": 2.0,
        "gains.shoulder.i_clamp_min": -2.0,
        "gains.shoulder.antiwindup_strategy": "conditional_integration",
        "gains.elbow.p": 0.1 + 0.2,
        "gains.elbow.d": 2.5,
    }
    # bad input: one line, exit 2, nothing written or overwritten
    assert main(["export", str(write_proposal(tmp_path / "q.yaml", START))]) == 2
    assert "give --style" in capsys.readouterr().err
    assert main(["export", str(proposal), "--out", str(out)]) == 2
    assert "not overwritten" in capsys.readouterr().err and "conditional_integration" in out.read_text()
