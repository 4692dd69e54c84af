"""The ROS-free core: numpy, scipy and MuJoCo code that computes; importable without rclpy.

- `errors`: the `SysidRosError` family every deliberate error belongs to.
- `signals/`: time-stamped joint data (samples, commands, trajectories, derivatives, size bounds).
- `files/`: ROS parameter files, YAML schemas, the package's shared files, safe atomic outputs.
- `bags/`: rosbag2 (and rosbag1) recordings read, written, summarised and repaired.
- `tapes/`: designed motion inside each joint's envelope, and its guarded playback.
- `sim/`: the simulated robot (MuJoCo arm with hidden physics) behind the `sim_robot` node.
- `linear/`: models linear in their parameters (one joint, a whole arm, friction) and their fits.
- `identify/`: identification of a model's parameters from recordings with mujoco.sysid.
- `gains/`: PID gains, their guard, controllers' parameter names and files, the gains journal.
- `tuner/`: the servo tuner: analytic start, identify, sweep, refine, verify, proposal.
- `online/`: online estimation of a joint's linear parameters, following changes.
- `fleet/`: identification of many robots (engines: serial, process pool, Ray) and fleet statistics.
- `report/`: HTML reports (identification, tuning, tapes) on plotly.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def front_door(
    package: str, exports: Mapping[str, str], eager: tuple[str, ...] = ()
) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """A package's front door (PEP 562): `exports` maps each public name to the module defining it (relative to
    the package), imported when the name is first asked for. Returns `__getattr__`, `__dir__` and `__all__`."""

    def __getattr__(name: str) -> object:
        source = exports.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source, package), name)
        setattr(sys.modules[package], name, value)  # later look-ups skip this function
        return value

    names = sorted({*exports, *eager})
    return __getattr__, lambda: names, names
