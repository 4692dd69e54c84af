"""Joint-state feedback as the nodes read it: QoS matched to the publishers, each message bounded, names decoded once.

A JointState is decoded from its CDR bytes (raw subscriptions: no Python message per sample). What a message may
make a node allocate is bounded: one larger than `MAX_MESSAGE_BYTES` (10^6 joint names is ~20 MB) is dropped
undecoded, and at most `MAX_NAME_LISTS` distinct name lists are remembered (a robot has one or two).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState

from ..core.bags import decode_cdr, names_from_key
from .common import RELIABILITY, publishers_reliability, sensor_qos

MAX_MESSAGE_BYTES = 1 << 20  # a JointState of 1000 joints is ~50 kB
MAX_NAME_LISTS = 16

Sample = tuple[int, list[str], np.ndarray, np.ndarray, np.ndarray]  # stamp (ns), names, position, velocity, effort


class FeedbackDecoder:
    """JointState CDR bytes to a `Sample`; None (and `dropped` counts it) for a message over the size bound."""

    def __init__(self) -> None:
        self._names: dict[object, list[str]] = {}  # joint names by the CDR bytes that encode them
        self.dropped = 0

    def decode(self, data: bytes) -> Sample | None:
        if len(data) > MAX_MESSAGE_BYTES:
            self.dropped += 1
            return None
        try:
            stamp, key, position, velocity, effort = decode_cdr(data)
            names = self._names.get(key)
            if names is None:
                if len(self._names) >= MAX_NAME_LISTS:
                    self._names.clear()
                names = self._names.setdefault(key, names_from_key(key))
        except (ValueError, IndexError):  # not what the fast decoder reads (big-endian): rclpy's
            msg = deserialize_message(data, JointState)
            stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            names, position, velocity, effort = (
                list(msg.name),
                np.asarray(msg.position),
                np.asarray(msg.velocity),
                np.asarray(msg.effort),
            )
        return stamp, names, position, velocity, effort

    def dropped_message(self) -> str:
        return (
            f"dropped {self.dropped} joint state message(s) over {MAX_MESSAGE_BYTES} bytes (not decoded, not recorded)"
        )


class MatchedSubscription:
    """A subscription whose reliability matches the topic's publishers (`auto`: best effort when one offers only
    that, as sensor-data QoS does; a reliable subscriber would never connect), or the one forced.

    Call `match()` again while nothing is heard: a publisher that came up later may need the other one.
    """

    def __init__(
        self,
        node: Node,
        msg_type: type,
        topic: str,
        callback: Callable,
        reliability: str = "auto",
        raw: bool = False,
        quiet: bool = False,
    ) -> None:
        if reliability not in ("auto", *RELIABILITY):
            raise ValueError(f"reliability must be auto, reliable or best_effort, not {reliability!r}")
        self.node, self.msg_type, self.topic, self.callback = node, msg_type, topic, callback
        self.wanted, self.raw, self.quiet = reliability, raw, quiet
        self.reliability = ""
        self.subscription = None
        self.match()

    def match(self) -> None:
        """(Re)subscribe when the reliability the publishers need changed."""
        wanted = self.wanted
        if wanted == "auto":
            wanted = publishers_reliability(self.node, self.node.resolve_topic_name(self.topic)) or "reliable"
        if self.subscription is not None:
            if wanted == self.reliability:
                return
            self.node.destroy_subscription(self.subscription)
        self.subscription = self.node.create_subscription(
            self.msg_type, self.topic, self.callback, sensor_qos(wanted), raw=self.raw
        )
        self.reliability = wanted
        if not self.quiet:  # `quiet`: a short-lived subscription made again and again, said once by its owner
            self.node.get_logger().info(f"{self.subscription.topic_name}: {wanted}")

    def destroy(self) -> None:
        if self.subscription is not None:
            self.node.destroy_subscription(self.subscription)
        self.subscription = None
