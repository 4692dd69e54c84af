"""Servo tuner Stage 2 and the gates, on the SimPlant shoulder (3.6 kg m^2, 200 Hz, 5 ms encoder delay).

The sweep is run on the true model so each test isolates the sweep's rules from identification."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from support.tuner_joints import DemoJoint, shoulder, with_gains
from sysid_ros.core import tapes
from sysid_ros.core.linear import JointModel
from sysid_ros.core.tapes import Envelope
from sysid_ros.core.tuner import (
    Controller,
    DriveGains,
    Goal,
    Score,
    Servo,
    SimPlant,
    SweepLimits,
    eased,
    gains_for,
    gate_failures,
    limits_from,
    run_sweep,
    score,
)


def _setup(joint: DemoJoint, goal: Goal = Goal()) -> tuple[tapes.Tape, SweepLimits, Score]:
    step_tape = eased(tapes.steps(joint.servo.envelopes(), joint.plant.command_rate_hz), joint.truth, 150.0)
    as_found = score([joint.plant.play(step_tape, joint.servo.as_found)])
    limits, _ = limits_from([as_found], goal, joint.plant.torque_limit_nm)
    return step_tape, limits, as_found


def test_the_sweep_stops_at_the_first_ringing_rung_and_backs_off_by_the_gain_margin() -> None:
    joint = shoulder()
    step_tape, limits, _ = _setup(joint)
    got = run_sweep(joint.servo, joint.plant, joint.truth, limits, Goal(), 14.9, step_tape)
    *quiet, last = got.rungs
    assert quiet and all(r.stop is None for r in quiet)
    assert last.stop is not None and ("rings" in last.stop or "crosses" in last.stop)
    assert last.score.crossings >= 4 or last.score.ringing_mrad > limits.ringing_mrad
    for a, b in zip(got.rungs, got.rungs[1:]):
        assert b.wn_rad_s == pytest.approx(1.2 * a.wn_rad_s)
        assert b.gains.kd == pytest.approx(2 * 0.8 * b.wn_rad_s * 3.6 - 2.0)  # zeta 0.8 on the model
    assert got.rule == "gain margin"
    assert got.wn_quiet_rad_s == pytest.approx(quiet[-1].wn_rad_s)
    assert got.wn_max_rad_s == pytest.approx(quiet[-1].wn_rad_s / math.sqrt(2.0))
    # kp at the ceiling is half the last quiet rung's and about 0.35x the ringing rung's
    kp_max = 3.6 * got.wn_max_rad_s**2
    assert kp_max == pytest.approx(0.5 * quiet[-1].gains.kp)
    assert kp_max == pytest.approx(0.347 * last.gains.kp, rel=0.01)


def test_when_the_first_rung_rings_the_sweep_walks_down_until_quiet() -> None:
    joint = shoulder()
    step_tape, limits, _ = _setup(joint)
    got = run_sweep(joint.servo, joint.plant, joint.truth, limits, Goal(), 80.0, step_tape)
    assert got.rungs[0].stop is not None
    assert got.rungs[-1].stop is None and all(r.stop for r in got.rungs[:-1])
    for a, b in zip(got.rungs, got.rungs[1:]):
        assert b.wn_rad_s == pytest.approx(a.wn_rad_s / 1.2)
    assert got.wn_max_rad_s == pytest.approx(got.rungs[-1].wn_rad_s / math.sqrt(2.0))


def test_when_nothing_rings_the_ceiling_is_the_guard() -> None:
    joint = with_gains(shoulder(), DriveGains(800.0, 80.0), kp_max_nm_rad=3.6 * 25.0**2)  # guard wn = 25 rad/s
    step_tape, limits, _ = _setup(joint)
    got = run_sweep(joint.servo, joint.plant, joint.truth, limits, Goal(), 14.9, step_tape)
    assert all(r.stop is None for r in got.rungs)
    assert got.rule == "guard" and got.wn_max_rad_s == pytest.approx(25.0)
    assert got.rungs[-1].wn_rad_s == pytest.approx(25.0)
    assert any("another session" in note for note in got.notes)


def _pendulum(noise_rad: float, guard_wn_rad_s: float) -> DemoJoint:
    """config/models/pendulum.xml (J 0.325 kg m^2) at 250 Hz with poor gains kp 5, kd 0.2 (the demo's joint)."""
    env = Envelope(origin_rad=0.0, travel_rad=0.4, max_speed_rad_s=2.0, max_torque_nm=3.0)
    physics = {"pole.mass": 1.3, "hinge.damping": 0.08, "hinge.frictionloss": 0.05}
    truth = JointModel(1.3 * 0.25 + 1e-4, 0.08, 0.05, 1.3 * 9.81 * 0.5)
    servo = Servo("hinge", DriveGains(5.0, 0.2), 3.0, env, kp_max_nm_rad=truth.inertia_kg_m2 * guard_wn_rad_s**2)
    return DemoJoint(servo, SimPlant("pendulum", "hinge", env, 250.0, 3.0, physics, noise_rad, 0.0, 0), truth)


@pytest.mark.parametrize(
    "make, start_wn, headroom, rule, bracket",
    [
        # a fine encoder: nothing rings or chatters near the limits up to the guard
        (lambda: _pendulum(1e-6, 60.0), 8.0, 0.25, "guard", False),
        # the shoulder rings at half its threshold throughout: only a looser headroom skips
        (shoulder, 6.0, 0.9, "gain margin", False),
        # the rung above a skipped one stops (crosses the target 5 times): the skipped one is played, and is the
        # last quiet rung (the same three plays as one rung at a time)
        (shoulder, 14.9 * 1.2**6, 0.9, "gain margin", True),
    ],
)
def test_a_rung_far_under_the_limits_skips_the_next_and_the_sweep_ends_where_one_rung_at_a_time_ends(
    make, start_wn, headroom, rule, bracket
) -> None:
    runs = {}
    for h in (headroom, 0.0):
        joint = make()
        step_tape, limits, _ = _setup(joint)
        before = joint.plant.motion_s
        got = run_sweep(
            joint.servo, joint.plant, joint.truth, limits, Goal(sweep_stride_headroom=h), start_wn, step_tape
        )
        runs[h] = got, joint.plant.motion_s - before, limits
    (strided, strided_s, limits), (single, single_s, _) = runs[headroom], runs[0.0]
    assert strided.rule == single.rule == rule
    assert strided.wn_quiet_rad_s == pytest.approx(single.wn_quiet_rad_s)
    assert strided.wn_max_rad_s == pytest.approx(single.wn_max_rad_s)
    assert [r.stop for r in strided.rungs if r.stop] == [r.stop for r in single.rungs if r.stop]
    assert not any("skipped" in n or "not played" in n for n in single.notes)
    if bracket:
        assert len(strided.rungs) == len(single.rungs) and strided_s == pytest.approx(single_s)
        assert any("skipped, then played" in n for n in strided.notes)
    else:
        assert len(strided.rungs) < len(single.rungs) and strided_s < single_s
        assert any("not played" in n for n in strided.notes)
    ladder = [r.wn_rad_s for r in single.rungs]
    for a, b in zip(strided.rungs, strided.rungs[1:]):  # every rung on the ladder; a skip only above a quiet one
        assert any(b.wn_rad_s == pytest.approx(w) for w in ladder)
        if b.wn_rad_s > a.wn_rad_s * 1.2 * (1 + 1e-9):
            assert a.score.crossings <= 1 and a.score.ringing_mrad <= headroom * limits.ringing_mrad
            assert a.score.chatter_nm <= headroom * limits.chatter_nm


def test_when_the_rungs_run_out_below_the_guard_the_ceiling_is_the_last_rung_played() -> None:
    joint = _pendulum(1e-6, 1000.0)
    step_tape, limits, _ = _setup(joint)
    got = run_sweep(joint.servo, joint.plant, joint.truth, limits, Goal(max_rungs=5), 8.0, step_tape)
    assert all(r.stop is None for r in got.rungs) and got.rungs[-1].wn_rad_s < 100.0
    assert got.rule == "last rung" and got.wn_max_rad_s == pytest.approx(got.rungs[-1].wn_rad_s)


def test_a_repeated_chatter_only_stop_that_grows_like_noise_through_kd_keeps_the_quiet_rung() -> None:
    joint = shoulder(noise_rad=1e-4)  # 0.1 mrad encoder noise: kd x sqrt(2) sigma / dt reaches the limit first
    step_tape, limits, _ = _setup(joint)
    got = run_sweep(joint.servo, joint.plant, joint.truth, limits, Goal(), 14.9, step_tape)
    last = got.rungs[-1]
    assert last.stop is not None and last.stop.startswith("chatter only, repeated")
    assert last.score.ringing_mrad <= limits.ringing_mrad and last.score.crossings < 4
    chatter_ratio = last.score.chatter_nm / got.rungs[-2].score.chatter_nm
    assert chatter_ratio <= 2.0 * last.gains.kd / got.rungs[-2].gains.kd
    assert got.rule == "noise limit" and got.wn_max_rad_s == pytest.approx(got.rungs[-2].wn_rad_s)


def test_limits_follow_the_rules_from_the_as_found_run() -> None:
    quiet = Score(0.01, 0, 0.1, 0.0, 30.0, 30.0, 6, 0.02, None, True, 10.0)
    limits, _ = limits_from([quiet], Goal(), 150.0)
    assert limits.ringing_mrad == pytest.approx(max(3 * 0.02, 0.05, 1.5 * 0.01))
    assert limits.chatter_nm == pytest.approx(0.02 * 150.0)
    loud = replace(quiet, ringing_mrad=3.0, chatter_nm=5.0)
    limits, notes = limits_from([loud], Goal(), 150.0)
    assert limits.ringing_mrad == 2.0 and any("capped" in n for n in notes)
    assert limits.chatter_nm == pytest.approx(7.5)
    assert limits_from([loud], Goal(ringing_mrad=0.5), 150.0)[0].ringing_mrad == 0.5


def test_each_gate_rejects_a_candidate_built_to_fail_it() -> None:
    joint = shoulder()
    step_tape, limits, as_found = _setup(joint)
    play = lambda g: score([joint.plant.play(step_tape, Controller(g))])  # noqa: E731
    good_gains, _ = gains_for(25.0, 0.8, joint.truth, joint.servo)
    good = play(good_gains)
    assert gate_failures(good, as_found, limits, 25.0, 30.0) == ()
    # real plays built to fail: a 100 N m feed-forward offset on a 50 N m/rad loop pushes the joint 2 rad,
    # out of its travel (the plant's guard stops it); zeta 0.1 rings
    ringing_gains, _ = gains_for(40.0, 0.1, joint.truth, joint.servo)
    pushed = Controller(DriveGains(50.0, 20.0), JointModel(offset_nm=100.0))
    cases = {
        "aborted": score([joint.plant.play(step_tape, pushed)]),
        "ringing": play(ringing_gains),
    }
    # and scores edited to fail exactly one gate each
    cases.update(
        {
            "chatter": replace(good, chatter_nm=2 * limits.chatter_nm),
            "saturation": replace(good, saturation=0.05),
            "tracking": replace(good, tracking_rms_mrad=1.2 * as_found.tracking_rms_mrad),
            "stop p90": replace(good, stop_p90_mrad=1.2 * max(as_found.stop_p90_mrad, limits.stop_allocation_mrad)),
            "no stop": replace(good, stops=0),
            "not finite": replace(good, finite=False),
        }
    )
    for gate, candidate in cases.items():
        failures = gate_failures(candidate, as_found, limits, 25.0, 30.0)
        assert any(f.startswith(gate) or gate in f for f in failures), (gate, failures)
    above = gate_failures(good, as_found, limits, 31.0, 30.0)
    assert len(above) == 1 and "deploy ceiling" in above[0]
    # saturation up to 2 % (or 1.1x as found) passes
    assert gate_failures(replace(good, saturation=0.019), as_found, limits, 25.0, 30.0) == ()


def test_easing_stretches_the_step_tapes_moves_and_keeps_its_holds() -> None:
    joint = shoulder()
    raw = tapes.steps(joint.servo.envelopes(), 200.0)
    got = eased(raw, joint.truth, 150.0)
    t_raw, t_got = raw.curves[0].time_s, got.curves[0].time_s
    assert got.curves[0].position == raw.curves[0].position
    moves = holds = 0
    for k in range(len(t_raw) - 1):
        h_raw, h_got = t_raw[k + 1] - t_raw[k], t_got[k + 1] - t_got[k]
        if raw.curves[0].position[k] == raw.curves[0].position[k + 1] and raw.curves[0].velocity[k] == 0.0:
            assert h_got == pytest.approx(h_raw)  # the 0.8 s holds (and the lead) stay as they are
            holds += 1
        else:
            assert h_got > 1.5 * h_raw  # the sharp steps are slowed until the model follows on 80 % of the cap
            moves += 1
    assert holds >= 7 and moves >= 6
    s = tapes.sample(got, tapes.probe_times(got, 2e-3))
    torque = joint.truth.torque(s.position[:, 0], s.velocity[:, 0], s.acceleration[:, 0])
    assert float(abs(torque).max()) <= 0.8 * 150.0
