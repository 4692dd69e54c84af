"""Where a periodic record's periods lie: what the recorder stores with a periodic tape and reads back, and the
check that the data repeat with the stated period (pure functions; the whole path on a simulated arm and a real
bag is `test_identify_periodic`)."""

from __future__ import annotations

import numpy as np
import pytest

from sysid_ros.core import tapes
from sysid_ros.core.errors import DataError
from sysid_ros.core.identify import problem_from_dict
from sysid_ros.core.linear import Periods, check_period
from sysid_ros.core.tapes import FourierCurve, Tape, periodic_metadata, recorded_periods

START_NS = 1_764_590_400_000_000_000


def fourier_tape(periods: int = 3) -> Tape:
    curves = tuple(
        FourierCurve(0.25, 2.0, periods, 0.5 + 2.0 * periods, 0.1 * k, (0.2, -0.1), (0.1, -0.025)) for k in range(2)
    )
    return Tape(name="f", kind="optimal", interface="position", joints=("a", "b"), curves=curves, command_rate_hz=500.0)


def test_the_recorder_states_a_periodic_tapes_periods_and_reads_them_back():
    tape = fourier_tape()
    meta = periodic_metadata(tape, START_NS)
    assert meta == {
        "kind": "optimal",
        "period_s": 2.0,
        "periods": 3,
        "harmonics": 2,
        "top_hz": 1.0,
        "first_period_ns": START_NS + 250_000_000,
    }
    got = recorded_periods({"periodic": meta})
    assert (got.start_ns, got.period_s, got.periods, got.keep_hz, got.settle_s) == (
        meta["first_period_ns"],
        2.0,
        3,
        5.0,
        1.0,
    )
    # a bag recorded before the `periodic` entry: its tape and start say the same
    assert recorded_periods({"tape": tape.to_dict(), "start_ns": START_NS}) == got
    # another tool's bag, a tape that is not periodic: nothing
    assert recorded_periods({}) is None and recorded_periods({"joint_names": ["a"]}) is None
    sine = tapes.multisine({"a": tapes.Envelope(0.0, 0.5, 1.0, 10.0)}, 500.0)
    assert periodic_metadata(sine, START_NS) is None
    assert recorded_periods({"tape": sine.to_dict(), "start_ns": START_NS}) is None
    with pytest.raises(DataError, match="needs kind, period_s"):
        recorded_periods({"periodic": {"period_s": 2.0}})
    with pytest.raises(DataError, match="whole periods >= 1"):
        recorded_periods({"periodic": {**meta, "periods": 0}})


def test_a_stated_period_is_checked_on_the_data():
    """Three 2 s periods of the tape at 500 Hz with 0.2 mrad of noise: its period fits; 1 % off does not (the lag
    search finds 2 s), nor a start that leaves too few samples."""
    tape = fourier_tape()
    t = np.arange(0.0, tapes.duration_s(tape), 0.002)
    q = tapes.sample(tape, t).position + np.random.default_rng(0).normal(0, 2e-4, (len(t), 2))
    time_ns = START_NS + np.round(t * 1e9).astype(np.int64)
    stated = recorded_periods({"periodic": periodic_metadata(tape, START_NS)})
    check = check_period(time_ns, q, stated)
    assert check.fits and check.correlation > 0.9999 and check.best_period_s == pytest.approx(2.0)
    off = check_period(time_ns, q, Periods(stated.start_ns, 1.98, 3, 5.0, 0.5, "x"))
    assert not off.fits and off.best_period_s == pytest.approx(2.0)
    with pytest.raises(DataError, match="holds 2 whole period"):
        check_period(time_ns, q, Periods(stated.start_ns + 10**9, 2.0, 3, 5.0, 0.5, "x"))
    with pytest.raises(DataError, match="not a whole number of 2 ms samples"):
        check_period(time_ns, q, Periods(stated.start_ns, 2.0003, 3, 5.0, 0.5, "x"))


def test_the_problem_files_periodic_key():
    doc = {
        "model": "pendulum",
        "joints": ["hinge"],
        "training": [{"bag": "b", "periodic": {"start_s": 0.25, "period_s": 5.0, "periods": 2}}],
        "parameters": [{"name": "m", "kind": "body_mass", "body": "pole"}],
    }
    p = problem_from_dict(doc).training[0].periodic
    assert (p.start_s, p.period_s, p.periods, p.keep_hz, p.settle_s) == (0.25, 5.0, 2, None, None)
    assert problem_from_dict({**doc, "training": ["b"]}).training[0].periodic is None
    for bad, match in (
        ({"start_s": 0.25, "period_s": 5.0}, "periods: is required"),
        ({"start_s": 0.25, "period_s": -1.0, "periods": 2}, "period_s"),
        ({"start_s": 0.25, "period_s": 5.0, "periods": 2, "period": 3}, "unknown key"),
    ):
        with pytest.raises(Exception, match=match):
            problem_from_dict({**doc, "training": [{"bag": "b", "periodic": bad}]})
