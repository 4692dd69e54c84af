"""`robot_stack`: one robot's tape_recorder, servo_tuner and lifecycle_manager composed in one process.

The same nodes as their own executables (same names, parameters, services and topics; a params file's
`/**/tape_recorder:`, `/**/servo_tuner:` and `/**/lifecycle_manager:` sections each reach their node), each on
a single-threaded executor of its own thread. Per robot that is one Python interpreter with rclpy, MuJoCo and the tuner
imported once instead of three: about half the memory and start-up CPU of three processes (see
docs/fleet_stack.md). Start it in the robot's namespace (`--ros-args -r __ns:=/r1 -r /clock:=clock`); a
`__node:=` rule would rename all three nodes, so none is given. The robot itself (a driver, or
`sim_robot`) stays a process of its own.
"""

from __future__ import annotations

from ..ros.common import run
from .lifecycle_manager import LifecycleManagerNode
from .servo_tuner import ServoTunerNode
from .tape_recorder import TapeRecorderNode

NODES = (TapeRecorderNode, ServoTunerNode, LifecycleManagerNode)
"""In this order: the manager, created last, finds the others already on the graph."""


def main(args: list[str] | None = None) -> None:
    run(NODES, args)


if __name__ == "__main__":
    main()
