"""Problem files: parsed, and every mistake refused with a message naming it BEFORE any optimisation."""

from __future__ import annotations

import numpy as np
import pytest
from mujoco import sysid

from support.pendulum_data import TS, _doc, _param, pendulum_npz
from sysid_ros.core.bags import BagWriter, save_npz
from sysid_ros.core.errors import ConfigError, DataError, SysidRosError
from sysid_ros.core.files import config_dir
from sysid_ros.core.identify import identify, load_problem, problem_from_dict
from sysid_ros.core.signals import JointSamples


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    samples, commands = pendulum_npz(d)
    position = samples.position.copy()
    position[len(position) // 4 :, 0] = np.inf  # one row alone is dropped with a count (test_data_faults)
    save_npz(
        d / "inf.npz",
        JointSamples(samples.joint_names, samples.time_ns, position, samples.velocity, samples.effort),
        {"/effort_controller/commands": commands},
    )
    save_npz(
        d / "other.npz", JointSamples(("elbow",), samples.time_ns, samples.position, samples.velocity, samples.effort)
    )
    bag = d / "other_bag"
    js = TS.types["sensor_msgs/msg/JointState"]
    with BagWriter(bag) as w:
        for k in range(50):
            tk = int(samples.time_ns[k])
            header = TS.types["std_msgs/msg/Header"](
                stamp=TS.types["builtin_interfaces/msg/Time"](sec=tk // 10**9, nanosec=tk % 10**9), frame_id=""
            )
            w.write_message(
                "/joint_states",
                "sensor_msgs/msg/JointState",
                tk,
                js(
                    header=header,
                    name=["elbow"],
                    position=samples.position[k],
                    velocity=samples.velocity[k],
                    effort=samples.effort[k],
                ),
            )
    return d


@pytest.fixture(autouse=True)
def no_optimisation(monkeypatch):
    """Every refusal here must come before the optimiser runs."""

    def boom(*args, **kwargs):
        raise AssertionError("optimize was called before the problem was checked")

    monkeypatch.setattr(sysid, "optimize", boom)


@pytest.mark.parametrize(
    "params, message",
    [
        (_param(body="pole2"), r"no body named 'pole2'.*parameter=p"),
        (
            [{"name": "d", "kind": "joint_damping", "joint": "knee", "min": 0, "max": 1}],
            r"no joint named 'knee'.*parameter=d",
        ),
        ([{"name": "g", "kind": "actuator_gain", "actuator": "m", "min": 0.5, "max": 2}], r"no actuator named 'm'"),
        (
            [{"name": "b", "kind": "signal_bias", "signal": "*_vel", "min": -1, "max": 1}],
            r"no signal named '\*_vel'.*hinge_qpos",
        ),
        (_param(min=2.0, max=2.0), r"min \[2.0\] must be below max \[2.0\].*parameter=p"),
        (_param(start=7.0), r"start \[7.0\] is outside the bounds.*parameter=p"),
        (_param(min=0.0), r"mass bound must be > 0"),
        (
            [{"name": "f", "kind": "joint_frictionloss", "joint": "hinge", "min": -1, "max": 1, "start": 0.1}],
            r"cannot be negative.*parameter=f",
        ),
        (_param(frozen=True), r"every parameter is frozen"),
        (_param() + _param(), r"share this name.*parameter=p"),
    ],
)
def test_bad_parameters_are_refused(data, params, message):
    with pytest.raises(ConfigError, match=message):
        identify(problem_from_dict(_doc(data, parameters=params)))


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            {"name": "x", "kind": "body_volume", "body": "pole", "min": 0, "max": 1},
            r"parameters\[0\]\.kind: must be one of body_mass.*got 'body_volume'",
        ),
        ({"name": "x", "kind": "body_mass", "min": 0, "max": 1}, r"parameters\[0\]: .*must name exactly one body"),
        (
            {"name": "x", "kind": "body_mass", "body": "pole", "min": 1},
            r"parameters\[0\]: give both min and max, or neither",
        ),
        (
            {"name": "x", "kind": "body_mass", "body": "pole", "min": "a", "max": 1},
            r"parameters\[0\]\.min: must be a number",
        ),
    ],
)
def test_malformed_parameter_entries(data, entry, message):
    with pytest.raises(ConfigError, match=message):
        problem_from_dict(_doc(data, parameters=[entry]))


def test_data_without_the_mapped_joints(data):
    with pytest.raises(DataError, match=r"no joints \['hinge'\]"):
        identify(problem_from_dict(_doc(data, training=[str(data / "other.npz")])))
    with pytest.raises(SysidRosError, match="hinge"):
        identify(problem_from_dict(_doc(data, training=[{"bag": str(data / "other_bag")}])))


def test_non_finite_data_and_missing_files(data):
    with pytest.raises(DataError, match=r"mostly non-finite: .* non-finite position; joint hinge first"):
        identify(problem_from_dict(_doc(data, training=[str(data / "inf.npz")])))
    with pytest.raises(ConfigError, match=r"does not exist.*nothere\.npz"):
        identify(problem_from_dict(_doc(data, validation=[str(data / "nothere.npz")])))
    with pytest.raises(DataError, match=r"no command topic '/nope'"):
        identify(problem_from_dict(_doc(data, training=[{"npz": str(data / "ok.npz"), "command_topic": "/nope"}])))


def test_bad_model_and_mapping(data):
    with pytest.raises(SysidRosError, match="model not found"):
        identify(problem_from_dict(_doc(data, model="no_such_robot")))
    with pytest.raises(ConfigError, match=r"no such joint.*joint=hinge, mjcf_joint=pivot"):
        identify(problem_from_dict(_doc(data, joints={"hinge": {"joint": "pivot"}})))
    with pytest.raises(ConfigError, match=r"optimiser: unknown key \(did you mean 'optimizer'\?\)"):
        problem_from_dict(_doc(data, optimiser={}))
    with pytest.raises(ConfigError, match="optimizer.backend: must be one of mujoco"):
        problem_from_dict(_doc(data, optimizer={"backend": "adam"}))
    with pytest.raises(ConfigError, match="start_noise: must be one of weight, propagate"):
        problem_from_dict(_doc(data, start_noise="ignore"))
    with pytest.raises(ConfigError, match="window_fit: must be one of always, auto"):
        problem_from_dict(_doc(data, window_fit="sometimes"))
    assert problem_from_dict(_doc(data)).start_noise == "weight"
    assert problem_from_dict(_doc(data)).window_fit == "always"


@pytest.mark.parametrize("name", ["identify_pendulum.yaml", "identify_arm3.yaml"])
def test_shipped_problem_files_parse(name):
    problem = load_problem(config_dir() / name)
    assert problem.parameters and problem.training
    assert all(src.path.is_absolute() and "recordings" in str(src.path) for src in problem.training)
    assert any(p.frozen for p in problem.parameters) and not all(p.frozen for p in problem.parameters)


def test_an_effort_scale_names_the_problems_joints_with_positive_factors(data):
    with pytest.raises(ConfigError, match=r"effort_scale names joints the problem does not have: \['elbow'\]"):
        identify(
            problem_from_dict(_doc(data, training=[{"npz": str(data / "ok.npz"), "effort_scale": {"elbow": 1.02}}]))
        )
    with pytest.raises(ConfigError, match=r"effort_scale\.hinge: must be > 0"):
        problem_from_dict(_doc(data, training=[{"npz": str(data / "ok.npz"), "effort_scale": {"hinge": -1.0}}]))
