"""The gains journal: synced before sending, readable after a crash, exact previous values."""

from __future__ import annotations

import math

import pytest

from sysid_ros.core.errors import GainsError
from sysid_ros.core.gains import GainChange, GainsJournal


def change(**overrides) -> GainChange:
    fields = dict(
        change_id="c1",
        controller="sim_robot",
        previous={"gains.hinge.p": 20.0, "gains.hinge.d": 0.1},
        new={"gains.hinge.p": 35.5, "gains.hinge.d": 1.25},
    )
    fields.update(overrides)
    return GainChange(**fields)


def test_states_and_unfinished(tmp_path):
    journal = GainsJournal(tmp_path / "gains.jsonl")
    first = journal.record(change())
    assert [c.change_id for c in journal.unfinished()] == ["c1"]  # pending: not yet known to be sent
    journal.advance(first, "applied")
    journal.advance(first, "canary")
    assert journal.unfinished()[0].state == "canary"
    journal.advance(first, "kept")
    second = journal.record(
        change(
            change_id="c2",
            previous={"gains.hinge.p": 35.5, "gains.hinge.d": 1.25},
            new={"gains.hinge.p": 0.1 + 0.2, "gains.hinge.d": 1.0},
        )
    )
    journal.advance(second, "applied")
    [open_change] = GainsJournal(tmp_path / "gains.jsonl").unfinished()  # as a restarted process reads it
    assert open_change.change_id == "c2"
    assert open_change.previous == {"gains.hinge.p": 35.5, "gains.hinge.d": 1.25}
    assert open_change.new["gains.hinge.p"] == 0.1 + 0.2  # floats survive exactly (repr round trip)


def test_torn_last_line_is_skipped_but_damage_elsewhere_is_an_error(tmp_path):
    path = tmp_path / "gains.jsonl"
    journal = GainsJournal(path)
    journal.advance(journal.record(change()), "applied")
    with open(path, "a") as f:
        f.write('{"change_id": "c9", "contr')  # killed mid-write
    assert [c.change_id for c in journal.unfinished()] == ["c1"]
    path.write_text("garbage\n" + path.read_text())
    with pytest.raises(GainsError, match="line 1 is damaged"):
        journal.unfinished()


def test_bad_changes_refused():
    with pytest.raises(GainsError, match="not a number"):
        change(new={"gains.hinge.p": math.nan, "gains.hinge.d": 1.0})
    with pytest.raises(GainsError, match="same parameters"):
        change(new={"gains.hinge.p": 1.0})
