"""The online estimator on the embedded pendulum in SimRobot, whose pole mass changes mid-run.

The pendulum (1.3 kg at 0.5 m, damping 0.08, friction loss 0.05, armature 1e-4, motor capped at 3 N m)
tracks a five-sine reference (0.2-1.5 Hz, about 0.3 rad peak) with a PD drive; SimRobot reports the angle
with 0.5 mrad of noise and the applied torque with 0.01 N m. The mass goes 1.3 -> 1.8 -> 1.1 kg at 15 s
and 30 s. The estimator gets the samples in 0.1 s chunks, as a node batching joint_states would."""

from __future__ import annotations

import numpy as np
import pytest

from support.online_pendulum import (
    CHANGES,
    S,
    config,
    run,
    settle_time_s,
    tracking_record,
    two_changes,
)
from sysid_ros.core.errors import ConfigError, DataError
from sysid_ros.core.online import (
    DISCARDED,
    ChangeDetected,
    Estimate,
    ExcitationRecovered,
    ExcitationRequest,
    OnlineConfig,
    OnlineEstimator,
    ParameterChange,
    joint_window_model,
    pendulum_config,
    pendulum_window_model,
)
from sysid_ros.core.signals import JointSamples
from sysid_ros.core.sim import FeedbackNoise, SimRobot


def test_two_mass_changes_are_detected_and_followed() -> None:
    samples = two_changes()
    est = OnlineEstimator(config())
    events, times, values = run(est, samples)
    detected = [e for e in events if isinstance(e, ChangeDetected)]
    changes = [e for e in events if isinstance(e, ParameterChange)]
    # one detection and one settled change per change, on the mass; damping and friction did not change
    assert [e.parameters for e in detected] == [("mass_kg",), ("mass_kg",)]
    assert [e.parameter for e in changes] == ["mass_kg", "mass_kg"]
    assert not any(isinstance(e, ExcitationRequest) for e in events)
    mass = values[:, 0]
    start, bounds = 5.0, []
    for (change_s, new_mass), alarm, change in zip(CHANGES, detected, changes):
        delay = alarm.time_ns / S - change_s
        # a window mixing both masses fits neither and scores low (or its halves disagree), so the change
        # shows once the 2 s window is mostly past it, confirmed by a second 0.25 s hop: measured 2.0 s and
        # 2.25 s (1.75-2.25 s over seeds 0-3); 3 s leaves two hops
        assert 0 < delay <= 3.0, delay
        assert alarm.values[0] == pytest.approx(new_mass, rel=0.03)
        # the settled change is reported one window (2 s) after the alarm, from the pre-change estimate
        assert change.time_ns - alarm.time_ns == pytest.approx(2.25 * S, abs=0.26 * S)
        assert change.previous == pytest.approx(CHANGES[0][1] if change_s == 30.0 else 1.3, rel=0.015)
        assert change.value == pytest.approx(new_mass, rel=0.015)
        # within 2 % for good: measured 2.1 s and 2.3 s (up to 3.8 s over seeds 0-3: settling replaces the
        # value with each fresh window until the window is clear of the change)
        to_2pct = settle_time_s(times, mass, new_mass, change_s, change_s + 15.0)
        assert to_2pct <= 4.0, to_2pct
        bounds.append((start, change_s))
        start = change_s + 5.0
    bounds.append((start, 45.0))
    # after convergence (5 s after each change): windows pin the mass to 0.4-0.8 % (HAC standard error)
    # and the blend averages ~10 of them; the Savitzky-Golay filter adds its own +0.5 % at most (see
    # test_regression). Measured worst 0.8 % (1.4 % over seeds 0-3); 1.5 % leaves the noise its room.
    for (a, b), truth in zip(bounds, (1.3, 1.8, 1.1)):
        sel = (times > a) & (times <= b)
        assert np.max(np.abs(mass[sel] / truth - 1)) < 0.015, (a, b)
    final = est.estimate
    assert final.value("mass_kg") == pytest.approx(1.1, rel=0.01)
    # damping 0.08 and friction 0.05 stay in the tens of percent a few seconds of this motion allow
    assert final.value("damping_nm_s_rad") == pytest.approx(0.08, abs=0.03)
    assert final.value("friction_nm") == pytest.approx(0.05, abs=0.03)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_other_references_and_noise_draws(seed: int) -> None:
    """The same changes under other five-sine references and noise: the bounds above, looser on time to 2 %."""
    samples = tracking_record(45.0, tuple((t, "pole.mass", m) for t, m in CHANGES), seed=seed)
    events, times, values = run(OnlineEstimator(config()), samples)
    detected = [e for e in events if isinstance(e, ChangeDetected)]
    assert [e.parameters for e in detected] == [("mass_kg",), ("mass_kg",)]
    assert [e.parameter for e in events if isinstance(e, ParameterChange)] == ["mass_kg", "mass_kg"]
    for (change_s, new_mass), alarm in zip(CHANGES, detected):
        assert 0 < alarm.time_ns / S - change_s <= 3.0
        # measured 1.8-3.8 s: seed 3's motion excites the 1.1 kg mass weakly (confidence < 0.5 for seconds)
        assert settle_time_s(times, values[:, 0], new_mass, change_s, change_s + 15.0) <= 5.0
    for a, b, truth in ((5.0, 15.0, 1.3), (20.0, 30.0, 1.8), (35.0, 45.0, 1.1)):
        sel = (times > a) & (times <= b)
        assert np.max(np.abs(values[sel, 0] / truth - 1)) < 0.015, (a, b)


