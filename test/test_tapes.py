"""Tapes: inside their envelope by construction, at rest at both ends, consistent derivatives, exact
serialisation, seeded evaluation, and the seed's rules (chirp top frequency, plateau speeds, steps)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sysid_ros.core import tapes
from sysid_ros.core.errors import ConfigError, EnvelopeError
from sysid_ros.core.tapes import Envelope, KnotCurve, SineCurve, Tape, check_tape

QUICKSTART = {"elbow": Envelope(origin_rad=0.0, travel_rad=0.4, max_speed_rad_s=2.0, max_torque_nm=6.0)}
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def envelope_sets(draw: st.DrawFn, max_joints: int = 2) -> dict[str, Envelope]:
    count = draw(st.integers(1, max_joints))
    return {
        f"j{i}": Envelope(
            origin_rad=draw(st.floats(-3.0, 3.0)),
            travel_rad=draw(st.floats(0.02, 2.5)),
            max_speed_rad_s=draw(st.floats(0.1, 10.0)),
            max_torque_nm=draw(st.floats(0.01, 500.0)),
            max_accel_rad_s2=draw(st.none() | st.floats(0.5, 500.0)),
        )
        for i in range(count)
    }


RATES = st.floats(20.0, 500.0)
SEEDS = st.integers(0, 2**31 - 1)

GENERIC_KINDS = [k for k in tapes.KINDS if k not in tapes.MODEL_KINDS]


def every_tape(envelopes: dict[str, Envelope], rate: float, seed: int) -> list[Tape]:
    """One tape of every kind (but those designed for a model: test_excitation_plan), plus the effort variants of
    multisine and dither."""
    out = [tapes.build(kind, envelopes, rate, seed=seed) for kind in GENERIC_KINDS]
    out += [tapes.build(kind, envelopes, rate, seed=seed, interface="effort") for kind in ("multisine", "dither")]
    assert {t.kind for t in out} == set(GENERIC_KINDS)
    return out


def probe_times(tape: Tape, per_segment: int = 10) -> np.ndarray:
    """1 kHz over the whole tape, plus `per_segment` points inside every knot segment (sharp steps and short
    ramps are sampled however short they are)."""
    total = tapes.duration_s(tape)
    times = [np.linspace(0.0, total, int(math.ceil(total / 1e-3)) + 1)]
    for curve in tape.curves:
        if isinstance(curve, KnotCurve):
            edges = np.array(curve.time_s)
            fill = np.linspace(0.0, 1.0, per_segment + 2)[1:-1]
            times.append((edges[:-1, None] + np.diff(edges)[:, None] * fill).ravel())
    return np.concatenate(times)


def uniform_times(tape: Tape, step_s: float = 1e-3) -> np.ndarray:
    total = tapes.duration_s(tape)
    return np.linspace(0.0, total, int(math.ceil(total / step_s)) + 1)


def within(values: np.ndarray, bound: float) -> bool:
    return bool(np.all(np.abs(values) <= bound * (1 + 1e-9) + 1e-12))


# ---- inside the envelope, at rest at both ends --------------------------------------------------------------


@SETTINGS
@given(envelopes=envelope_sets(), rate=RATES, seed=SEEDS)
def test_every_kind_stays_inside_its_envelope_and_starts_and_ends_at_rest(envelopes, rate, seed):
    for tape in every_tape(envelopes, rate, seed):
        got = tapes.sample(tape, probe_times(tape))
        for j, joint in enumerate(tape.joints):
            env = envelopes[joint]
            if tape.interface == "effort":
                # torque sines are scaled to 80 % of the limit from a 100-points-per-period grid; 1e-3 covers
                # the peak that grid can miss (1 - cos(pi / 100) = 5e-4)
                assert within(got.effort[:, j], tapes.TORQUE_USE * env.max_torque_nm * (1 + 1e-3)), tape.name
                assert got.effort[0, j] == pytest.approx(0, abs=1e-12) and abs(got.effort[-1, j]) < 1e-9
                continue
            q, v, a = got.position[:, j], got.velocity[:, j], got.acceleration[:, j]
            assert within(q - env.origin_rad, tapes.TRAVEL_USE * env.travel_rad), (tape.name, joint)
            assert within(v, tapes.SPEED_USE * env.max_speed_rad_s * (1 + 1e-3)), (tape.name, joint)
            if tape.kind != "steps":
                assert within(a, tapes.ACCEL_USE * env.design_accel_rad_s2 * (1 + 1e-3)), (tape.name, joint)
            elif env.max_accel_rad_s2 is not None:  # steps are sharp: only the envelope's own limit binds
                assert within(a, tapes.ACCEL_USE * env.max_accel_rad_s2), (tape.name, joint)
        ends = tapes.sample(tape, [0.0, tapes.duration_s(tape)])
        for j, joint in enumerate(tape.joints):
            if tape.interface == "effort":
                continue
            env = envelopes[joint]
            q, v, a = ends.position[:, j], ends.velocity[:, j], ends.acceleration[:, j]
            for k in (0, -1):  # at rest where it started, which is the origin by default
                assert q[k] == pytest.approx(env.origin_rad, abs=1e-12)
                assert abs(v[k]) <= 1e-9 * env.max_speed_rad_s and abs(a[k]) <= 1e-9 * env.design_accel_rad_s2
        check_tape(tape, envelopes)  # the library's own check agrees


@settings(max_examples=10, deadline=None)
@given(envelopes=envelope_sets(max_joints=3), rate=RATES, seed=SEEDS, data=st.data())
def test_tapes_from_a_given_start_begin_and_end_there(envelopes, rate, seed, data):
    start = {j: e.origin_rad + data.draw(st.floats(-0.7, 0.7)) * e.travel_rad for j, e in envelopes.items()}
    for kind in GENERIC_KINDS:
        tape = tapes.build(kind, envelopes, rate, seed=seed, start=start)
        got = tapes.sample(tape, [0.0, tapes.duration_s(tape)])
        np.testing.assert_allclose(got.position, [list(start.values())] * 2, rtol=0, atol=1e-12)
        np.testing.assert_allclose(got.velocity, 0.0, atol=1e-9)


def test_a_start_outside_the_usable_travel_is_refused():
    with pytest.raises(EnvelopeError) as err:
        tapes.chirp(QUICKSTART, 100.0, start={"elbow": 0.39})
    assert err.value.where["joint"] == "elbow"
    # where the joint is, and the room it is outside of (not a "tape start" the user never chose)
    room = 0.9 * QUICKSTART["elbow"].travel_rad
    assert f"at 0.39 rad, outside the room tapes use: {-room:.4g} to {room:.4g} rad (90% of travel_rad" in str(
        err.value
    )


# ---- analytic derivatives agree with the sampled position ---------------------------------------------------


def numeric_vs_analytic(tape: Tape, t: np.ndarray) -> tuple[float, float, float, float]:
    """Worst |numeric - analytic| speed and acceleration on a uniform grid `t`, and the peaks they compare to.

    Speed: central differences of position (edges one-sided, second order); acceleration: second differences.
    """
    got = tapes.sample(tape, t)
    dt = t[1] - t[0]
    q, v, a = got.position[:, 0], got.velocity[:, 0], got.acceleration[:, 0]
    v_err = np.max(np.abs(np.gradient(q, dt, edge_order=2) - v))
    a_err = np.max(np.abs((q[2:] - 2 * q[1:-1] + q[:-2]) / dt**2 - a[1:-1]))
    return v_err, a_err, np.max(np.abs(v)), np.max(np.abs(a))


@settings(max_examples=20, deadline=None)
@given(envelopes=envelope_sets(max_joints=1), rate=RATES, seed=SEEDS)
def test_sampled_derivatives_agree_with_numerical_derivatives_of_the_position(envelopes, rate, seed):
    for tape in every_tape(envelopes, rate, seed):
        if tape.interface == "effort":
            continue
        curve = tape.curves[0]
        if isinstance(curve, KnotCurve):
            # inside each quintic piece on 41 points: difference errors are ~ (1/40)^2 of the piece's own
            # derivative scale, well under 0.2 % of the tape's peak
            edges = np.array(curve.time_s)
            t = edges[:-1, None] + np.diff(edges)[:, None] * np.linspace(0.0, 1.0, 41)
            got = tapes.sample(tape, t.ravel())
            q, v, a = (x.reshape(t.shape) for x in (got.position, got.velocity, got.acceleration))
            dt = t[:, 1:2] - t[:, 0:1]
            v_err = np.max(np.abs(np.gradient(q, axis=1, edge_order=2) / dt - v))
            a_err = np.max(np.abs((q[:, 2:] - 2 * q[:, 1:-1] + q[:, :-2]) / dt**2 - a[:, 1:-1]))
            v_peak, a_peak = np.max(np.abs(v)), np.max(np.abs(a))
            # C2 at the knots: the pieces either side agree in speed and acceleration. A hair either side
            # (1e-5 of the shorter neighbouring segment) they differ by the jerk over that hair, < 1e-4 of
            # the peak acceleration; a real jump would be of the order of the peak
            knots = np.array(edges[1:-1])
            delta = 1e-5 * np.minimum(np.diff(edges)[:-1], np.diff(edges)[1:])
            left, right = tapes.sample(tape, knots - delta), tapes.sample(tape, knots + delta)
            assert np.max(np.abs(left.velocity - right.velocity), initial=0) <= 1e-4 * v_peak + 1e-9
            assert np.max(np.abs(left.acceleration - right.acceleration), initial=0) <= 1e-3 * a_peak + 1e-9
        else:
            # sines at <= 3 Hz on 10 kHz err by (2 pi 3 Hz 0.1 ms)^2 / 6 ~ 6e-7; the quintic taper is C2 with
            # a jerk jump of 60 A / taper^3 at its ends, where second differences err by 0.1 ms x jump / 6
            # (< 0.05 % of the peak even for a 0.4 Hz dither, whose acceleration is mostly the taper's)
            v_err, a_err, v_peak, a_peak = numeric_vs_analytic(tape, uniform_times(tape, 1e-4))
        assert v_err <= 2e-3 * v_peak + 1e-9, tape.name
        assert a_err <= 2e-3 * a_peak + 1e-6, tape.name


# ---- serialisation and seeds ---------------------------------------------------------------------------------


@settings(max_examples=10, deadline=None)
@given(envelopes=envelope_sets(max_joints=3), rate=RATES, seed=SEEDS)
def test_serialisation_round_trips_exactly_through_yaml(envelopes, rate, seed):
    for tape in every_tape(envelopes, rate, seed):
        data = tape.to_dict()
        text = yaml.safe_dump(data)
        assert yaml.safe_load(text) == data
        back = Tape.from_dict(yaml.safe_load(text))
        assert back == tape
        t = np.linspace(0, tapes.duration_s(tape), 257)
        a, b = tapes.sample(tape, t), tapes.sample(back, t)
        for name in ("position", "velocity", "acceleration", "effort"):
            if getattr(a, name) is not None:
                assert np.array_equal(getattr(a, name), getattr(b, name))


@settings(max_examples=20, deadline=None)
@given(envelopes=envelope_sets(max_joints=2), rate=RATES, seeds=st.lists(SEEDS, min_size=2, max_size=2, unique=True))
def test_evaluation_tapes_differ_between_seeds_and_repeat_for_the_same_seed(envelopes, rate, seeds):
    first, second = (tapes.evaluation(envelopes, rate, seed) for seed in seeds)
    assert [t.kind for t in first] == ["pickplace", "cycle", "jog", "sweep"]
    assert tapes.evaluation(envelopes, rate, seeds[0]) == first
    for a, b in zip(first, second):
        assert a.name != b.name and a.curves != b.curves
        t = np.linspace(0, min(tapes.duration_s(a), tapes.duration_s(b)), 500)
        assert not np.allclose(tapes.sample(a, t).position, tapes.sample(b, t).position)
    for kind in ("multisine", "dither"):
        assert tapes.build(kind, envelopes, rate, seed=seeds[0]) != tapes.build(kind, envelopes, rate, seed=seeds[1])


def test_malformed_tape_dicts_raise_config_errors():
    good = tapes.steps(QUICKSTART, 100.0).to_dict()
    for change in (
        {"kind": "wobble"},
        {"format": 99},
        {"interface": "effort"},
        {"joints": ["a", "b"]},
        {"seed": 1.5},
        {"command_rate_hz": -1.0},
    ):
        with pytest.raises(ConfigError):
            Tape.from_dict({**good, **change})
    broken = {**good, "curves": [{**good["curves"][0], "time_s": list(reversed(good["curves"][0]["time_s"]))}]}
    with pytest.raises(ConfigError):
        Tape.from_dict(broken)
    with pytest.raises(ConfigError):
        Tape.from_dict({k: v for k, v in good.items() if k != "curves"})


@settings(max_examples=10, deadline=None)
@given(
    envelopes=envelope_sets(max_joints=2),
    rate=RATES,
    seed=SEEDS,
    factor=st.floats(1.0, 4.0),
    shrink=st.floats(0.05, 1.0),
)
def test_stretched_and_shrunk_tapes_are_the_same_motion_slower_or_smaller(envelopes, rate, seed, factor, shrink):
    for tape in every_tape(envelopes, rate, seed):
        slow, small = tapes.stretched(tape, factor), tapes.shrunk(tape, shrink)
        assert tapes.duration_s(slow) == pytest.approx(factor * tapes.duration_s(tape))
        t = np.linspace(0.0, tapes.duration_s(tape), 301)
        a, b, c = tapes.sample(tape, t), tapes.sample(slow, factor * t), tapes.sample(small, t)
        if tape.interface == "effort":
            np.testing.assert_allclose(b.effort, a.effort, atol=1e-9 * np.abs(a.effort).max())
            np.testing.assert_allclose(c.effort, shrink * a.effort, atol=1e-12)
        else:
            scale = 1e-9 * (1 + np.abs(a.position).max())
            np.testing.assert_allclose(b.position, a.position, atol=scale)
            np.testing.assert_allclose(b.velocity, a.velocity / factor, atol=1e-9 * (1 + np.abs(a.velocity).max()))
            start = a.position[0]
            np.testing.assert_allclose(c.position - start, shrink * (a.position - start), atol=scale)
            np.testing.assert_allclose(
                c.acceleration, shrink * a.acceleration, atol=1e-9 * (1 + np.abs(a.acceleration).max())
            )
        check_tape(slow, envelopes)
        check_tape(small, envelopes)
    with pytest.raises(ConfigError):
        tapes.stretched(tape, 0.5)
    with pytest.raises(ConfigError):
        tapes.shrunk(tape, 1.5)


# ---- the seed's rules ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [20.0, 50.0, 100.0, 150.0, 1000.0])
def test_chirp_top_frequency_is_min_of_2_hz_and_rate_over_50(rate):
    tape = tapes.chirp(QUICKSTART, rate)
    top = min(2.0, rate / 50.0)
    assert tapes.chirp_top_hz(rate) == top and tape.curves[0].f1_hz == top
    # measured: half-periods between zero crossings of the sampled chirp
    t = np.arange(0.0, tapes.duration_s(tape), 1e-4)
    q = tapes.sample(tape, t).position[:, 0]
    active = (t > 0.5) & (t < 20.5)
    crossings = t[active][np.flatnonzero(np.diff(np.signbit(q[active])))]
    freq = 0.5 / np.diff(crossings)
    # the last whole half-period ends by 20.5 s, so it starts up to 1 / top earlier on a 0.1 -> top ramp over 20 s
    assert top - (top - 0.1) / 20.0 / top - 1e-3 <= freq.max() <= top * 1.001


@SETTINGS
@given(envelopes=envelope_sets(max_joints=2), rate=RATES)
def test_plateaus_cruise_both_ways_at_20_to_100_percent_of_80_percent_of_top_speed(envelopes, rate):
    tape = tapes.plateaus(envelopes, rate)
    t = uniform_times(tape)
    v_all = tapes.sample(tape, t).velocity
    for j, joint in enumerate(tape.joints):
        env, v = envelopes[joint], v_all[:, j]
        levels = tapes.plateau_speeds_rad_s(tapes.room(env))
        top = tapes.SPEED_USE * env.max_speed_rad_s
        assert levels[-1] <= top * (1 + 1e-12)
        np.testing.assert_allclose(np.array(levels) / levels[-1], tapes.PLATEAU_FRACTIONS, rtol=1e-12)
        if levels[-1] >= top * (1 - 1e-12):  # the travel allows the full speed: exactly the seed's levels
            np.testing.assert_allclose(levels, np.array(tapes.PLATEAU_FRACTIONS) * 0.8 * env.max_speed_rad_s)
        for level in levels:
            for sign in (1.0, -1.0):  # each level cruises >= 0.2 s in each direction
                cruising = np.abs(v - sign * level) <= 1e-9 * level
                assert cruising.sum() * (t[1] - t[0]) >= 0.19, (joint, level, sign)


def test_quickstart_plateaus_are_the_seeds_speeds():
    v = tapes.sample(tapes.plateaus(QUICKSTART, 100.0), np.arange(0, 18, 1e-3)).velocity[:, 0]
    for level in (0.32, 0.64, 0.96, 1.28, 1.6):  # 20-100 % of 80 % of 2 rad/s
        assert np.sum(np.abs(v - level) < 1e-9) > 200 and np.sum(np.abs(v + level) < 1e-9) > 200


def moves_and_holds(tape: Tape) -> list[tuple[float, float, float, float]]:
    """(from, to, move seconds, following hold seconds) for each rest-to-rest move of a one-joint knot tape."""
    curve = tape.curves[0]
    assert isinstance(curve, KnotCurve)
    time, pos, vel = map(np.array, (curve.time_s, curve.position, curve.velocity))
    rest = np.flatnonzero(vel == 0.0)
    out = []
    for a, b in zip(rest, rest[1:]):
        if pos[a] != pos[b]:
            hold = time[b + 1] - time[b] if b + 1 < len(time) and pos[b + 1] == pos[b] else 0.0
            out.append((pos[a], pos[b], time[b] - time[a], hold))
    return out


@SETTINGS
@given(envelopes=envelope_sets(max_joints=1), rate=RATES)
def test_steps_are_six_with_two_of_15_percent_of_travel_as_sharp_as_two_intervals_allow(envelopes, rate):
    tape = tapes.steps(envelopes, rate)
    env = envelopes["j0"]
    moves = moves_and_holds(tape)
    assert len(moves) == 6
    sizes = np.array([abs(b - a) for a, b, _, _ in moves]) / env.travel_rad
    np.testing.assert_allclose(np.sort(sizes), [0.05] * 4 + [0.15] * 2, rtol=1e-9)
    speed, accel = 0.8 * env.max_speed_rad_s, 0.8 * (env.max_accel_rad_s2 or math.inf)
    for size, (_, _, move_s, hold_s) in zip(sizes, moves):
        # no faster than two command intervals, else the shortest move the envelope allows
        expected = max(2.0 / rate, tapes.min_move_time_s(size * env.travel_rad, speed, accel))
        assert move_s == pytest.approx(expected, rel=1e-9)
        assert hold_s == pytest.approx(0.8)  # into a 0.8 s hold


# ---- the seed's quickstart joint: durations and plan -----------------------------------------------------------

SEED_TABLE_S = {
    "ident-sweeps": 17.8,
    "ident-fast": 5.6,
    "ident-chirp": 21.0,
    "steps": 6.0,
    "pickplace-s0": 6.5,
    "cycle-s0": 5.2,
    "jog-s0": 5.5,
    "sweep-s0": 3.4,
}


def test_quickstart_tape_set_has_the_seeds_tapes_and_durations_of_the_same_order():
    tape_set = (
        tapes.identification(QUICKSTART, 100.0)
        + [tapes.steps(QUICKSTART, 100.0)]
        + tapes.evaluation(QUICKSTART, 100.0, seed=0)
    )
    assert [t.name for t in tape_set] == list(SEED_TABLE_S)
    for tape in tape_set:  # the seed's planner is not ours; same order means within 15 %
        assert tapes.duration_s(tape) == pytest.approx(SEED_TABLE_S[tape.name], rel=0.15), tape.name
    plan = tapes.plan_seconds(
        {"identify": tape_set[:3], "sweep (worst case)": [tape_set[3]], "verify": tape_set[4:]},
        repeats={"sweep (worst case)": 14},
    )
    assert plan["identify"] == pytest.approx(sum(tapes.duration_s(t) for t in tape_set[:3]))
    assert plan["identify"] == pytest.approx(44, abs=2)  # the seed plans 44 s
    assert plan["sweep (worst case)"] == pytest.approx(14 * tapes.duration_s(tape_set[3]))
    assert plan["sweep (worst case)"] == pytest.approx(84, rel=0.1)  # the seed plans 84 s for 14 rungs
    assert tapes.plan_seconds({"verify": tape_set[4:]}, repeats=3)["verify"] == pytest.approx(3 * plan["verify"])
    with pytest.raises(ConfigError):
        tapes.plan_seconds({"verify": tape_set[4:]}, repeats=-1)


def test_commands_follow_the_tape_at_its_command_rate():
    tape = tapes.evaluation(QUICKSTART, 100.0, seed=4)[0]
    commands = tapes.to_commands(tape, start_ns=1_700_000_000_000_000_000)
    assert commands.interface == "position" and commands.time_ns.dtype == np.int64
    assert np.all(np.diff(commands.time_ns) == 10_000_000)
    assert (commands.time_ns[-1] - commands.time_ns[0]) * 1e-9 >= tapes.duration_s(tape) - 1e-9
    t = (commands.time_ns - commands.time_ns[0]) * 1e-9
    np.testing.assert_array_equal(commands.values, tapes.sample(tape, t).position)
    torque = tapes.to_commands(tapes.multisine(QUICKSTART, 100.0, interface="effort"))
    assert torque.interface == "effort" and np.abs(torque.values).max() <= 6.0


def test_effort_multisine_follows_the_pendulum_lesson():
    """Five sines in 0.2-3 Hz (clipped to rate / 50), 10 s, peaking at 80 % of the torque limit."""
    envelopes = {"hinge": Envelope(origin_rad=0.0, travel_rad=1.0, max_speed_rad_s=3.0, max_torque_nm=3.125)}
    tape = tapes.multisine(envelopes, 500.0, seed=1, interface="effort")
    curve = tape.curves[0]
    assert isinstance(curve, SineCurve) and len(curve.freqs_hz) == 5 and curve.duration_s == 10.0
    assert all(0.2 <= f <= 3.0 for f in curve.freqs_hz)
    torque = tapes.sample(tape, np.arange(0, tapes.duration_s(tape), 1e-4)).effort[:, 0]
    assert np.abs(torque).max() == pytest.approx(2.5, rel=1e-3)
    assert max(tapes.multisine(envelopes, 100.0, seed=1, interface="effort").curves[0].freqs_hz) <= 2.0
