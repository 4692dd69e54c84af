"""`apply --persist`: the proposal's gains into the user's controllers YAML, in place, comments and order kept."""

from __future__ import annotations

import os
import subprocess

import pytest

from sysid_ros.core.errors import ConfigError
from sysid_ros.core.files import load_ros_parameters
from sysid_ros.core.gains import get_style, persist, prepare_persist

CONTROLLERS = """\
controller_manager:
  ros__parameters:
    update_rate: 1000  # Hz

# the arm: effort interface, tuned by hand in 2025
arm_controller:
  ros__parameters:
    type: joint_trajectory_controller/JointTrajectoryController
    joints: [shoulder, elbow]
    gains:
      shoulder: {p: 300.0, d: 0.5, i: 0.0, i_clamp_max: 10.0, i_clamp_min: -10.0, antiwindup: false}  # keep
      elbow:
        p: 200.0   # soft
        d: 0.4
    constraints:
      goal_time: 0.6
"""
NEW = {
    "gains.shoulder.p": 42.123456789012345,
    "gains.shoulder.d": 1.0 / 3.0,
    "gains.shoulder.i": 2.5,
    "gains.shoulder.i_clamp": 0.75,
    "gains.elbow.p": 0.1 + 0.2,
    "gains.elbow.d": 0.9,
}


def test_persist_updates_the_block_in_place(tmp_path):
    path = tmp_path / "controllers.yaml"
    path.write_text(CONTROLLERS)
    backup = persist(path, "arm_controller", NEW, get_style("pid_controller"))
    assert backup.read_text() == CONTROLLERS
    text = path.read_text()
    for kept in (
        "update_rate: 1000  # Hz",
        "# the arm: effort interface, tuned by hand in 2025",
        "# keep",
        "# soft",
        "goal_time: 0.6",
        "joints: [shoulder, elbow]",
    ):
        assert kept in text
    assert text.index("controller_manager") < text.index("arm_controller") < text.index("constraints")
    values = load_ros_parameters(path, "arm_controller")
    assert {k: v for k, v in values.items() if k.startswith("gains.")} == {
        "gains.shoulder.p": NEW["gains.shoulder.p"],
        "gains.shoulder.d": 1.0 / 3.0,
        "gains.shoulder.i": 2.5,
        "gains.shoulder.i_clamp_max": 0.75,
        "gains.shoulder.i_clamp_min": -0.75,
        "gains.shoulder.antiwindup": True,  # integral action: switched on in the same edit
        "gains.elbow.p": 0.1 + 0.2,
        "gains.elbow.d": 0.9,
    }  # exact floats
    assert values["constraints.goal_time"] == 0.6 and values["type"].startswith("joint_trajectory_controller")
    assert persist(path, "arm_controller", NEW, get_style("pid_controller")).name == "controllers.yaml.bak.1"
    assert backup.read_text() == CONTROLLERS  # an earlier backup is never overwritten