def test_holding_still_keeps_the_estimate_and_asks_for_excitation() -> None:
    samples = tracking_record(30.0, hold_from_s=8.0, resume_at_s=22.0, seed=1)
    cfg = config(request_after_s=4.0)
    est = OnlineEstimator(cfg)
    events, times, values = run(est, samples)
    held = values[(times >= 10.0) & (times < 22.0)]  # windows from 10 s hold no motion
    assert np.all(held == held[0]), "the estimate moved while nothing was excited"
    assert held[0][0] == pytest.approx(1.3, rel=0.02)
    assert not any(isinstance(e, (ParameterChange, ChangeDetected)) for e in events)
    requests = [e for e in events if isinstance(e, ExcitationRequest)]
    assert len(requests) == 1 and requests[0].parameters == ("mass_kg",)
    # the first still window ends ~8.1 s (partly still windows may still be confident); the request comes
    # after 16 low windows (4 s at 0.25 s hops), so between 12 s and 8 + 2 + 4 + 0.25 s
    assert 12.0 <= requests[0].time_ns / S <= 14.25 + 1e-9
    assert requests[0].low_for_s == pytest.approx(4.0)
    recovered = [e for e in events if isinstance(e, ExcitationRecovered)]
    assert len(recovered) == 1 and 22.0 < recovered[0].time_ns / S <= 25.0
    still = OnlineEstimator(cfg)
    run(still, samples.slice(0, int(20.0 * 500)))
    assert still.estimate.confidence == (0.0, 0.0, 0.0) and still.estimate.excitation_requested
    assert still.last_window is not None and still.last_window.decisions == (DISCARDED,) * 3
    assert "rows move faster" in still.last_window.note


def test_chunk_size_does_not_change_the_result_and_memory_is_bounded() -> None:
    samples = two_changes().slice(0, 3500)  # 7 s
    one = OnlineEstimator(config())
    big = OnlineEstimator(config())
    ev_one, _, _ = run(one, samples, chunk=1)
    ev_big, _, _ = run(big, samples, chunk=1000)
    assert ev_one == ev_big
    assert one.estimate == big.estimate and one.windows_fitted == big.windows_fitted == 20  # at 2.0, 2.25, ..., 6.75 s
    assert len(one._t) <= 1000 and len(big._t) <= 1000  # one 2 s window at 500 Hz


def test_estimate_is_frozen_and_laid_out_for_ros() -> None:
    est = OnlineEstimator(config(initial={"mass_kg": 1.3}))
    snap = est.estimate
    assert isinstance(snap, Estimate) and snap.value("mass_kg") == 1.3 and np.isnan(snap.value("friction_nm"))
    with pytest.raises(AttributeError):
        snap.values = (0.0,)  # type: ignore[misc]
    keys = dict(snap.as_key_values())
    assert keys["joint"] == "hinge" and keys["mass_kg.value"] == "1.3" and keys["excitation_requested"] == "false"
    arr = snap.as_array()
    assert arr.shape == (9,) and arr[0] == 1.3 and arr[6] == 1.0  # [values, confidence, weight] x 3


def test_gaps_and_bad_input() -> None:
    samples = two_changes().slice(0, 2500)
    est = OnlineEstimator(config())
    est.update(samples.slice(0, 1500))
    assert est.last_window is not None and np.isfinite(est.last_window.values[0])
    est.update(samples.slice(1600, 2000))  # 0.2 s of data lost: the window restarts after the gap
    assert est.last_window.decisions == (DISCARDED,) * 3 and "contiguous" in est.last_window.note
    with pytest.raises(DataError, match="increase") as info:
        est.update(samples.slice(1900, 1950))
    assert info.value.where["joint"] == "hinge"
    no_effort = JointSamples(("hinge",), samples.time_ns[2000:2010] + 10 * S, samples.position[2000:2010])
    with pytest.raises(DataError, match="effort"):
        est.update(no_effort)
    with pytest.raises(ConfigError, match="request_for"):
        OnlineConfig("hinge", pendulum_window_model(0.5), request_for=("payload",))
    with pytest.raises(ConfigError, match="precision"):
        OnlineConfig("hinge", pendulum_window_model(0.5), precision={"mass_kg": -1.0})
    with pytest.raises(ConfigError, match="hop_s"):
        OnlineConfig("hinge", hop_s=3.0)
    with pytest.raises(ConfigError):
        joint_window_model(("inertia_kg_m2", "stiction"))


