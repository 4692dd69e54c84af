"""The one-joint designed tape (`tapes.joint_optimal`): inside the joint's room, at rest at both ends, deterministic,
and better by its criterion than random shapes of the same period and harmonics."""

from __future__ import annotations

import numpy as np
import pytest

from sysid_ros.core.errors import ConfigError
from sysid_ros.core.linear import REVOLUTE_TERMS, joint_columns
from sysid_ros.core.tapes import (
    Envelope,
    JointDesign,
    duration_s,
    joint_optimal,
    room,
    sample,
)
from sysid_ros.core.tapes import joint_design as jd

SHOULDER = Envelope(origin_rad=0.5, travel_rad=0.6, max_speed_rad_s=1.5, max_torque_nm=150.0)
DIRECT = Envelope(origin_rad=0.0, travel_rad=1.0, max_speed_rad_s=20.0, max_torque_nm=0.1)


@pytest.mark.parametrize("envelope", [SHOULDER, DIRECT], ids=["shoulder", "direct drive"])
def test_the_designed_tape_stays_in_the_room_and_starts_and_ends_at_rest(envelope: Envelope) -> None:
    tape = joint_optimal("j", envelope, 200.0, design=JointDesign(max_harmonics=3))
    again = joint_optimal("j", envelope, 200.0, design=JointDesign(max_harmonics=3))
    assert tape.to_dict() == again.to_dict()
    r = room(envelope)
    s = sample(tape, np.arange(0.0, duration_s(tape) + 1e-9, 1e-3))
    q, qd, qdd = s.position[:, 0], s.velocity[:, 0], s.acceleration[:, 0]
    assert r.low <= q.min() and q.max() <= r.high
    assert np.abs(qd).max() <= r.speed and np.abs(qdd).max() <= r.accel
    assert max(q.max() - r.start, r.start - q.min()) <= JointDesign().travel_share * (r.high - r.start) + 1e-9
    # it uses its room: some limit is reached within the builders' 2 % margin
    travel = max(q.max() - r.start, r.start - q.min()) / (JointDesign().travel_share * (r.high - r.start))
    assert max(np.abs(qd).max() / r.speed, np.abs(qdd).max() / r.accel, travel) > 0.95
    for index in (0, -1):
        assert q[index] == pytest.approx(r.start, abs=1e-9) and abs(qd[index]) < 1e-9 and abs(qdd[index]) < 1e-6
    curve = tape.curves[0]
    assert len(curve.sines) <= 3 and len(curve.sines) / curve.period_s <= 1.0 + 1e-9  # 3 harmonics, <= 1 Hz


@pytest.mark.parametrize("envelope", [SHOULDER, DIRECT], ids=["shoulder", "direct drive"])
def test_the_design_beats_random_shapes_of_the_same_period_and_harmonics(envelope: Envelope) -> None:
    tape = joint_optimal("j", envelope, 200.0, design=JointDesign(max_harmonics=3))
    curve = tape.curves[0]
    period, harmonics = curve.period_s, len(curve.sines)
    order = np.arange(1, harmonics + 1, dtype=float)
    omega = 2 * np.pi * order / period
    phase = np.multiply.outer(np.arange(40 * harmonics) * period / (40 * harmonics), omega)
    basis = (jd._null_basis(order), jd._null_basis(order**2))
    r = room(envelope)
    rng = np.random.default_rng(1)
    dims = basis[0].shape[1] + basis[1].shape[1]
    share = JointDesign().travel_share
    shapes = [jd._shape(rng.standard_normal(dims), basis, phase, omega, r, share) for _ in range(50)]
    random = [jd._score(shape, REVOLUTE_TERMS) for shape in shapes]
    s = sample(tape, np.arange(0.25, 0.25 + period, period / (40 * harmonics)))
    w = joint_columns(s.position[:, 0], s.velocity[:, 0], s.acceleration[:, 0], REVOLUTE_TERMS)
    designed = float(np.mean(np.log(np.diag(np.linalg.inv(w.T @ w / len(w))))))
    # the criterion: mean log of the predicted variances; the design is better than every random shape
    assert designed < min(random)


def test_a_bad_design_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="max_harmonics"):
        JointDesign(max_harmonics=1)
    with pytest.raises(ConfigError, match="too short"):
        joint_optimal("j", SHOULDER, 200.0, design=JointDesign(period_candidates=(0.5,)))
