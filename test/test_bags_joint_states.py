"""JointState oddities of real bags: joint order, partial fields, empty names, several topics, clock
offsets, duplicate and backwards stamps, gaps. Each gives the right arrays or an error naming the fault."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.bags import JS, T0_NS, joint_state, sine_states, write_bag
from sysid_ros.core.bags import read_joint_states
from sysid_ros.core.errors import DataError

STORAGES = ("mcap", "sqlite3")
MS = 1_000_000


@pytest.mark.parametrize("storage", STORAGES)
def test_joint_order_differs_between_messages_and_from_request(tmp_path, storage):
    perms = [[0, 1, 2], [2, 0, 1], [1, 2, 0], [2, 1, 0]]
    msgs, truth = sine_states(seconds=0.5, order=lambda i: perms[i % 4])
    bag = write_bag(tmp_path / "bag", msgs, storage)
    s = read_joint_states(bag, joints=["j3", "j1", "j2"]).samples
    assert s.joint_names == ("j3", "j1", "j2")
    np.testing.assert_array_equal(s.position, truth["position"][:, [2, 0, 1]])
    np.testing.assert_array_equal(s.effort, truth["effort"][:, [2, 0, 1]])


@pytest.mark.parametrize("storage", STORAGES)
def test_partial_fields(tmp_path, storage):
    """Velocity only in even messages, effort never: velocity NaN where absent, effort None."""
    names = ["a", "b"]
    msgs = []
    for i in range(40):
        t = T0_NS + i * 5 * MS
        vel = [i * 1.0, -i * 1.0] if i % 2 == 0 else []
        msgs.append(("/joint_states", JS, t, joint_state(t, names, [i * 0.01, i * 0.02], vel, [])))
    s = read_joint_states(write_bag(tmp_path / "bag", msgs, storage)).samples
    assert s.effort is None
    np.testing.assert_array_equal(s.position[:, 1], np.arange(40) * 0.02)
    assert np.all(np.isnan(s.velocity[1::2]))
    np.testing.assert_array_equal(s.velocity[0::2, 0], np.arange(0, 40, 2) * 1.0)


@pytest.mark.parametrize("storage", STORAGES)
def test_empty_name_arrays(tmp_path, storage, caplog):
    msgs = [
        ("/joint_states", JS, T0_NS + i * 5 * MS, joint_state(T0_NS + i * 5 * MS, [], [i, 10 + i], [], []))
        for i in range(20)
    ]
    bag = write_bag(tmp_path / "bag", msgs, storage)
    with pytest.raises(DataError, match="empty name array.*topic=/joint_states"):
        read_joint_states(bag)
    with caplog.at_level(logging.WARNING):
        read = read_joint_states(bag, joint_order=["x", "y"])
    assert any("without names" in r.message for r in caplog.records)
    assert any("without names" in w for w in read.warnings)
    np.testing.assert_array_equal(read.samples.position, np.stack([np.arange(20), 10 + np.arange(20)], 1))


@pytest.mark.parametrize("storage", STORAGES)
def test_several_topics_merge_by_joint(tmp_path, storage):
    """An arm at 200 Hz and a gripper at 50 Hz on the same clock: rows at the union of stamps."""
    msgs = []
    for i in range(100):
        t = T0_NS + i * 5 * MS
        msgs.append(("/arm/joint_states", JS, t + 100_000, joint_state(t, ["a1", "a2"], [i, -i])))
        if i % 4 == 0:
            msgs.append(("/gripper/joint_states", JS, t + 200_000, joint_state(t + 2 * MS, ["g"], [i * 0.5])))
    msgs.sort(key=lambda m: m[2])
    read = read_joint_states(write_bag(tmp_path / "bag", msgs, storage), joints=["g", "a1", "a2"])
    s = read.samples
    assert read.topics == ("/arm/joint_states", "/gripper/joint_states")
    arm_rows = np.isfinite(s.position[:, 1])
    grip_rows = np.isfinite(s.position[:, 0])
    assert not np.any(arm_rows & grip_rows)  # stamps differ by 2 ms: never merged wrongly
    np.testing.assert_array_equal((s.time_ns[grip_rows] - T0_NS - 2 * MS) // (5 * MS) * 0.5, s.position[grip_rows, 0])
    np.testing.assert_array_equal((s.time_ns[arm_rows] - T0_NS) // (5 * MS), s.position[arm_rows, 1])
    assert s.time_ns[0] >= T0_NS + 2 * MS  # trimmed to where both topics have data


@pytest.mark.parametrize("storage", STORAGES)
def test_same_stamp_on_two_topics_merges_into_one_row(tmp_path, storage):
    msgs = []
    for i in range(50):
        t = T0_NS + i * 4 * MS
        msgs.append(("/a", JS, t + 10, joint_state(t, ["a"], [i])))
        msgs.append(("/b", JS, t + 20, joint_state(t, ["b"], [-i])))
    s = read_joint_states(write_bag(tmp_path / "bag", msgs, storage)).samples
    assert len(s) == 50
    np.testing.assert_array_equal(s.position, np.stack([np.arange(50), -np.arange(50)], 1))


@pytest.mark.parametrize("storage", STORAGES)
def test_clock_offset_detected_and_reported(tmp_path, storage):
    """Header stamps 3 minutes ahead of the recorder's clock: header times are used and the offset is reported."""
    offset = 180 * 1_000_000_000 + 123
    msgs, truth = sine_states(seconds=0.5, header_offset_ns=offset)
    bag = write_bag(tmp_path / "bag", msgs, storage)
    read = read_joint_states(bag)
    assert read.timing.time_base.source == "header"
    assert read.timing.time_base.header_minus_record_ns == offset
    assert read.timing.clock_offset_s == pytest.approx(180.0, abs=1e-6)
    assert any("clock offset" in w for w in read.warnings)
    np.testing.assert_array_equal(read.samples.time_ns, truth["time_ns"])
    rec = read_joint_states(bag, time_source="record")
    np.testing.assert_array_equal(rec.samples.time_ns, truth["record_ns"])
    np.testing.assert_array_equal(rec.samples.position, truth["position"])