def test_a_joint_model_follows_a_damping_change() -> None:
    """Seed 004's joint model (inertia, viscous, Coulomb, gravity) on the same pendulum; damping 0.08 -> 0.4."""
    samples = tracking_record(30.0, ((12.0, "hinge.damping", 0.4),), seed=2)
    terms = ("inertia_kg_m2", "viscous_nm_s_rad", "coulomb_nm", "gravity_sin_nm")
    cfg = OnlineConfig(
        "hinge",
        joint_window_model(terms, {"viscous_nm_s_rad": 0.05, "coulomb_nm": 0.05}),
        precision={"viscous_nm_s_rad": 0.2, "coulomb_nm": 0.25},
        change_threshold={"viscous_nm_s_rad": 0.5, "coulomb_nm": 0.5},
        request_for=("inertia_kg_m2",),
    )
    est = OnlineEstimator(cfg)
    events, times, values = run(est, samples)
    before = values[(times > 8.0) & (times <= 12.0)]
    # J = m L^2 + armature = 0.3251 kg m^2, gravity m g L = 6.3765 N m: held to 2 % like the mass above
    assert np.all(np.abs(before[:, 0] / (1.3 * 0.25 + 1e-4) - 1) < 0.02)
    assert np.all(np.abs(before[:, 3] / (1.3 * 9.81 * 0.5) - 1) < 0.02)
    assert np.all(np.abs(before[:, 1] - 0.08) < 0.03)
    # mixed windows (11-14 s) blame the Coulomb column for a while: that raises the alarm at 13.0 s, but once
    # the window has passed the change only the damping differs from before, which is what is reported
    alarms = [e for e in events if isinstance(e, ChangeDetected)]
    changes = [e for e in events if isinstance(e, ParameterChange)]
    assert len(alarms) == 1 and 12.0 < alarms[0].time_ns / S <= 14.0
    assert [e.parameter for e in changes] == ["viscous_nm_s_rad"]
    assert changes[0].previous == pytest.approx(0.08, abs=0.03) and changes[0].value == pytest.approx(0.4, rel=0.1)
    assert not any(isinstance(e, ExcitationRequest) for e in events)
    assert est.estimate.value("viscous_nm_s_rad") == pytest.approx(0.4, rel=0.1)
    assert est.estimate.value("inertia_kg_m2") == pytest.approx(1.3 * 0.25 + 1e-4, rel=0.02)


def test_free_motion_is_not_a_change_to_zero():
    """A pendulum swinging freely after a torque tape (no torque applied) fits every parameter at zero:
    such windows are discarded, so the end of each tape raises no false change."""
    import numpy as np

    from sysid_ros.core.online import OnlineEstimator
    from sysid_ros.core.signals import JointSamples

    for effort_noise_nm in (0.01, 0.0):  # a torque sensor's noise (the free-motion rule); none (the input guard)
        robot = SimRobot(
            "pendulum",
            noise=FeedbackNoise(position_rad=5e-4, effort_nm=effort_noise_nm),
            initial_positions=[0.6],
            physics={"pole.mass": 1.3, "hinge.damping": 0.02, "hinge.frictionloss": 0.0},
        )
        robot.command("effort", [0.0])
        estimator = OnlineEstimator(pendulum_config("hinge", 0.5, 1e-4, initial={"mass_kg": 1.3}))
        events = []
        for _ in range(40):  # 10 s of free swinging, fast all along
            fb = robot.advance(robot.time_ns + 250_000_000)
            events += estimator.update(
                JointSamples(
                    ("hinge",),
                    np.array([f.time_ns for f in fb]),
                    np.array([f.position for f in fb]),
                    None,
                    np.array([f.effort for f in fb]),
                )
            )
        assert not [e for e in events if type(e).__name__ in ("ChangeDetected", "ParameterChange")]
        assert estimator.estimate.value("mass_kg") == 1.3
        if effort_noise_nm:
            assert "free motion" in estimator.last_window.note
        else:  # an effort of exactly 0 all along is also what a drive reporting nothing sends: paused
            assert [e.kind for e in events if type(e).__name__ == "InputPaused"] == ["stale_effort"]
            assert estimator.paused is not None
