"""The optimal tape and its plan on the embedded 3-link arm, Fourier curves, self-collisions and periodic records
(light: a few short designs; the 7-joint comparison is test_excitation_optimal)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import yaml

from sysid_ros.core import tapes
from sysid_ros.core.errors import ConfigError, DataError
from sysid_ros.core.linear import periodic_record
from sysid_ros.core.tapes import Design, self_collisions

ENVELOPES = {j: tapes.Envelope(0.0, 1.0, 2.0, t) for j, t in (("shoulder", 80.0), ("elbow", 40.0), ("wrist", 10.0))}
QUICK = Design(max_iters=3, starts=2)


def test_optimal_tape_is_seeded_at_rest_inside_and_round_trips(tmp_path):
    a = tapes.optimal(ENVELOPES, 500.0, model="arm3", seed=1, design=QUICK, cache=False)
    b = tapes.optimal(ENVELOPES, 500.0, model="arm3", seed=1, design=QUICK, cache=False)
    c = tapes.optimal(ENVELOPES, 500.0, model="arm3", seed=2, design=QUICK, cache=False)
    assert a.to_dict() == b.to_dict() and a.to_dict() != c.to_dict()
    assert tapes.Tape.from_dict(yaml.safe_load(yaml.safe_dump(a.to_dict()))) == a
    tapes.check_tape(a, ENVELOPES)
    ends = tapes.sample(a, [0.0, a.curves[0].start_s, a.curves[0].motion_end_s, tapes.duration_s(a)])
    np.testing.assert_allclose(ends.position, 0.0, atol=1e-12)  # rests at the origins (the given pose)
    np.testing.assert_allclose(ends.velocity, 0.0, atol=1e-9)
    np.testing.assert_allclose(ends.acceleration, 0.0, atol=1e-9)
    # the motion is periodic: the second period repeats the first
    t = a.curves[0].start_s + np.linspace(0.0, a.curves[0].period_s, 50)
    np.testing.assert_allclose(
        tapes.sample(a, t).position, tapes.sample(a, t + a.curves[0].period_s).position, atol=1e-12
    )


def test_the_design_improves_on_its_random_start_and_is_cached(tmp_path):
    start = tapes.plan(
        tapes.optimal(ENVELOPES, 500.0, model="arm3", design=Design(max_iters=0), cache=False), ENVELOPES, "arm3"
    )
    designed = tapes.optimal(ENVELOPES, 500.0, model="arm3", cache_dir=tmp_path)
    got = tapes.plan(designed, ENVELOPES, "arm3")
    # measured: the geometric-mean half-width 0.80x the best random start's, condition number 82 against 106
    assert np.exp(np.mean(np.log(got.half_width_95))) < 0.9 * np.exp(np.mean(np.log(start.half_width_95)))
    assert all(min(m.values()) > 0 for m in got.margins.values())
    files = list(tmp_path.glob("optimal-s0-*.yaml"))
    assert len(files) == 1 and tapes.optimal(ENVELOPES, 500.0, model="arm3", cache_dir=tmp_path) == designed
    files[0].write_text("not: [a tape")  # a damaged cache entry is designed again, not trusted
    assert tapes.optimal(ENVELOPES, 500.0, model="arm3", cache_dir=tmp_path) == designed
    assert tapes.build("optimal", ENVELOPES, 500.0, 0, model="arm3", cache_dir=tmp_path) == designed


def test_plan_scores_any_position_tape():
    multisine = tapes.plan(tapes.multisine(ENVELOPES, 500.0), ENVELOPES, "arm3", torque_noise_nm=0.2)
    assert multisine.periods == 1 and multisine.motion_s == pytest.approx(11.0)
    assert len(multisine.base_names) == len(multisine.half_width_95) and np.all(multisine.half_width_95 > 0)
    assert "condition number" in multisine.summary()[0]


def test_refusals():
    with pytest.raises(ConfigError, match="name one"):
        tapes.optimal(ENVELOPES, 500.0, cache=False)
    with pytest.raises(ConfigError, match="not in the model"):
        tapes.optimal({**ENVELOPES, "knee": ENVELOPES["wrist"]}, 500.0, model="arm3", cache=False)
    with pytest.raises(ConfigError, match="no envelope|not in the tape"):
        tapes.optimal({"shoulder": ENVELOPES["shoulder"]}, 500.0, model="arm3", cache=False)
    with pytest.raises(ConfigError, match="criterion"):
        Design(criterion="luck")
    with pytest.raises(ConfigError, match="at rest"):
        tapes.FourierCurve(0.0, 1.0, 2, 2.0, 0.0, (1.0, 0.0), (0.0, 0.0))


def test_self_collisions_name_the_bodies():
    xml = """<mujoco><worldbody><body name="a"><joint name="j1" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03"/>
      <body name="b" pos="0.5 0 0"><joint name="j2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03"/>
        <body name="c" pos="0.5 0 0"><joint name="j3" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.45 0 0" size="0.03"/></body></body></body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    assert self_collisions(model, np.zeros((1, 3))) == ()  # stretched out: clear (neighbours never count)
    folded = self_collisions(model, np.array([[0.0, 0.0, 0.0], [0.0, 2.5, 2.5]]))
    assert folded == ("a / c at sample 1",)


def test_periodic_record_differentiates_exactly_and_measures_the_noise():
    rate, period, periods = 500.0, 2.0, 4
    t = np.arange(int(rate * period * periods + 200)) / rate
    w = 2 * np.pi / period
    q = np.column_stack([0.3 * np.sin(w * t) + 0.1 * np.cos(3 * w * t), 0.2 * np.sin(2 * w * t)])
    rng = np.random.default_rng(0)
    tau = np.column_stack([np.cos(w * t), np.sin(w * t)]) + rng.normal(0, 0.5, q.shape)
    noisy = q + rng.normal(0, 1e-4, q.shape)
    got = periodic_record((t * 1e9).astype(np.int64), noisy, tau, 0, period, periods, keep_hz=5.0)
    tt = t[: int(rate * period)]
    qd = np.column_stack([0.3 * w * np.cos(w * tt) - 0.3 * w * np.sin(3 * w * tt), 0.4 * w * np.cos(2 * w * tt)])
    # 1e-4 rad noise over 4 periods, 10 harmonics kept: velocity noise ~ 1e-4 / 2 * qd_noise_gain = 1.2e-3 rad/s
    np.testing.assert_allclose(got.deriv.qd, qd, atol=5 * 5e-5 * got.deriv.qd_noise_gain)
    assert got.torque_noise_nm == pytest.approx(0.5, rel=0.05)
    assert got.position_noise_rad == pytest.approx(1e-4, rel=0.05)
    with pytest.raises(DataError, match="whole number"):
        periodic_record((t * 1e9).astype(np.int64), q, tau, 0, 2.0011, 2, 5.0)
    with pytest.raises(DataError, match="holds 4 whole period"):
        periodic_record((t * 1e9).astype(np.int64), q, tau, 0, period, 5, 5.0)