@pytest.mark.parametrize("storage", STORAGES)
def test_zero_header_stamps_fall_back_to_record_times(tmp_path, storage):
    msgs = [("/js", JS, T0_NS + i * 5 * MS, joint_state(0, ["a"], [i])) for i in range(20)]
    bag = write_bag(tmp_path / "bag", msgs, storage)
    read = read_joint_states(bag)
    assert read.timing.time_base.source == "record"
    np.testing.assert_array_equal(read.samples.time_ns, T0_NS + np.arange(20) * 5 * MS)
    with pytest.raises(DataError, match="without header stamp.*topic=/js"):
        read_joint_states(bag, time_source="header")


@pytest.mark.parametrize("storage", STORAGES)
def test_duplicate_and_reordered_stamps(tmp_path, storage):
    msgs, truth = sine_states(seconds=0.5)
    # Repeat message 10 (same stamp, same data) and message 20 with different data; swap 30/31 in arrival.
    dup_same = msgs[10]
    topic, mt, rec, m20 = msgs[20]
    dup_diff = (
        topic,
        mt,
        rec + 1,
        joint_state(T0_NS + 20 * 5 * MS, ["j1", "j2", "j3"], [9, 9, 9], [0, 0, 0], [0, 0, 0]),
    )
    swapped = list(msgs)
    swapped[30], swapped[31] = (msgs[31][0], JS, msgs[30][2], msgs[31][3]), (msgs[30][0], JS, msgs[31][2], msgs[30][3])
    bag = write_bag(tmp_path / "bag", swapped[:11] + [dup_same] + swapped[11:21] + [dup_diff] + swapped[21:], storage)
    read = read_joint_states(bag)
    assert read.timing.duplicates_dropped == 2
    assert read.timing.conflicting_duplicates == 9  # 3 joints x 3 fields disagree at message 20
    assert read.timing.reordered == 1
    np.testing.assert_array_equal(read.samples.time_ns, truth["time_ns"])
    np.testing.assert_array_equal(read.samples.position, truth["position"])  # first received kept


@pytest.mark.parametrize("storage", STORAGES)
def test_clock_jumping_back(tmp_path, storage):
    """Header clock reset by 5 s mid-bag: auto reads on record times; header on request fails naming where."""
    msgs = []
    for i in range(60):
        t = T0_NS + i * 5 * MS
        stamp = t - (5_000_000_000 if i >= 30 else 0)
        msgs.append(("/js", JS, t, joint_state(stamp, ["a"], [i])))
    bag = write_bag(tmp_path / "bag", msgs, storage)
    read = read_joint_states(bag)
    assert read.timing.time_base.source == "record"
    assert any("jump back" in w for w in read.warnings)
    np.testing.assert_array_equal(read.samples.position[:, 0], np.arange(60))
    with pytest.raises(DataError, match=f"jump back by 4.995 s.*topic=/js.*record_ns={T0_NS + 30 * 5 * MS}"):
        read_joint_states(bag, time_source="header")