def test_persist_refuses_without_touching_the_file(tmp_path):
    path = tmp_path / "controllers.yaml"
    path.write_text(CONTROLLERS)
    with pytest.raises(ConfigError, match="no `wrist_controller: ros__parameters:` section"):
        persist(path, "wrist_controller", NEW, get_style("jtc"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("arm_controller: [unclosed\n")
    with pytest.raises(ConfigError, match="the controllers file is not valid YAML"):
        persist(broken, "arm_controller", NEW, get_style("jtc"))
    assert path.read_text() == CONTROLLERS and broken.read_text() == "arm_controller: [unclosed\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.yaml", "controllers.yaml"]


BLOCK = """\
{key}:
{pad}ros__parameters:
{pad}  gains:
{pad}    shoulder: {{p: 300.0, d: 0.5}}  # keep
{pad}    elbow: {{p: 200.0, d: 0.4}}
"""


@pytest.mark.parametrize(
    "key, target",
    [
        ("/**/arm_controller", "arm_controller"),
        ("/robot1/arm_controller", "/robot1/arm_controller"),
        ("robot1:\n  arm_controller", "/robot1/arm_controller"),
    ],
)
def test_persist_finds_namespaced_blocks(tmp_path, key, target):
    """Real bring-ups key controllers by wildcard or namespace (`/**/name`, `/ns/name`, nested `ns: name:`)."""
    path = tmp_path / "controllers.yaml"
    path.write_text(BLOCK.format(key=key, pad="    " if "\n" in key else "  "))
    persist(path, target, {"gains.elbow.p": 7.0}, get_style("jtc"))
    values = load_ros_parameters(path, target)
    assert (values["gains.elbow.p"], values["gains.shoulder.p"]) == (7.0, 300.0)
    assert "# keep" in path.read_text()


def test_persist_names_the_namespaced_block_it_did_not_take(tmp_path):
    path = tmp_path / "controllers.yaml"
    path.write_text(BLOCK.format(key="/robot1/arm_controller", pad="  "))
    with pytest.raises(ConfigError, match="found /robot1/arm_controller: pass the controller's full name"):
        persist(path, "arm_controller", NEW, get_style("jtc"))


def test_persist_refuses_an_ambiguous_file(tmp_path):
    path = tmp_path / "controllers.yaml"
    path.write_text(CONTROLLERS + CONTROLLERS.split("\n\n")[1].replace("arm_controller:", "/**/arm_controller:"))
    with pytest.raises(ConfigError, match="2 blocks apply to arm_controller"):
        persist(path, "arm_controller", NEW, get_style("jtc"))
    assert path.read_text().endswith("goal_time: 0.6\n")
    assert not list(tmp_path.glob("*.bak*"))


def test_parameter_files_merge_as_ros_applies_them(tmp_path):
    """`/**` first, then every block naming the node, later ones overriding (as rcl applies a parameter file)."""
    path = tmp_path / "params.yaml"
    path.write_text(
        "/**:\n  ros__parameters: {rate: 1, use_sim_time: true}\n"
        "/**/tape_recorder:\n  ros__parameters: {rate: 2, tape: chirp}\n"
        "/other/tape_recorder:\n  ros__parameters: {rate: 3}\n"
    )
    assert load_ros_parameters(path, "tape_recorder") == {"rate": 2, "use_sim_time": True, "tape": "chirp"}
    assert load_ros_parameters(path, "/other/tape_recorder")["rate"] == 3
    path.write_text("/ns/y:\n  ros__parameters: {}\n")
    with pytest.raises(ConfigError, match="no ros__parameters for node 'x'"):
        load_ros_parameters(path, "x")


def test_a_prepared_persist_is_written_beside_the_file_and_leaves_nothing_when_discarded(tmp_path):
    """`apply --persist` prepares before the apply (backup and new version written beside the file) and renames
    after the canary kept the change; a change not kept discards both."""
    path = tmp_path / "controllers.yaml"
    path.write_text(CONTROLLERS)
    pending = prepare_persist(path, "arm_controller", NEW, get_style("pid_controller"))
    assert path.read_text() == CONTROLLERS and pending.backup.read_text() == CONTROLLERS
    assert pending.new.name.startswith(f".controllers.yaml.partial-{os.getpid()}-")
    pending.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["controllers.yaml"]
    pending = prepare_persist(path, "arm_controller", NEW, get_style("pid_controller"))
    assert pending.commit() == pending.backup and pending.backup.read_text() == CONTROLLERS
    pending.discard()  # after commit: a no-op, the backup stays
    assert sorted(p.name for p in tmp_path.iterdir()) == ["controllers.yaml", "controllers.yaml.bak"]
    assert load_ros_parameters(path, "arm_controller")["gains.elbow.d"] == 0.9


def test_a_file_edited_while_the_canary_ran_is_updated_from_its_new_text(tmp_path):
    path = tmp_path / "controllers.yaml"
    path.write_text(CONTROLLERS)
    pending = prepare_persist(path, "arm_controller", NEW, get_style("pid_controller"))
    edited = CONTROLLERS.replace("goal_time: 0.6", "goal_time: 0.8  # edited meanwhile")
    path.write_text(edited)
    backup = pending.commit()
    assert backup.read_text() == edited and "goal_time: 0.8  # edited meanwhile" in path.read_text()
    assert load_ros_parameters(path, "arm_controller")["gains.elbow.d"] == 0.9
    # the first preparation's files are gone; the backup is the file as it was just before the update
    assert sorted(p.name for p in tmp_path.iterdir()) == ["controllers.yaml", "controllers.yaml.bak"]


def test_what_a_killed_persist_left_beside_the_file_is_removed_by_the_next(tmp_path):
    path = tmp_path / "controllers.yaml"
    path.write_text(CONTROLLERS)
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that is gone (reaped)
    stale = tmp_path / f".controllers.yaml.partial-{dead.pid}-0123abcd"
    stale.write_text("half")
    persist(path, "arm_controller", NEW, get_style("pid_controller"))
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["controllers.yaml", "controllers.yaml.bak"]
