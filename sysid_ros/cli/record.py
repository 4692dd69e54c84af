"""`sysid-ros record`: one tape_recorder in this process, configured, activated and played (no lifecycle manager)."""

from __future__ import annotations

import argparse
import sys
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from ..core.files import load_ros_parameters
from ..nodes.tape_recorder import TapeRecorderNode


def _bar(fraction: float, width: int = 40) -> str:
    done = int(round(fraction * width))
    return f"[{'#' * done}{'.' * (width - done)}] {fraction:6.1%}"


def record(args: argparse.Namespace) -> int:
    """Play the tape the parameter file (and options) name; print progress; 0 when it completed."""
    params = load_ros_parameters(args.params_file, "tape_recorder")
    if args.tape is not None:
        params["tape.kind"] = args.tape
    if args.seed is not None:
        params["tape.seed"] = args.seed
    if args.out is not None:
        params["output_dir"] = str(args.out.resolve())  # a path typed in a shell: from the working directory
    from ..ros.client import ros_arguments

    rclpy.init(args=["sysid-ros", "--ros-args", *ros_arguments(args.namespace, args.ros_args)])
    node = TapeRecorderNode(parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        node.trigger_configure()
        node.trigger_activate()
        if node._state_machine.current_state[1] != "active":
            print("tape_recorder could not be configured (see the log above)", file=sys.stderr)
            return 2
        # wait for the robot before asking: a refused play is an error in the node's log
        deadline = time.monotonic() + args.timeout
        if not node.ready_to_play():
            print(
                f"waiting up to {args.timeout:g} s for the robot (its feedback, its controller manager) ...", flush=True
            )
        while not node.ready_to_play() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        ok, message = node.play()
        print(message, file=sys.stdout if ok else sys.stderr)
        if not ok:
            return 2
        shown = -1
        while node.playing:
            executor.spin_once(timeout_sec=0.1)
            if int(node.progress * 100) != shown:
                shown = int(node.progress * 100)
                print(f"\r{_bar(node.progress)}", end="", flush=True)
        result = node.result
        print(f"\r{_bar(1.0 if result['completed'] else node.progress)}")
        print("completed" if result["completed"] else f"aborted: {result['abort_reason']}", f"-> {result['bag']}")
        return 0 if result["completed"] else 1
    except KeyboardInterrupt:  # the motion stops (deactivate holds) and the bag closes with the reason
        node.trigger_deactivate()
        bag = node.result.get("bag")
        raise KeyboardInterrupt(f"motion stopped, bag closed: {bag}" if bag else "nothing was playing") from None
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
