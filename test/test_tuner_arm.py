"""tune_arm's whole-arm check on arm3 (shoulder, elbow, wrist in a vertical plane, MuJoCo, 200 Hz, 5 ms
encoder delay, 0.02 mrad noise, mj_inverse feed-forward from the nominal model). Each joint's own tuning is
stood in for by a fixed controller so the test isolates the arm rules; the plays are real physics."""

from __future__ import annotations

import pytest

from sysid_ros.core.linear import JointModel
from sysid_ros.core.tapes import Envelope
from sysid_ros.core.tuner import (
    BOX_TERMS_WITH_ARM_MODEL,
    MAX_ROUNDS,
    ArmPlant,
    Controller,
    DriveGains,
    Goal,
    JointOutcome,
    Plant,
    Servo,
    SweepLimits,
    feedforward_from,
    gains_for,
    loop_of,
    tune_arm,
)

ENVELOPES = {
    "shoulder": Envelope(0.3, 0.3, 1.0, 60.0),
    "elbow": Envelope(0.4, 0.3, 1.0, 30.0),
    "wrist": Envelope(0.2, 0.3, 1.5, 10.0),
}
BOXES = {
    "shoulder": JointModel(0.9, 0.5, 0.3),
    "elbow": JointModel(0.3, 0.3, 0.2),
    "wrist": JointModel(0.05, 0.1, 0.05),
}
CEILING = 20.0


def _arm() -> tuple[ArmPlant, list[Servo]]:
    arm = ArmPlant("arm3", ("shoulder", "elbow", "wrist"), ENVELOPES, 200.0, noise_rad=2e-5, delay_s=0.005)
    servos = [
        Servo(j, DriveGains(*g), arm.caps[j], ENVELOPES[j], kp_max_nm_rad=1e4, kd_max_nm_s_rad=500.0)
        for j, g in zip(arm.joints, ((100.0, 10.0), (40.0, 4.0), (10.0, 0.5)))
    ]
    return arm, servos


def _stand_in(wn: dict[str, float], order: list[str], box_offset_nm: float = 0.0):
    def tune_joint(servo: Servo, plant: Plant, goal: Goal) -> JointOutcome:
        order.append(servo.name)
        model = BOXES[servo.name]
        assert plant.feedforward_terms == BOX_TERMS_WITH_ARM_MODEL  # the arm model carries gravity and inertia
        gains, _ = gains_for(wn[servo.name], 0.8, model, servo)
        ff = feedforward_from(model, 1.0, plant.feedforward_terms)
        if servo.name == "wrist" and box_offset_nm:
            ff = ff.replace_terms({"offset_nm": box_offset_nm})
        limits = SweepLimits(0.1, 0.02 * servo.torque_limit_nm, 1.0, servo.torque_limit_nm)
        return JointOutcome(servo, model, Controller(gains, ff, "stand-in"), CEILING, limits)

    return tune_joint


def test_joints_tune_tip_to_base_and_an_offender_backs_off_to_its_ceiling() -> None:
    arm, servos = _arm()
    order: list[str] = []
    result = tune_arm(
        servos, arm, Goal(), tune_joint=_stand_in({"shoulder": 15.0, "elbow": 15.0, "wrist": 30.0}, order)
    )
    assert order == ["wrist", "elbow", "shoulder"]
    assert arm.arm_feedforward is True  # an open chain with every joint driven: mj_inverse feed-forward on
    assert all(not why for why in result.as_found.offences.values())
    first = result.rounds[0]
    assert first.offenders == ("wrist",)
    assert "above its deploy ceiling" in first.offences["wrist"]
    # wn 30 x 0.8 = 24 is still above the 20 rad/s ceiling: never above it
    wrist = loop_of(result.delivered["wrist"].gains, BOXES["wrist"]).wn_rad_s
    assert wrist == pytest.approx(CEILING)
    assert not result.rounds[-1].offenders and result.improved
    for joint in ("shoulder", "elbow"):  # the joints that did not offend keep their new controllers
        assert result.delivered[joint] == first.controllers[joint]
        assert result.rounds[-1].costs[joint] < 0.9 * 2.0


def test_offenders_that_remain_leave_the_arm_as_found() -> None:
    arm, servos = _arm()
    # the wrist's box pushes a constant 2 N m: its stops are off by ~2 / kp whatever its bandwidth
    result = tune_arm(
        servos,
        arm,
        Goal(),
        tune_joint=_stand_in({"shoulder": 15.0, "elbow": 15.0, "wrist": 18.0}, [], box_offset_nm=2.0),
    )
    assert len(result.rounds) == MAX_ROUNDS + 1
    assert all("wrist" in r.offenders for r in result.rounds)
    wn = [loop_of(r.controllers["wrist"].gains, BOXES["wrist"]).wn_rad_s for r in result.rounds]
    assert all(b == pytest.approx(0.8 * a) for a, b in zip(wn, wn[1:]))
    assert not result.improved
    assert result.delivered == {s.name: s.as_found for s in servos}
    assert any("stays as found" in n for n in result.notes)


def test_when_an_offender_kept_its_own_controller_the_joints_that_changed_back_off_instead() -> None:
    arm, servos = _arm()
    base = _stand_in({"shoulder": 15.0, "elbow": 15.0, "wrist": 15.0}, [])

    def tune_joint(servo: Servo, plant: Plant, goal: Goal) -> JointOutcome:
        got = base(servo, plant, goal)
        if servo.name != "shoulder":
            return got
        # the shoulder keeps its as-found controller, and its chatter limit sits below the noise its own kd
        # carries (kd 10 x sqrt 3 x 0.02 mrad x 200 Hz ~ 0.07 N m): it offends in every round, whatever it plays
        limits = SweepLimits(got.limits.ringing_mrad, 1e-6, 1.0, servo.torque_limit_nm)
        return JointOutcome(servo, got.model, servo.as_found, CEILING, limits)

    result = tune_arm(servos, arm, Goal(), tune_joint=tune_joint)
    first = result.rounds[0]
    assert first.controllers["shoulder"] == servos[0].as_found
    assert "shoulder" in first.offenders and any("chatters" in w for w in first.offences["shoulder"])
    assert result.notes[0].endswith("backing off ['elbow', 'wrist']")
    assert len(result.rounds) == MAX_ROUNDS + 1  # the kept shoulder offends whatever the others do
    for before, after in zip(result.rounds, result.rounds[1:]):
        assert after.controllers["shoulder"] == servos[0].as_found  # the kept offender is never touched
        for joint in ("elbow", "wrist"):  # the changed joints back off wn x0.8 per round, zeta kept
            a, b = (loop_of(r.controllers[joint].gains, BOXES[joint]) for r in (before, after))
            assert b.wn_rad_s == pytest.approx(0.8 * a.wn_rad_s)
            assert b.zeta == pytest.approx(a.zeta)
            assert after.controllers[joint].feedforward == before.controllers[joint].feedforward
    # offenders remain: the delivered arm is a combination that was tried, the shoulder as found in it
    assert result.delivered in [r.controllers for r in result.rounds] + [{s.name: s.as_found for s in servos}]
    assert result.delivered["shoulder"] == servos[0].as_found
