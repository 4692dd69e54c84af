"""The online payload estimator on hostile input (issue 34): a row per fault a hostile-but-honest tester found.

Each row feeds the estimator a log the simulated arms write (`industrial_arm.py`'s UR10e-like controller log with
its identified model, as in test_online_industrial.py; the iiwa of test_online_payload.py on a pick-and-place
motion) with one fault, in the node's 0.25 s chunks, and checks what it publishes: every estimate physically
consistent (mass >= 0, the pseudo-inertia positive semidefinite), every event's values too, and no change
event on a constant payload. Before: zeroed efforts gave `ParameterChange mass_kg -3.888`, an encoder wrap a
ChangeDetected of -6.88 kg, a chained model and a bare arm on a pick-and-place false changes of first moments
(0.011 kg m), and a removed payload was published as -0.0029 kg.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

pytest.importorskip("pybullet_data")

from industrial_arm import FRICTION, JOINTS, LINKS, PAYLOAD_KG, TRUE_DAMPING_NM_S_RAD, loaded_and_unloaded

from support.online_industrial import identified_arm
from support.online_payload import DT_S, POSE_RAD, models, tracking_record
from sysid_ros.core.files import load_spec
from sysid_ros.core.identify import IIWA_FLANGE
from sysid_ros.core.online import (
    WITH_INERTIA,
    ChangeDetected,
    InputPaused,
    InputResumed,
    OnlineEstimator,
    ParameterChange,
    load_model,
    payload_config,
)
from sysid_ros.core.signals import JointSamples

S = 1_000_000_000
FAULT_S = 12.0  # the industrial logs' faults start here (20 s logs)
CHANGES = (ChangeDetected, ParameterChange)


def pseudo_inertia(values: dict[str, float]) -> np.ndarray:
    """[[S, h], [h', m]] with S = tr(I)/2 - I: positive semidefinite exactly for real bodies."""
    v = values
    inertia = np.array(
        [
            [v["ixx_kg_m2"], v["ixy_kg_m2"], v["ixz_kg_m2"]],
            [v["ixy_kg_m2"], v["iyy_kg_m2"], v["iyz_kg_m2"]],
            [v["ixz_kg_m2"], v["iyz_kg_m2"], v["izz_kg_m2"]],
        ]
    )
    out = np.zeros((4, 4))
    out[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    out[:3, 3] = out[3, :3] = v["mx_kg_m"], v["my_kg_m"], v["mz_kg_m"]
    out[3, 3] = v["mass_kg"]
    return out


def assert_physical(values: dict[str, float], where: str) -> None:
    """mass >= 0, diagonal inertia >= 0, and (all terms known) the pseudo-inertia PSD (to rounding)."""
    for name in ("mass_kg", "ixx_kg_m2", "iyy_kg_m2", "izz_kg_m2"):
        assert not values.get(name, 0.0) < -1e-12, (where, name, values[name])
    if set(WITH_INERTIA) <= set(values) and np.all(np.isfinite(list(values.values()))):
        j = pseudo_inertia(values) * np.outer(*[np.r_[np.full(3, 10.0), 1.0]] * 2)  # kg, kg dm, kg dm^2
        assert np.linalg.eigvalsh(j).min() >= -1e-9, (where, values)


def follow(config, samples: JointSamples, chunk_s: float = 0.25):
    """(events, estimator) over `samples` in `chunk_s` chunks; every estimate and event checked physical."""
    est = OnlineEstimator(config)
    step = max(1, int(round(chunk_s * S / np.median(np.diff(samples.time_ns)))))
    events = []
    for k in range(0, len(samples), step):
        new = est.update(samples.slice(k, k + step))
        events += new
        estimate = est.estimate
        assert_physical(estimate.as_dict(), f"estimate at {estimate.time_ns / S:.2f} s")
        for e in new:
            if isinstance(e, ChangeDetected):
                assert_physical(dict(zip(e.parameters, e.values)), f"{e}")
                assert_physical(dict(zip(e.parameters, e.previous)), f"{e}")
            if isinstance(e, ParameterChange):
                assert_physical({e.parameter: e.value}, f"{e}")
                assert_physical({e.parameter: e.previous}, f"{e}")
    return events, est


def changes(events) -> list:
    return [e for e in events if isinstance(e, CHANGES)]


# --- the UR10e-like controller log (100 Hz, jittered, quantized current) ----------------------------------
@lru_cache(maxsize=1)
def industrial(folder: str):
    """(the identified arm's file, the chained model's file, {seed: (unloaded, loaded)} logs)."""
    arm = identified_arm(f"{folder}/identified.xml")
    # identified-of-identified: the identified file identified again, its link masses moved by another 2-3 %,
    # damping 5 % and friction loss 10 % off (measured before: a false ChangeDetected of my, 0.02-0.04 kg m,
    # on the unloaded run of seed 1)
    spec = load_spec(arm)
    for body, error in zip(LINKS, (-0.02, 0.03, -0.02, 0.03, -0.025, 0.02)):
        spec.body(body).mass = spec.body(body).mass * (1 + error)
    for k, joint in enumerate(JOINTS):
        spec.joint(joint).damping[0] = TRUE_DAMPING_NM_S_RAD[k] * (1.05 if k % 2 else 0.95)
        spec.joint(joint).frictionloss = FRICTION.coulomb_nm[k] * (0.9 if k % 2 else 1.1)
    chained = f"{folder}/chained.xml"
    with open(chained, "w") as f:
        f.write(spec.to_xml())
    logs = {seed: loaded_and_unloaded(f"{folder}/seed{seed}", seed=seed, seconds=20.0, garbage=3) for seed in (0, 1)}
    return arm, chained, logs


@pytest.fixture(scope="module")
def ur(tmp_path_factory):
    return industrial(str(tmp_path_factory.mktemp("hostile")))


def with_fault(samples: JointSamples, fault: str) -> JointSamples:
    """The log with `fault` from FAULT_S on."""
    t = (samples.time_ns - samples.time_ns[0]) / S
    q, effort = samples.position.copy(), samples.effort.copy()
    after = t >= FAULT_S
    if fault == "zero_effort":  # every drive reports exactly 0 from here on
        effort[after] = 0.0
    elif fault == "frozen_effort":  # the drives repeat their last report
        effort[after] = effort[np.flatnonzero(after)[0] - 1]
    elif fault == "wrap":  # the wrist's encoder wraps: +2 pi, same pose
        q[after, 5] += 2 * np.pi
    elif fault == "shoulder_wrap":
        q[after, 0] += 2 * np.pi
    elif fault == "glitch":  # one row of the elbow 0.3 rad off
        q[np.flatnonzero(after)[0], 2] += 0.3
    elif fault == "dead_input":  # NaN for 0.5 s
        q[after & (t < FAULT_S + 0.5)] = np.nan
    return JointSamples(samples.joint_names, samples.time_ns, q, samples.velocity, effort, source="faulty log")


@pytest.mark.parametrize(
    "fault, kind",
    [
        ("zero_effort", "stale_effort"),
        ("frozen_effort", "stale_effort"),
        ("wrap", "position_jump"),
        ("shoulder_wrap", "position_jump"),
        ("glitch", "position_jump"),
        ("dead_input", "dead_input"),
    ],
)
def test_stale_or_implausible_input_pauses_instead_of_changing(ur, fault, kind) -> None:
    arm, _, logs = ur
    log = logs[0][1]  # the loaded run: 4.2 kg all along
    events, est = follow(payload_config(load_model(arm), "payload"), with_fault(log.samples, fault))
    assert not changes(events), events
    paused = [e for e in events if isinstance(e, InputPaused)]
    assert len(paused) == 1 and paused[0].kind == kind, paused
    start = log.samples.time_ns[0]
    # found at once: a stale effort or a dead input after 5 rows (0.05 s at 100 Hz), a jump at its row
    assert FAULT_S <= (paused[0].time_ns - start) / S <= FAULT_S + (0.02 if kind == "position_jump" else 0.08)
    resumed = [e for e in events if isinstance(e, InputResumed)]
    if fault.endswith("effort"):  # the drives never report again: paused to the end, the estimate held
        assert not resumed and est.paused is not None
    else:  # a full window (0.9 x 2 s) of good input after the fault
        end_s = FAULT_S + (0.5 if fault == "dead_input" else 0.0)  # the fault's last row
        assert len(resumed) == 1 and 1.8 <= (resumed[0].time_ns - start) / S - end_s <= 2.1, resumed
        assert est.paused is None
    # the payload is still the one on the flange (identified link masses 1.5-3 % off: measured -0.3 %)
    assert abs(est.estimate.value("mass_kg") / PAYLOAD_KG - 1) < 0.05, est.estimate


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("run", ["unloaded", "loaded"])
def test_a_chained_model_raises_no_false_change(ur, seed, run) -> None:
    _, chained, logs = ur
    log = logs[seed][run == "loaded"]
    events, est = follow(payload_config(load_model(chained), "payload"), log.samples)
    assert not changes(events), events
    assert not [e for e in events if isinstance(e, InputPaused)], events  # clean input: no pause either
    mass = est.estimate.value("mass_kg")
    # the chained model's link errors (up to 6 %) land on the payload: 0.22 kg at worst, measured
    assert abs(mass - log.payload_kg) < 0.1 * PAYLOAD_KG, mass


# --- the iiwa on a pick-and-place (500 Hz, PID drives, 0.2 mrad encoder noise) ------------------------------
PICK = POSE_RAD + np.array([-0.8, 0.3, 0.2, 0.3, 0.3, -0.3, 0.5])
PLACE = POSE_RAD + np.array([0.8, -0.1, -0.2, -0.2, -0.3, 0.3, -0.6])
MOVE_S, DWELL_S = 0.7, 0.8  # minimum-jerk moves, dwells at the pick and place poses


def pick_and_place(seconds: float) -> np.ndarray:
    """(N, 7) setpoints: dwell at the pick pose, move to the place pose, dwell, move back; repeated."""
    t = np.arange(0, seconds + 1e-9, DT_S)
    phase = t % (2 * (MOVE_S + DWELL_S))
    out = np.empty((len(t), 7))
    for k, p in enumerate(phase):
        there = p >= MOVE_S + DWELL_S
        p -= there * (MOVE_S + DWELL_S)
        x = np.clip((p - DWELL_S) / MOVE_S, 0.0, 1.0)
        s = 10 * x**3 - 15 * x**4 + 6 * x**5
        a, b = (PLACE, PICK) if there else (PICK, PLACE)
        out[k] = a + s * (b - a)
    return out


def iiwa_record(robot_model: str, seconds: float, changes_kg=()) -> JointSamples:
    return tracking_record(robot_model, pick_and_place(seconds), seconds, changes_kg)


@pytest.fixture(scope="module")
def iiwa(tmp_path_factory):
    robot_model, arm_model = models(str(tmp_path_factory.mktemp("iiwa_hostile")))
    return robot_model, payload_config(arm_model, IIWA_FLANGE)


def test_a_bare_arm_on_a_pick_and_place_raises_no_change(iiwa) -> None:
    robot_model, config = iiwa
    events, est = follow(config, iiwa_record(robot_model, 24.0))
    assert not changes(events) and not [e for e in events if isinstance(e, InputPaused)], events
    assert 0.0 <= est.estimate.value("mass_kg") < 0.02  # measured 0.0016 kg


def test_a_payload_picked_and_removed_is_detected_and_published_physical(iiwa) -> None:
    """The real changes are still events (one alarm each), nothing after the removal, and the removed payload
    is published as mass >= 0 and a PSD inertia (before: -0.0029 kg and iyy -0.0012 kg m^2)."""
    robot_model, config = iiwa
    attach_s, remove_s = 0.5 * DWELL_S + 2 * (MOVE_S + DWELL_S), 0.5 * DWELL_S + 6 * (MOVE_S + DWELL_S)  # at pick
    samples = iiwa_record(robot_model, 24.0, ((attach_s, 1.5), (remove_s, 0.0)))
    events, est = follow(config, samples)
    start = samples.time_ns[0]
    alarms = [e for e in events if isinstance(e, ChangeDetected)]
    assert len(alarms) == 2 and all("mass_kg" in a.parameters for a in alarms), alarms
    # attached in a dwell, seen 1.85 s later once the arm has moved it (the same before the guards); removed at
    # the start of a move: 0.15 s
    for alarm, when, within_s in zip(alarms, (attach_s, remove_s), (2.5, 0.5)):
        assert 0 < (alarm.time_ns - start) / S - when < within_s, (alarm, when)
    settled = [e for e in events if isinstance(e, ParameterChange) and e.parameter == "mass_kg"]
    assert [round(e.value, 1) for e in settled] == [1.5, 0.0], settled
    last = max(e.time_ns for e in changes(events))
    assert (last - start) / S < remove_s + 3.0  # nothing after the removal settled
    assert 0.0 <= est.estimate.value("mass_kg") < 0.02


def test_a_change_needs_to_matter() -> None:
    """The rule's pieces on their own: eps1 of the payload's own scale, the absolute floor, the standard errors
    of the step and of the estimate, and no first-moment change of a payload without mass."""
    config = payload_config("arm3", "link3")
    est = OnlineEstimator(config)
    names = config.model.names  # mass, mx, mz, iyy
    est._std[:] = 0.0
    values = np.array([1.5, 0.0, 0.12, 0.01])
    i = np.arange(len(names))
    # 1.5 kg: mass changes over 5 % (75 g), first moments over 0.02 kg m (the floor; 10 % of 1.5 kg x 0.1 m = 0.015)
    assert list(est._matters(i, np.array([0.08, 0.021, 0.021, 0.0]), values, 0.0, 8.0)) == [True, True, True, False]
    assert not est._matters(i, np.array([0.07, 0.019, 0.019, 0.0]), values, 0.0, 8.0).any()
    # a 10 kg payload: 1.5 kg m first moments, changes of 0.15 kg m count, 0.05 kg m do not
    heavy = np.array([10.0, 0.0, 1.5, 0.1])
    assert list(est._matters(i, np.array([0.0, 0.05, 0.16, 0.0]), heavy, 0.0, 8.0)) == [False, False, True, False]
    # k sigma of the step and of the estimate together
    assert est._matters(0, 0.5, values, 0.05, 8.0) and not est._matters(0, 0.5, values, 0.05, 12.0)
    est._std[0] = 0.05
    assert not est._matters(0, 0.5, values, 0.05, 8.0)  # sqrt(2) x 0.05 x 8 = 0.57
    # first moments moving on their own under a massless payload: no alarm; with the mass moving: alarm
    moved = np.array([False, True, True, False])
    assert not config.model.alarmable(moved, np.zeros(4), np.array([0.01, 0.05, 0.05, 0.0])).any()
    assert config.model.alarmable(moved, np.array([1.5, 0, 0.12, 0.01]), np.array([1.5, 0.05, 0.2, 0.01])).any()
