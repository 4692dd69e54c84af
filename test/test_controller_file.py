"""`apply --persist`: the proposal's gains into the user's controllers YAML, in place, comments and order kept."""

from __future__ import annotations

import pytest

from sysid_ros.core.controller_file import persist
from sysid_ros.core.controller_styles import get_style
from sysid_ros.core.errors import ConfigError
from sysid_ros.core.params import load_ros_parameters

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
NEW = {"gains.shoulder.p": 42.123456789012345, "gains.shoulder.d": 1.0 / 3.0, "gains.shoulder.i": 2.5,
       "gains.shoulder.i_clamp": 0.75, "gains.elbow.p": 0.1 + 0.2, "gains.elbow.d": 0.9}


def test_persist_updates_the_block_in_place(tmp_path):
    path = tmp_path / "controllers.yaml"
    path.write_text(CONTROLLERS)
    backup = persist(path, "arm_controller", NEW, get_style("pid_controller"))
    assert backup.read_text() == CONTROLLERS
    text = path.read_text()
    for kept in ("update_rate: 1000  # Hz", "# the arm: effort interface, tuned by hand in 2025", "# keep",
                 "# soft", "goal_time: 0.6", "joints: [shoulder, elbow]"):
        assert kept in text
    assert text.index("controller_manager") < text.index("arm_controller") < text.index("constraints")
    values = load_ros_parameters(path, "arm_controller")
    assert {k: v for k, v in values.items() if k.startswith("gains.")} == {
        "gains.shoulder.p": NEW["gains.shoulder.p"], "gains.shoulder.d": 1.0 / 3.0, "gains.shoulder.i": 2.5,
        "gains.shoulder.i_clamp_max": 0.75, "gains.shoulder.i_clamp_min": -0.75,
        "gains.shoulder.antiwindup": True,  # integral action: switched on in the same edit
        "gains.elbow.p": 0.1 + 0.2, "gains.elbow.d": 0.9}  # exact floats
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
    with pytest.raises(ConfigError, match="cannot read the controllers file"):
        persist(broken, "arm_controller", NEW, get_style("jtc"))
    assert path.read_text() == CONTROLLERS and broken.read_text() == "arm_controller: [unclosed\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.yaml", "controllers.yaml"]
