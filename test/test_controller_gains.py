"""Changing a live controller's gains over its parameter services (sim_robot over DDS): all or nothing,
journaled first, undone exactly, recovered after a crash."""

from __future__ import annotations

import math

import pytest

from sysid_ros.core.errors import GainsError
from sysid_ros.core.gains import GainGuard, GainsJournal
from sysid_ros.ros.client import wait_for
from sysid_ros.ros.controller_gains import ControllerGains

pytestmark = pytest.mark.ros

START = {"gains.hinge.p": 20.0, "gains.hinge.d": 0.75, "gains.hinge.i": 0.0}
NAMES = list(START)


@pytest.fixture
def controller(nodes, client, tmp_path):
    nodes("sim_robot", "sim_robot", {"use_sim_time": True, "real_time_factor": 2.0, "gain_guard.p_max": 100.0, **START})
    wait_for(
        lambda: "set_parameters_atomically" in str(client.node.get_service_names_and_types()),
        what="sim_robot's parameter services",
    )
    return ControllerGains(
        client, "sim_robot", GainsJournal(tmp_path / "journal" / "gains.jsonl"), GainGuard(p_max=1000.0), timeout_s=20.0
    )  # generous: a loaded machine


def test_apply_keep_and_rollback_exactly(controller):
    new = {"gains.hinge.p": 42.123456789012345, "gains.hinge.d": 1.0 / 3.0, "gains.hinge.i": 0.5}
    change = controller.apply(new, "test")
    assert controller.read(NAMES) == new
    assert change.previous == START
    controller.rollback(change)
    assert controller.read(NAMES) == START  # bit for bit
    assert controller.journal.changes()[change.change_id].state == "rolled_back"
    kept = controller.apply(new)
    controller.keep(kept)
    assert controller.journal.unfinished() == [] and controller.read(NAMES) == new


def test_a_refused_gain_changes_nothing(controller):
    # Our guard allows p = 500; the controller's own guard (p_max 100) refuses it: the batch is atomic.
    with pytest.raises(GainsError, match="no gain changed: refused"):
        controller.apply({"gains.hinge.p": 500.0, "gains.hinge.d": 2.0, "gains.hinge.i": 1.0})
    assert controller.read(NAMES) == START
    [entry] = controller.journal.changes().values()
    assert entry.state == "failed" and "refused" in entry.reason


def test_gains_outside_our_guard_are_never_sent(controller):
    for bad in (math.inf, -1.0, 5000.0):
        with pytest.raises(GainsError, match="not sent"):
            controller.apply({"gains.hinge.p": bad, "gains.hinge.d": 1.0, "gains.hinge.i": 0.0})
    with pytest.raises(GainsError, match="not a gain parameter"):
        controller.apply({"physics.hinge.damping": 1.0})
    assert controller.read(NAMES) == START and controller.journal.changes() == {}


def test_missing_controller_and_missing_parameter(client, tmp_path, controller):
    gone = ControllerGains(client, "no_such_controller", GainsJournal(tmp_path / "other.jsonl"), timeout_s=1.0)
    with pytest.raises(GainsError, match="parameter service missing"):
        gone.apply({"gains.hinge.p": 30.0})
    with pytest.raises(GainsError, match=r"does not have all of the parameters \['gains.elbow.p'\]"):
        controller.apply({"gains.elbow.p": 30.0})
    assert controller.read(NAMES) == START


def test_recover_rolls_back_what_a_crash_left_applied(controller, client):
    change = controller.apply({"gains.hinge.p": 60.0, "gains.hinge.d": 2.5, "gains.hinge.i": 0.25})
    controller.journal.advance(change, "canary")  # ... and then the tuner was killed mid-canary
    restarted = ControllerGains(client, "sim_robot", GainsJournal(controller.journal.path), timeout_s=20.0)
    [recovered] = restarted.recover()
    assert recovered.change_id == change.change_id and recovered.state == "rolled_back"
    assert restarted.read(NAMES) == START
    assert restarted.recover() == []


def test_trial_gains_are_journaled_so_a_crash_mid_session_is_restored(controller, client):
    session = controller.begin_trials(NAMES, "tuning")
    controller.try_gains(session, {"gains.hinge.p": 33.0})
    controller.try_gains(session, {"gains.hinge.d": 1.5})
    latest = controller.journal.changes()[session.change_id]
    assert latest.state == "applied" and latest.new == {**START, "gains.hinge.p": 33.0, "gains.hinge.d": 1.5}
    with pytest.raises(GainsError, match="trial gains not set"):  # refused by the controller (p_max 100)
        controller.try_gains(session, {"gains.hinge.p": 500.0})
    assert controller.journal.changes()[session.change_id].new == latest.new  # still what the controller has
    # the tuner was killed: a new one reads the journal
    restarted = ControllerGains(client, "sim_robot", GainsJournal(controller.journal.path), timeout_s=20.0)
    [recovered] = restarted.recover()
    assert recovered.state == "rolled_back" and restarted.read(NAMES) == START


def test_a_shared_journal_recovers_only_this_controllers_changes(controller, client):
    """Entries are keyed by the controller's fully qualified name: another robot's unfinished change in the same
    journal is neither rolled back nor marked, and this controller's is."""
    from sysid_ros.core.gains import GainChange

    other = controller.journal.record(
        GainChange(
            "r2-change", "/r2/sim_robot", {"gains.hinge.p": 1.0}, {"gains.hinge.p": 2.0}, "applied", "r2's trial"
        )
    )
    mine = controller.apply({"gains.hinge.p": 61.0, "gains.hinge.d": 2.0, "gains.hinge.i": 0.0})
    assert mine.controller == "/sim_robot"
    restarted = ControllerGains(client, "sim_robot", GainsJournal(controller.journal.path), timeout_s=20.0)
    assert [c.change_id for c in restarted.recover()] == [mine.change_id]
    assert restarted.read(NAMES) == START
    assert restarted.journal.changes()[other.change_id] == other  # untouched
