"""The envelope: validation, check_tape naming the joint, limit, value and time at fault, and check_sample."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from sysid_ros.core import tapes
from sysid_ros.core.errors import ConfigError, EnvelopeError
from sysid_ros.core.tapes import Envelope, KnotCurve, SineCurve, Tape, check_sample, check_tape

ELBOW = Envelope(origin_rad=0.0, travel_rad=0.4, max_speed_rad_s=2.0, max_torque_nm=6.0)


# ---- validation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["travel_rad", "max_speed_rad_s", "max_torque_nm", "max_accel_rad_s2"])
@pytest.mark.parametrize("value", [0.0, -1.0, math.nan, math.inf, "fast", True])
def test_limits_must_be_positive_finite_numbers(field, value):
    good = {"origin_rad": 0.0, "travel_rad": 0.4, "max_speed_rad_s": 2.0, "max_torque_nm": 6.0}
    with pytest.raises(ConfigError) as err:
        Envelope(**{**good, field: value})
    assert err.value.where["parameter"] == field and field in str(err.value)


@pytest.mark.parametrize("origin", [math.nan, -math.inf, None])
def test_origin_must_be_finite(origin):
    with pytest.raises(ConfigError):
        Envelope(origin_rad=origin, travel_rad=0.4, max_speed_rad_s=2.0, max_torque_nm=6.0)


def test_a_valid_envelope_keeps_its_values_and_round_trips_through_yaml():
    env = Envelope(
        origin_rad=-1.5, travel_rad=0.3, max_speed_rad_s=np.float64(1.0), max_torque_nm=10, max_accel_rad_s2=5.0
    )
    assert (env.lower_rad, env.upper_rad) == (-1.8, -1.2) and type(env.max_torque_nm) is float
    assert env.design_accel_rad_s2 == 5.0
    assert ELBOW.design_accel_rad_s2 == pytest.approx(20.0)  # no limit: top speed in 0.15 s along a smoothstep
    assert Envelope.from_dict(yaml.safe_load(yaml.safe_dump(env.to_dict()))) == env


def test_from_dict_names_the_joint_and_the_bad_keys():
    with pytest.raises(ConfigError) as err:
        Envelope.from_dict(
            {"origin_rad": 0.0, "travel_rad": 0.4, "max_speed": 2.0, "max_torque_nm": 1.0}, joint="wrist"
        )
    assert err.value.where["joint"] == "wrist" and "max_speed" in str(err.value)
    with pytest.raises(ConfigError) as err:
        Envelope.from_dict({"origin_rad": 0.0, "travel_rad": 0.4, "max_torque_nm": 1.0}, joint="wrist")
    assert "max_speed_rad_s" in str(err.value)
    with pytest.raises(ConfigError) as err:
        Envelope.from_dict(
            {"origin_rad": 0.0, "travel_rad": -0.4, "max_speed_rad_s": 2.0, "max_torque_nm": 1.0}, joint="wrist"
        )
    assert err.value.where["joint"] == "wrist" and "travel_rad" in str(err.value)


# ---- check_tape --------------------------------------------------------------------------------------------


def move_tape(distance_rad: float, seconds: float, joint: str = "elbow", start: float = 0.0) -> Tape:
    """A rest-to-rest quintic move out and back, built by hand (not by a tape builder)."""
    curve = KnotCurve(
        time_s=(0.0, 0.5, 0.5 + seconds, 1.0 + seconds, 1.0 + 2 * seconds),
        position=(start, start, start + distance_rad, start + distance_rad, start),
        velocity=(0.0,) * 5,
        acceleration=(0.0,) * 5,
    )
    return Tape(
        name="hand-made", kind="cycle", interface="position", joints=(joint,), curves=(curve,), command_rate_hz=100.0
    )


def test_a_tape_inside_the_envelope_passes():
    check_tape(move_tape(0.3, 1.0), {"elbow": ELBOW})  # 1.875 * 0.3 rad / 1 s = 0.56 rad/s peak


def test_check_tape_names_travel_with_the_joint_value_and_time():
    with pytest.raises(EnvelopeError) as err:
        check_tape(move_tape(0.5, 2.0), {"elbow": ELBOW})
    where = err.value.where
    assert (where["joint"], where["limit"], where["tape"]) == ("elbow", "travel", "hand-made")
    # the quintic 0 -> 0.5 rad over 0.5..2.5 s first passes 0.4 rad where 10s^3 - 15s^4 + 6s^5 = 0.8
    s = np.linspace(0, 1, 100001)
    first = 0.5 + 2.0 * s[np.argmax(0.5 * (10 * s**3 - 15 * s**4 + 6 * s**5) > 0.4)]
    assert where["time_s"] == pytest.approx(first, abs=1e-3)  # sampled every 1 ms
    assert 0.4 < where["value"] <= 0.4 + 1e-3
    assert "travel" in str(err.value) and "elbow" in str(err.value)


def test_check_tape_names_speed():
    with pytest.raises(EnvelopeError) as err:
        check_tape(move_tape(0.3, 0.25), {"elbow": ELBOW})  # 1.875 * 0.3 / 0.25 = 2.25 rad/s peak
    assert err.value.where["limit"] == "speed" and err.value.where["joint"] == "elbow"
    assert 0.5 < err.value.where["time_s"] < 0.625  # before the peak at mid-move
    assert 2.0 < err.value.where["value"] < 2.25


def test_check_tape_names_acceleration_only_when_the_envelope_limits_it():
    tape = move_tape(0.3, 0.5)  # peak 5.77 * 0.3 / 0.25 = 6.9 rad/s^2, peak speed 1.125 rad/s
    check_tape(tape, {"elbow": ELBOW})
    limited = Envelope(origin_rad=0.0, travel_rad=0.4, max_speed_rad_s=2.0, max_torque_nm=6.0, max_accel_rad_s2=5.0)
    with pytest.raises(EnvelopeError) as err:
        check_tape(tape, {"elbow": limited})
    assert err.value.where["limit"] == "acceleration" and 5.0 < err.value.where["value"] < 7.0


def test_check_tape_names_torque_for_effort_tapes():
    curve = SineCurve(
        start_s=0.5,
        duration_s=4.0,
        taper_s=1.0,
        end_s=5.0,
        offset=0.0,
        amplitudes=(7.0,),
        freqs_hz=(1.0,),
        phases_rad=(0.0,),
    )
    tape = Tape(
        name="too-strong",
        kind="multisine",
        interface="effort",
        joints=("elbow",),
        curves=(curve,),
        command_rate_hz=100.0,
    )
    with pytest.raises(EnvelopeError) as err:
        check_tape(tape, {"elbow": ELBOW})
    assert err.value.where["limit"] == "torque" and 6.0 < err.value.where["value"] <= 7.0
    check_tape(tape, {"elbow": Envelope(0.0, 0.4, 2.0, 7.5)})


def test_check_tape_names_the_joint_that_leaves_and_a_joint_without_an_envelope():
    arm = {"shoulder": Envelope(0.0, 1.0, 1.0, 50.0), "elbow": Envelope(0.0, 1.0, 3.0, 6.0)}
    tape = tapes.fast_moves(arm, 100.0)
    check_tape(tape, arm)
    slow_elbow = {**arm, "elbow": Envelope(0.0, 1.0, 0.5, 6.0)}  # the elbow's tape was made for 3 rad/s
    with pytest.raises(EnvelopeError) as err:
        check_tape(tape, slow_elbow)
    assert err.value.where["joint"] == "elbow" and err.value.where["limit"] == "speed"
    with pytest.raises(EnvelopeError) as err:
        check_tape(tape, {"shoulder": arm["shoulder"]})
    assert err.value.where["joint"] == "elbow"


def test_identification_tapes_for_one_joint_fail_on_a_smaller_joint():
    tape = tapes.plateaus({"elbow": ELBOW}, 100.0)
    small = Envelope(origin_rad=0.0, travel_rad=0.2, max_speed_rad_s=2.0, max_torque_nm=6.0)
    with pytest.raises(EnvelopeError) as err:
        check_tape(tape, {"elbow": small})
    assert err.value.where["limit"] == "travel"
    # the first sample beyond 0.2 rad, as the check's own grid sees it
    t = tapes.probe_times(tape)
    q = tapes.sample(tape, t).position[:, 0]
    assert err.value.where["time_s"] == t[np.argmax(np.abs(q) > 0.2 * (1 + 1e-9) + 1e-12)]


def test_check_tape_sees_a_step_shorter_than_its_sampling_step():
    """A 0.6 ms step at 10 rad/s between two 1 ms samples: the probes inside each knot segment still see it."""
    curve = KnotCurve(
        time_s=(0.0, 0.5002, 0.5005, 0.5008, 1.0),
        position=(0.0, 0.0, 0.0015, 0.003, 0.003),
        velocity=(0.0, 0.0, 10.0, 0.0, 0.0),
        acceleration=(0.0,) * 5,
    )
    tape = Tape(
        name="sharp", kind="steps", interface="position", joints=("elbow",), curves=(curve,), command_rate_hz=1000.0
    )
    assert np.abs(tapes.sample(tape, np.arange(0.0, 1.0, 1e-3)).velocity).max() < 2.0  # the grid alone misses it
    with pytest.raises(EnvelopeError) as err:
        check_tape(tape, {"elbow": ELBOW})
    assert err.value.where["limit"] == "speed" and err.value.where["value"] > 2.0
    assert "peak 10 rad/s at t=0.5005 s" in str(err.value)  # the mid-step probe lands on the peak


def test_a_tape_that_does_not_start_at_rest_is_refused():
    curve = KnotCurve(time_s=(0.0, 1.0), position=(0.0, 0.1), velocity=(0.1, 0.0), acceleration=(0.0, 0.0))
    tape = Tape(
        name="jumps", kind="sweep", interface="position", joints=("elbow",), curves=(curve,), command_rate_hz=100.0
    )
    with pytest.raises(EnvelopeError) as err:
        check_tape(tape, {"elbow": ELBOW})
    assert err.value.where["limit"] == "rest" and err.value.where["time_s"] == 0.0


# ---- check_sample ------------------------------------------------------------------------------------------


def test_check_sample_passes_inside_and_names_what_is_outside():
    env = Envelope(origin_rad=1.0, travel_rad=0.4, max_speed_rad_s=2.0, max_torque_nm=6.0)
    assert check_sample(env, 1.39, 1.9, -5.9) is None
    assert "position" in check_sample(env, 1.41, 0.0, 0.0)
    assert "position" in check_sample(env, 0.59, 0.0, 0.0)
    assert check_sample(env, 1.41, travel_margin_rad=0.02) is None  # the margin absorbs feedback noise
    assert "position" in check_sample(env, 1.43, travel_margin_rad=0.02)
    assert "speed" in check_sample(env, 1.0, -2.1, 0.0)
    assert check_sample(env, 1.0, -2.1, speed_margin_frac=0.1) is None
    assert "torque" in check_sample(env, 1.0, 0.0, 6.5)
    assert check_sample(env, 1.0, 0.0, 6.5, torque_margin_frac=0.1) is None


def test_check_sample_skips_unmeasured_values_but_not_infinite_ones():
    assert check_sample(ELBOW, math.nan, None, math.nan) is None
    assert check_sample(ELBOW) is None
    assert "position" in check_sample(ELBOW, math.inf)
    assert "speed" in check_sample(ELBOW, 0.0, -math.inf)
    assert "torque" in check_sample(ELBOW, 0.0, 0.0, math.inf)
    with pytest.raises(ConfigError):
        check_sample(ELBOW, 0.0, travel_margin_rad=-0.1)


def test_check_sample_trips_on_a_servo_that_overshoots_a_tape():
    """A 15 rad/s second-order servo playing the fast-moves tape (which peaks at 90 % of travel): well
    damped (zeta 0.7) it peaks near 0.37 rad, inside the 0.4 rad travel; lightly damped (zeta 0.1) it
    overshoots to ~0.5 rad, and check_sample names the position."""
    tape = tapes.fast_moves({"elbow": ELBOW}, 100.0)
    t = np.arange(0.0, tapes.duration_s(tape), 1e-3)
    ref = tapes.sample(tape, t).position[:, 0]
    for zeta, trips in ((0.7, False), (0.1, True)):
        wn, q, qd = 15.0, 0.0, 0.0
        reasons = []
        for r in ref:  # semi-implicit Euler of q'' = wn^2 (r - q) - 2 zeta wn q'
            qd += 1e-3 * (wn**2 * (r - q) - 2 * zeta * wn * qd)
            q += 1e-3 * qd
            reasons.append(check_sample(ELBOW, q, qd, None, speed_margin_frac=1.0))
        tripped = [x for x in reasons if x is not None]
        assert bool(tripped) == trips, zeta
        if trips:
            assert tripped[0].startswith("position")
