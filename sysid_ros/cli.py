"""`sysid-ros`: the offline command-line tool. Everything but moving the robot works from bags alone."""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .core.errors import SysidRosError
from .core.paths import config_dir


def _models(args: argparse.Namespace) -> int:
    for path in sorted((config_dir() / "models").glob("*.xml")):
        print(f"{path.stem:<12} {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sysid-ros", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"sysid_ros {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("models", help="list the embedded robot models").set_defaults(run=_models)
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
