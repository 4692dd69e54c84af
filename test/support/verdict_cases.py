"""Helpers of `test_identify_verdict` that other tests and benches use too:
confident wrong answers: every damaged input of issue 12 section 1 gives `verdict: suspect` with the
"""

from __future__ import annotations

from support.arm3 import arm3_problem
from support.pendulum import _problem, _record
from support.synthetic import EFFORT_TOPIC as TOPIC
from support.synthetic import arm3_tracking_record
from sysid_ros.core.bags import save_npz
from sysid_ros.core.identify import identify
from sysid_ros.core.signals import JointCommands
from sysid_ros.core.sim import FeedbackNoise


def pendulum_record(seed: int, seconds: float = 6.0):
    """(samples, commands) of the hidden pendulum under a multisine torque (peak 2.5 N m, 500 Hz)."""
    return _record(seed, seconds, FeedbackNoise(position_rad=5e-4))


def pendulum_problem(train, **extra):
    return _problem(train, None, **extra)


def damaged(commands: JointCommands, case: str) -> JointCommands:
    """`early20`/`early300`: stamped that many ms before they acted; `flip`: sign; `x1000`: scale."""
    time_ns, values = commands.time_ns, commands.values
    if case.startswith("early"):
        time_ns = time_ns - int(case[5:]) * 1_000_000
    elif case == "flip":
        values = -values
    elif case == "x1000":
        values = 1000.0 * values
    return JointCommands(commands.joint_names, time_ns, values, commands.interface)


def pendulum_case(folder, case: str, seed: int = 1, seconds: float = 6.0, **extra):
    samples, commands = pendulum_record(seed, seconds)
    path = save_npz(folder / f"{case}_{seed}.npz", samples, {TOPIC: damaged(commands, case)})
    return identify(pendulum_problem(path, **extra))


def arm3_case(folder, name: str, physics: dict, seed: int = 1, seconds: float = 4.0):
    """The shipped arm3 problem (payload frozen at the model's 0.1 kg) on a recording of `physics`."""
    path = save_npz(folder / f"arm3_{name}_{seed}.npz", arm3_tracking_record(seed, seconds, physics))
    return identify(arm3_problem(path))


def _has(result, *words: str) -> bool:
    return any(all(w in line for w in words) for line in result.warnings)
