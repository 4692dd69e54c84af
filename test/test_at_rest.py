"""`RestWatch`: the tuner moves an arm only once every joint has been slow for a stretch of robot time."""

from __future__ import annotations

import math

import numpy as np

from sysid_ros.core.tuner import RestWatch

MS = 1_000_000


def test_a_ringing_joint_is_not_at_rest_when_it_passes_zero_speed():
    watch = RestWatch.for_limits([1.0, 2.0])  # at rest below 0.1 and 0.2 rad/s
    # a 2 Hz swing of 0.5 rad/s amplitude on the first joint: slow near each turn, never slow for 0.2 s
    ringing = [
        watch.update(t * MS, np.array([0.5 * math.cos(2 * math.pi * 2.0 * t * 1e-3), 0.0])) for t in range(0, 2000, 2)
    ]
    assert not any(ringing)
    # then still: at rest once 0.2 s of slow samples have passed, not before
    still = [watch.update(t * MS, np.array([0.05, -0.15])) for t in range(2000, 2400, 2)]
    assert not still[0] and still.index(True) * 2 == 200


def test_one_fast_sample_restarts_the_hold_and_nan_is_not_rest():
    watch = RestWatch.for_limits([1.0])
    assert not watch.update(0, np.array([0.0]))
    assert not watch.update(150 * MS, np.array([0.2]))  # fast: the hold starts again
    assert not watch.update(300 * MS, np.array([0.0]))
    assert not watch.update(450 * MS, np.array([0.0]))
    assert watch.update(500 * MS, np.array([0.0]))
    assert not watch.update(510 * MS, np.array([math.nan]))