@pytest.mark.parametrize("storage", STORAGES)
def test_gap_splits_or_fails_with_where(tmp_path, storage):
    msgs, truth = sine_states(seconds=1.0)  # 200 Hz
    keep = [m for i, m in enumerate(msgs) if not 80 <= i < 120]  # 0.2 s hole after sample 79
    bag = write_bag(tmp_path / "bag", keep, storage)
    read = read_joint_states(bag)
    assert len(read.segments) == 2
    (gap,) = read.timing.gaps
    assert (gap.start_ns, gap.end_ns) == (int(truth["time_ns"][79]), int(truth["time_ns"][120]))
    np.testing.assert_array_equal(read.segments[0].position, truth["position"][:80])
    np.testing.assert_array_equal(read.segments[1].position, truth["position"][120:])
    with pytest.raises(DataError, match="2 segments at gaps"):
        _ = read.samples
    with pytest.raises(DataError, match=r"gap of 0.205 s.*topic=/joint_states, time_s=0.395"):
        read_joint_states(bag, on_gap="raise")
    assert len(read_joint_states(bag, max_gap_s=0.5).segments) == 1


names_strategy = st.lists(
    st.permutations(["j1", "j2", "j3", "j4"]).map(lambda p: p[: 2 + len(p) % 3]), min_size=5, max_size=12
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(orders=names_strategy, with_vel=st.lists(st.booleans(), min_size=13, max_size=13))
def test_property_any_order_any_subset_is_exact(tmp_path_factory, orders, with_vel):
    """Whatever names each message carries (any order, any subset), every value lands in its joint's column."""
    value = lambda i, j: 100.0 * i + int(j[1])  # noqa: E731  (a value that encodes message and joint)
    orders = [["j1", "j2", "j3", "j4"]] + orders  # every joint appears at least once
    with_vel = [True] + with_vel
    msgs = []
    for i, names in enumerate(orders):
        t = T0_NS + i * 3 * MS
        msgs.append(
            (
                "/js",
                JS,
                t,
                joint_state(
                    t, names, [value(i, j) for j in names], [-value(i, j) for j in names] if with_vel[i] else []
                ),
            )
        )
    bag = write_bag(tmp_path_factory.mktemp("prop") / "bag", msgs, "mcap")
    s = read_joint_states(bag, joints=["j4", "j3", "j2", "j1"], max_gap_s=1.0).samples
    for i, names in enumerate(orders):
        for k, j in enumerate(s.joint_names):
            expected = value(i, j) if j in names else np.nan
            np.testing.assert_equal(s.position[i, k], expected)
            np.testing.assert_equal(
                s.velocity[i, k] if s.velocity is not None else np.nan, -expected if with_vel[i] else np.nan
            )


@pytest.mark.parametrize("storage", STORAGES)
def test_joint_on_two_topics_is_refused_not_interleaved(tmp_path, storage):
    """Two sources of the same joint (e.g. a broadcaster and a delayed republisher) would interleave."""
    msgs = []
    for i in range(50):
        t = T0_NS + i * 4 * MS
        msgs.append(("/joint_states", JS, t, joint_state(t, ["a", "b"], [i, i])))
        msgs.append(("/relay/joint_states", JS, t + 1000, joint_state(t + 3 * MS, ["b"], [-i])))
    bag = write_bag(tmp_path / "bag", msgs, storage)
    with pytest.raises(DataError, match="joint is published on both /joint_states and /relay/joint_states.*joint=b"):
        read_joint_states(bag)
    s = read_joint_states(bag, topics=["/joint_states"]).samples
    np.testing.assert_array_equal(s.position[:, 1], np.arange(50))
    only_a = read_joint_states(bag, joints=["a"])  # b not asked for: no conflict, and no empty rows from /relay
    assert only_a.topics == ("/joint_states",)
    np.testing.assert_array_equal(only_a.samples.position[:, 0], np.arange(50))


@pytest.mark.parametrize("storage", STORAGES)
def test_messages_without_values_are_not_samples(tmp_path, storage):
    msgs = []
    for i in range(30):
        t = T0_NS + i * 5 * MS
        empty = i % 3 == 1
        msgs.append(("/js", JS, t, joint_state(t, ["a"], [] if empty else [float(i)])))
    s = read_joint_states(write_bag(tmp_path / "bag", msgs, storage)).samples
    kept = [i for i in range(30) if i % 3 != 1]
    np.testing.assert_array_equal(s.position[:, 0], kept)
    np.testing.assert_array_equal(s.time_ns, T0_NS + np.array(kept) * 5 * MS)
