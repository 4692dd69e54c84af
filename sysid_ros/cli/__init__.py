"""The command-line entry points: `commands` (`sysid-ros` and its offline verbs), `fleet` (`fleet identify`), `tuner`
(`tune`, `apply`, `rollback`: talking to a running servo_tuner), `record` (`record`: a tape_recorder run
in-process), `call` (`call`: a Trigger service, as `ros2 service call`), `calibrate` (`calibrate-gains`: drive
gains from a known mass)."""

from .commands import main as main

__all__ = ["main"]
