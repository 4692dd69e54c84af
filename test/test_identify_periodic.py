"""`sysid-ros identify` on a periodic record: the recorder's bag of an `optimal` tape says where its periods lie, and
the whole-arm regression averages them and differentiates in the frequency domain instead of filtering.

A simulated 7-joint arm (pybullet's KUKA iiwa as MJCF, hidden payload 0.8 kg where the model says 0.5 and hidden
joint damping, PID position drives, feedback noise 0.2 mrad, 2 mrad/s and 0.2 N m at 500 Hz) plays an `optimal`
tape (2 periods of 5 s) after holding its start pose for 2 s. The feedback is written into a real rosbag2 bag by
the project's `BagWriter` with the metadata the tape_recorder stores (`tapes.periodic_metadata`), and once more
without any metadata (as `ros2 bag record` would). Both are identified with the same held-out bag (a multisine).
Skipped without pybullet (the iiwa's URDF comes from pybullet_data).
"""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore

pytest.importorskip("pybullet_data")
pytestmark = pytest.mark.slow  # the design (~8 s of CPU), two recordings and two 7-joint identifications

import mujoco

from support.periodic_iiwa import ENVELOPES, HIDDEN, NOISE, RATE_HZ, TORQUE_NOISE_NM, play
from sysid_ros.cli import main
from sysid_ros.core import tapes
from sysid_ros.core.bags import BagWriter
from sysid_ros.core.errors import DataError
from sysid_ros.core.identify import (
    IIWA_JOINTS,
    DataSource,
    Payload,
    PeriodicSpec,
    identify,
    iiwa_mjcf,
    load_source_periods,
    problem_from_dict,
)
from sysid_ros.core.linear import JOINT_TERMS, ArmRegressor, structural_base_parameters
from sysid_ros.core.sim import SimRobot

TS = get_typestore(Stores.ROS2_JAZZY)


