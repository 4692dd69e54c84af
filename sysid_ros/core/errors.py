"""One error family for sysid_ros, so callers catch what they can handle and users read what went wrong.

Every error says where it happened: the bag, topic, joint, parameter or time at fault, when known.
"""

from __future__ import annotations


class SysidRosError(Exception):
    """Base of every error sysid_ros raises on purpose."""

    def __init__(self, message: str, **where: object) -> None:
        self.where = {k: v for k, v in where.items() if v is not None}
        context = ", ".join(f"{k}={v}" for k, v in self.where.items())
        super().__init__(f"{message} ({context})" if context else message)


class ConfigError(SysidRosError):
    """A configuration, parameter or problem file is invalid."""


class ModelError(SysidRosError):
    """A robot model cannot be loaded or does not have what is asked of it."""


class EnvelopeError(SysidRosError):
    """A motion would leave, or has left, a joint's safety envelope."""


class BagError(SysidRosError):
    """A bag cannot be read, or its contents cannot be used as asked."""


class DataError(SysidRosError):
    """Measured data is unusable: non-finite values, gaps, too short, no motion."""


class GainsError(SysidRosError):
    """Gains are outside their guard, not finite, or a controller refused them."""


class Cancelled(Exception):
    """A long job (a play, an identification, a tune, a canary) stopped on request; not a SysidRosError, so no
    handler of bad input swallows it on its way out."""
