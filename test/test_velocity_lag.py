"""A record's own velocity that lags its positions (a drive's filtered estimate) is read earlier for the friction
columns from 2 samples of lag on, and as logged below (`torque_validation.measured_velocity`), on the Panda's
model with a record the test writes."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from sysid_ros.core.identify.checks.torque_validation import (
    VELOCITY_LAG_SAMPLES,
    measured_velocity,
    velocity_lag_samples,
)
from sysid_ros.core.identify.rollout import sequences as sd
from sysid_ros.core.signals import JointSamples, advanced

MODEL = Path(__file__).parent / "data/real/panda_menagerie/panda_torque.xml"
JOINTS = [f"joint{k}" for k in range(1, 8)]


def record(lag_samples: float) -> tuple[JointSamples, np.ndarray]:
    """8 s at 1 kHz of sines on every joint, the velocity `lag_samples` behind the positions' derivative."""
    t = np.arange(8000) * 1e-3
    rng = np.random.default_rng(5)
    freqs, phases = np.array([0.3, 0.7, 1.3]), rng.uniform(0, 2 * np.pi, (3, 1, 7))
    angle = 2 * np.pi * freqs[:, None, None] * t[None, :, None] + phases
    q = 0.2 * np.sum(np.sin(angle) / freqs[:, None, None], axis=0)
    qd = 0.2 * np.sum(2 * np.pi * np.cos(angle), axis=0)
    v = advanced(qd, -lag_samples)
    samples = JointSamples(tuple(JOINTS), (t * 1e9).astype(np.int64), q, v, np.zeros_like(q))
    return samples, qd


@pytest.mark.parametrize("lag", [4.8, 1.0])
def test_a_lagging_velocity_is_read_earlier_from_two_samples_on(lag):
    model = mujoco.MjModel.from_xml_path(str(MODEL))
    maps = sd.joint_maps(model, JOINTS, {})
    samples, qd = record(lag)
    assert velocity_lag_samples(model, maps, samples) == pytest.approx(lag, abs=0.1)
    v = measured_velocity(model, maps, samples)
    inner = slice(100, -100)
    error = np.max(np.abs(v[inner] - qd[inner])) / np.max(np.abs(qd))
    if lag >= VELOCITY_LAG_SAMPLES:
        assert error < 0.01, error  # re-timed
    else:
        np.testing.assert_array_equal(v, samples.velocity)  # as logged
