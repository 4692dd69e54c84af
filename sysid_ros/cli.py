"""`sysid-ros`: the command-line tool. Everything but moving the robot works offline, from bags alone."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .core.errors import SysidRosError
from .core.paths import config_dir


def _models(args: argparse.Namespace) -> int:
    for path in sorted((config_dir() / "models").glob("*.xml")):
        print(f"{path.stem:<12} {path}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from .core.bags import inspect_bag

    print(inspect_bag(args.bag, distro=args.distro, joint_names=args.joints).format())
    return 0


def _convert(args: argparse.Namespace) -> int:
    from .core.bags import export_csv, read_recording, save_npz

    recording = read_recording(args.bag, joints=args.joints, time_source=args.time_source,
                               command_joint_names=args.command_joints, distro=args.distro)
    out = Path(args.out)
    if out.suffix == ".csv":
        print(export_csv(out, recording.samples))
    else:
        save_npz(out, recording.samples, recording.commands, recording.metadata)
        print(out)
    for warning in recording.feedback.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _repair(args: argparse.Namespace) -> int:
    from .core.bags import repair

    print(repair(args.bag))
    return 0


def _record(args: argparse.Namespace) -> int:
    from .nodes.record_cli import record

    return record(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sysid-ros", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"sysid_ros {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("models", help="list the embedded robot models").set_defaults(run=_models)

    bag_options = argparse.ArgumentParser(add_help=False)
    bag_options.add_argument("bag", type=Path, help="a rosbag2 folder (mcap or sqlite3) or a ROS 1 .bag")
    bag_options.add_argument("--distro", default=None, help="typestore for bags without definitions (e.g. jazzy)")
    bag_options.add_argument("--joints", nargs="+", default=None, help="joint names to take (default: all)")

    inspect = commands.add_parser("inspect", parents=[bag_options],
                                  help="topics, rates, joints, time span, and what is usable for identification")
    inspect.set_defaults(run=_inspect)

    convert = commands.add_parser("convert", parents=[bag_options], help="a bag to arrays (.npz, or .csv)")
    convert.add_argument("--out", required=True, help="FILE.npz (samples, commands, metadata) or FILE.csv")
    convert.add_argument("--time-source", default="auto", choices=("auto", "header", "record"))
    convert.add_argument("--command-joints", nargs="+", default=None,
                         help="the controller's joint order for Float64MultiArray commands")
    convert.set_defaults(run=_convert)

    bag = commands.add_parser("bag", help="bag maintenance").add_subparsers(dest="bag_command", required=True)
    repair = bag.add_parser("repair", help="make a recording cut short by a crash readable again")
    repair.add_argument("bag", type=Path)
    repair.set_defaults(run=_repair)

    record = commands.add_parser("record", help="play a tape on the robot and record it (no lifecycle manager)")
    record.add_argument("--params-file", type=Path, default=config_dir() / "tape_recorder.yaml",
                        help="tape_recorder parameters (ros__parameters YAML)")
    record.add_argument("--tape", default=None, help="tape kind (overrides tape.kind)")
    record.add_argument("--seed", type=int, default=None, help="tape seed (overrides tape.seed)")
    record.add_argument("--out", type=Path, default=None, help="output folder (overrides output_dir)")
    record.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the robot")
    record.set_defaults(run=_record)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except SysidRosError as exc:
        print(f"sysid-ros {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
