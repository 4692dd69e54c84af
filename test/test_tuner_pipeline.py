"""tune() end to end on the SimPlant shoulder with poor factory gains and the analytic start as seed:
identify, limits, sweep, refine, verify on held-out tapes, and the proposal."""

from __future__ import annotations

import math

import pytest
import yaml

from support.tuner_joints import shoulder, with_gains
from sysid_ros.core.linear import JointModel
from sysid_ros.core.tuner import (
    Goal,
    TuneResult,
    analytic_start,
    gains_from_proposal,
    loop_of,
    proposal,
    to_yaml,
    tune,
    tuning_plan_seconds,
)

pytestmark = pytest.mark.slow  # whole-tape MuJoCo runs: tens of seconds of CPU

# the robot's description: nominal values 10-20 % off the hidden truth (J 3.6, b 2, tc 3, gs 47.1)
NOMINAL = JointModel(3.2, 1.6, 2.5, 42.0)


@pytest.fixture(scope="module")
def tuned() -> TuneResult:
    joint = shoulder()
    servo = with_gains(joint, joint.servo.gains, priors=NOMINAL, encoder_noise_rad=2e-5, delay_s=0.005).servo
    start = analytic_start(servo, joint.plant.command_rate_hz)
    return tune(servo, joint.plant, Goal(), seed=start.controller)


def test_the_analytic_start_sits_at_its_binding_bound_and_moves_nothing() -> None:
    joint = shoulder()
    servo = with_gains(joint, joint.servo.gains, priors=NOMINAL, encoder_noise_rad=2e-5, delay_s=0.005).servo
    start = analytic_start(servo, 200.0)
    assert joint.plant.motion_s == 0.0
    assert start.wn_rad_s == pytest.approx(min(start.bounds_rad_s.values()))
    assert set(start.bounds_rad_s) == {"kp guard", "kd guard", "command rate", "delay", "sensor noise"}
    assert start.bounds_rad_s["delay"] == pytest.approx(0.25 / 0.005)
    assert start.bounds_rad_s["command rate"] == pytest.approx(0.5 * 200.0)
    assert start.controller.gains.kp == pytest.approx(NOMINAL.inertia_kg_m2 * start.wn_rad_s**2)


def test_poor_factory_gains_are_improved_on_held_out_tapes(tuned: TuneResult) -> None:
    assert tuned.improved
    before, after = tuned.verify.entries[0], tuned.verify.chosen
    assert before.role == "as found" and after.role in ("pick", "analytic start")
    assert after.passes and after.cost <= 0.9 * before.cost
    # factory kp 800 sags ~30 mrad under 47 N m of gravity; the tuned loop with feed-forward stops within 2 mrad
    assert before.score.stop_p90_mrad > 10.0 and after.score.stop_p90_mrad < 2.0
    assert after.score.tracking_rms_mrad < 0.1 * before.score.tracking_rms_mrad
    assert loop_of(tuned.deployed.gains, tuned.identification.model).wn_rad_s <= tuned.sweep.wn_max_rad_s * (1 + 1e-9)
    roles = [e.role for e in tuned.verify.entries]
    assert roles == ["as found", "pick", "analytic start"]


def test_the_seed_starts_the_sweep_and_joins_the_search(tuned: TuneResult) -> None:
    seed_wn = loop_of(
        tuned.servo.seed.gains if tuned.servo.seed else tuned.verify.entries[2].controller.gains,
        tuned.identification.model,
    ).wn_rad_s
    first = tuned.sweep.rungs[0]
    assert first.wn_rad_s == pytest.approx(
        min(seed_wn, tuned.servo.wn_ceiling_rad_s(tuned.identification.model.inertia_kg_m2))
    )
    labels = [c.controller.label for c in tuned.refine.candidates]
    assert "pass 1: seed" in labels and any(label.startswith("pass 1: seed gains") for label in labels)
    # the ceiling binds the seed too: any seed candidate above it failed that gate
    for cand in tuned.refine.candidates:
        if cand.wn_rad_s > tuned.sweep.wn_max_rad_s * (1 + 1e-9):
            assert any("deploy ceiling" in f for f in cand.failures)


def test_refine_keeps_feedback_alone_unless_feedforward_wins_by_ten_percent(tuned: TuneResult) -> None:
    pick = tuned.refine.pick
    assert pick is not None and pick.cost <= 0.9 * 2.0
    same_gains = [c for c in tuned.refine.candidates if c.controller.gains == pick.controller.gains and c.admissible]
    feedback = [c for c in same_gains if c.controller.feedforward is None]
    if pick.controller.feedforward is not None and feedback:
        assert pick.cost <= 0.9 * min(c.cost for c in feedback)


def test_the_proposal_is_yaml_a_person_can_read_and_the_gains_read_back(tuned: TuneResult) -> None:
    text = to_yaml(tuned)
    data = yaml.safe_load(text)
    assert data == proposal(tuned)
    joint, gains, feedforward = gains_from_proposal(data)
    assert joint == "shoulder" and gains == tuned.deployed.gains
    assert data["proposed"]["drive_parameters"]["gains.shoulder.p"] == pytest.approx(tuned.deployed.gains.kp)
    assert data["summary"].startswith("shoulder: change; held-out cost 2.000 ->")
    assert len(data["rungs"]) == len(tuned.sweep.rungs) and len(data["candidates"]) == len(tuned.refine.candidates)
    assert data["model"]["source"] == "fit" and data["deploy_ceiling"]["rule"] == "gain margin"
    if feedforward is not None:
        assert feedforward["gravity_sin_nm"] == pytest.approx(47.1, rel=0.02)


def test_the_plan_bounds_the_motion_each_stage_played(tuned: TuneResult) -> None:
    plan = tuning_plan_seconds(tuned.servo, 200.0, Goal(), tuned.verify.entries[2].controller)
    # identify's plan is its worst case: the designed tape's plays, then the generic tapes a joint falls back to;
    # the shoulder keeps the designed tape (13.5 s of the plan's 103 s)
    assert not any("generic tapes are played" in note for note in tuned.identification.notes)
    assert tuned.seconds["identify"] <= 0.2 * plan["identify"]
    assert all(math.isfinite(v) and v > 0 for v in plan.values())
    assert tuned.seconds["verify"] <= plan["verify"] * 1.5  # verify tapes are eased (stretched) to the model