def write(path, samples, metadata: dict | None):
    """A rosbag2 bag of the JointState feedback, with the recorder's metadata when given."""
    js = TS.types["sensor_msgs/msg/JointState"]
    header_t, stamp_t = TS.types["std_msgs/msg/Header"], TS.types["builtin_interfaces/msg/Time"]
    with BagWriter(path) as w:
        if metadata is not None:
            w.write_metadata(metadata, int(samples.time_ns[0]))
        for k, t in enumerate(samples.time_ns):
            t = int(t)
            header = header_t(stamp=stamp_t(sec=t // 10**9, nanosec=t % 10**9), frame_id="")
            msg = js(
                header=header,
                name=list(samples.joint_names),
                position=samples.position[k],
                velocity=samples.velocity[k],
                effort=samples.effort[k],
            )
            w.write_message("/joint_states", "sensor_msgs/msg/JointState", t, msg)
    return path


def problem(model, train, val, periodic: dict | None = None):
    entry = {"bag": str(train), "control": "effort", **({"periodic": periodic} if periodic else {})}
    return {
        "model": str(model),
        "joints": list(IIWA_JOINTS),
        "training": [entry],
        "validation": [{"bag": str(val), "control": "effort"}],
        "segment_s": 0.25,
        "noise": {"position_rad": NOISE.position_rad},
        "parameters": [
            {"name": f"joint{k + 1}_damping", "kind": "joint_damping", "joint": j, "min": 0.0, "max": 3.0}
            for k, j in enumerate(IIWA_JOINTS)
        ]
        + [{"name": "payload_mass", "kind": "body_mass", "body": "payload", "min": 0.05, "max": 3.0}],
        "optimizer": {"max_iters": 10},
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("periodic")
    model = iiwa_mjcf(folder / "iiwa.xml", payload=Payload(0.5, com_m=(0.0, 0.0, 0.08)))
    tape = tapes.optimal(ENVELOPES, RATE_HZ, model=model, seed=0, cache_dir=folder / "cache")
    samples, t0 = play(model, tape, 1)
    held_out, _ = play(model, tapes.multisine(ENVELOPES, RATE_HZ, seed=5, duration_s=4.0), 2)
    metadata = {"joint_names": list(IIWA_JOINTS), "start_ns": t0, "tape": tape.to_dict()}
    periodic = tapes.periodic_metadata(tape, t0)  # what the tape_recorder stores with a periodic tape
    bags = {
        "tape": write(folder / "tape", samples, {**metadata, "periodic": periodic}),
        "plain": write(folder / "plain", samples, None),
        "val": write(folder / "val", held_out, None),
    }
    results = {name: identify(problem_from_dict(problem(model, bags[name], bags["val"]))) for name in ("tape", "plain")}
    nominal = ArmRegressor(mujoco.MjModel.from_xml_path(str(model)), JOINT_TERMS)
    truth = structural_base_parameters(nominal).values(
        ArmRegressor(SimRobot(str(model), physics=HIDDEN).model, JOINT_TERMS).true_parameters()
    )
    names = structural_base_parameters(nominal).base_names
    start_s = (periodic["first_period_ns"] - int(samples.time_ns[0])) * 1e-9
    return {
        "model": model,
        "bags": bags,
        "results": results,
        "truth": dict(zip(names, truth)),
        "periodic": periodic,
        "start_s": start_s,
    }


def test_the_recorder_states_where_the_periods_lie(runs):
    periodic = runs["periodic"]
    assert periodic["kind"] == "optimal" and periodic["periods"] == 2 and periodic["period_s"] == pytest.approx(5.0)
    assert periodic["top_hz"] == pytest.approx(1.0)  # 5 harmonics of 0.2 Hz
    assert runs["start_s"] == pytest.approx(tapes.LEAD_S, abs=2e-3)  # 0.25 s of rest, then the periods


def test_identify_averages_the_periods_the_bag_states(runs):
    """Measured: the noise between the periods is the simulated one (0.2 N m, 0.2 mrad), the periods correlate
    0.9999+."""
    result = runs["results"]["tape"]
    assert any(n.startswith("whole-arm regression on the periods averaged") for n in result.notes), result.notes
    (doc,) = result.metrics["regression_periodic"].values()
    assert doc["source"] == "recorded tape" and doc["periods"] == 2 and doc["keep_hz"] == pytest.approx(5.0)
    assert doc["least_correlation_between_periods"] > 0.999
    for joint in IIWA_JOINTS:  # 0.2 N m with 2 x 2000 samples: the spread's estimate is good to ~2 %
        assert doc["torque_noise_nm"][joint] == pytest.approx(TORQUE_NOISE_NM, rel=0.1), joint
        assert doc["position_noise_rad"][joint] == pytest.approx(NOISE.position_rad, rel=0.15), joint
    assert result.metrics["regression_base_parameters"]["derivatives"].startswith("periodic")


def test_a_bag_without_tape_info_is_unaffected(runs):
    result = runs["results"]["plain"]
    assert "regression_periodic" not in result.metrics
    assert not any("periods" in n for n in result.notes), result.notes
    assert result.metrics["regression_base_parameters"]["derivatives"].startswith("savgol")


def test_averaged_periods_give_narrower_intervals_with_the_truth_inside(runs):
    """The same record's base parameters (69) through both paths: measured median ratio of the 95 % half-widths
    filter / periodic (see docs/excitation.md); the periodic estimates inside their intervals."""
    tape = runs["results"]["tape"].metrics["regression_base_parameters"]
    plain = runs["results"]["plain"].metrics["regression_base_parameters"]
    names = list(tape["parameters"])
    truth = np.array(list(runs["truth"].values()))
    # the same base parameters in the same order (a combination's terms may be listed in another order)
    assert [n.split()[0] for n in names] == [n.split()[0] for n in runs["truth"]]
    assert names == list(plain["parameters"])
    hw_tape = np.array([tape["parameters"][n]["half_width_95"] for n in names])
    hw_plain = np.array([plain["parameters"][n]["half_width_95"] for n in names])
    ratio = hw_plain / hw_tape
    print("half-width ratio filter/periodic 10/50/90 %:", np.percentile(ratio, [10, 50, 90]))
    assert np.median(ratio) >= 1.5, np.percentile(ratio, [10, 50, 90])
    value = np.array([tape["parameters"][n]["value"] for n in names])
    inside = np.abs(value - truth) <= hw_tape
    print(
        "inside:",
        inside.sum(),
        "of",
        len(names),
        "plain:",
        (np.abs(np.array([plain["parameters"][n]["value"] for n in names]) - truth) <= hw_plain).sum(),
    )
    # 69 intervals at 95 %: fewer than 58 covering has a probability under 1 % for independent ones
    assert inside.sum() >= 58, (inside.sum(), [n for n, ok in zip(names, inside) if not ok])


def test_a_problem_file_states_the_periods_of_a_plain_bag(runs):
    spec = PeriodicSpec(runs["start_s"], 5.0, 2, keep_hz=5.0)
    _, periods = load_source_periods(DataSource(runs["bags"]["plain"], control="effort", periodic=spec), IIWA_JOINTS)
    assert periods.source == "problem file" and periods.correlation > 0.999
    assert periods.start_ns == runs["periodic"]["first_period_ns"]
    _, none = load_source_periods(DataSource(runs["bags"]["plain"], control="effort"), IIWA_JOINTS)
    assert none is None
    wrong = DataSource(runs["bags"]["plain"], control="effort", periodic=PeriodicSpec(runs["start_s"], 4.0, 2))
    with pytest.raises(DataError, match=r"period of 4 s \(problem file\) does not fit the record.*plain"):
        load_source_periods(wrong, IIWA_JOINTS)


def test_a_period_that_does_not_fit_is_refused_in_one_line(runs, tmp_path, capsys):
    """4.9 s stated for a 5 s tape: refused before anything is fitted, naming the bag and the period the data show."""
    import yaml

    periodic = {"start_s": 0.25, "period_s": 4.9, "periods": 2}
    doc = problem(runs["model"], runs["bags"]["plain"], runs["bags"]["val"], periodic)
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    code = main(["identify", str(tmp_path / "p.yaml"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1, err
    assert "does not fit the record" in err and "differ least at 5 s" in err and str(runs["bags"]["plain"]) in err
    assert not (tmp_path / "out" / "identified.yaml").exists()
