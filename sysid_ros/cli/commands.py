"""`sysid-ros`: the command-line tool. Everything but moving the robot works offline, from bags alone."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .. import __version__
from ..core.errors import ConfigError, SysidRosError
from ..core.files import config_dir
from ..core.gains import ALIASES, STYLES
from .calibrate import add_command as add_calibrate_command
from .call import add_command as add_call_command
from .fleet import add_commands as add_fleet_commands
from .tuner import add_commands as add_tuner_commands


def _models(args: argparse.Namespace) -> int:
    for path in sorted((config_dir() / "models").glob("*.xml")):
        print(f"{path.stem:<12} {path}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from ..core.bags import inspect_bag

    print(
        inspect_bag(
            args.bag,
            distro=args.distro,
            joints=args.joints,
            feedback_topic=args.feedback_topic,
            command_joints=args.command_joints,
            segments=args.segments,
        ).format()
    )
    return 0


def _convert(args: argparse.Namespace) -> int:
    from ..core.bags import export_csv, read_recording, save_npz
    from ..core.errors import DataError
    from ..core.files import check_writable, write_file

    out = Path(args.out).expanduser()
    if out.suffix not in (".npz", ".csv"):
        raise ConfigError(f"--out must end in .npz or .csv, got {out.name!r}")
    check_writable(out.parent, [out.name], args.force)  # before reading the bag
    recording = read_recording(
        args.bag,
        joints=args.joints,
        time_source=args.time_source,
        command_joint_names=args.command_joints,
        distro=args.distro,
        joint_state_topics=[args.feedback_topic] if args.feedback_topic else None,
    )
    segments = recording.feedback.segments
    if len(segments) > 1 and args.segments == "all":
        raise DataError(
            f"the joint states split into {len(segments)} segments at gaps; --segments longest keeps the longest",
            bag=str(args.bag),
        )
    samples = max(segments, key=len)
    if out.suffix == ".csv":
        write_file(out, lambda tmp: export_csv(tmp, samples), args.force)
    else:
        write_file(out, lambda tmp: save_npz(tmp, samples, recording.commands, recording.metadata), args.force)
    print(out)
    for warning in recording.feedback.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _repair(args: argparse.Namespace) -> int:
    from ..core.bags import repair

    print(repair(args.bag, args.out))
    return 0


def _replay_safe(args: argparse.Namespace) -> int:
    from ..core.bags import command_topics, replay_safe_copy

    commands = set(command_topics(args.bag))
    renamed = replay_safe_copy(args.bag, args.out)
    for old, new in renamed.items():
        print(f"{old} -> {new}" + ("   (commands)" if old in commands else ""))
    print(
        f"{args.out}: {len(commands)} command topic(s) and {len(renamed) - len(commands)} other live topic(s) "
        "renamed under /sysid/replay/: playing it publishes nothing a running robot reads or listens to"
    )
    return 0


def _identify(args: argparse.Namespace) -> int:
    from ..core.files import check_writable, folder_lock, model_path, refuse_inputs_inside, remove_stale
    from ..core.identify import load_problem, result_names, with_data

    problem = with_data(load_problem(args.problem), args.train or (), args.validate or (), args.control)
    refuse_inputs_inside(
        args.out, [args.problem, model_path(problem.model), *(s.path for s in (*problem.training, *problem.validation))]
    )
    with folder_lock(args.out):  # a second run into this --out is refused until this one ends
        remove_stale(args.out)  # staging left by a killed run
        check_writable(args.out, list(result_names(problem).values()), args.force)  # before the optimisation
        return _identified(args, problem)


def _identified(args: argparse.Namespace, problem) -> int:
    """Identify `problem` into --out (locked by the caller) and print the values, verdict and warnings."""
    from ..core.identify import COMPONENTS, identify, write_results

    last = [-1]

    def progress(stage: str, fraction: float, message: str) -> None:
        percent = int(fraction * 100)
        if percent != last[0] or stage != "optimize":
            last[0] = percent
            print(f"\r{percent:3d}% {stage:<10} {message[:60]:<60}", end="", flush=True)

    result = identify(problem, progress=None if args.quiet else progress)
    paths = write_results(result, args.out, force=args.force)
    print()
    print(f"{'parameter':<24}{'value':>14}{'+- 95 %':>12}{'start':>12}  identifiable")
    for p in result.parameters:  # one row per value (body_mass_com, body_inertia: mass, com_x, ..., ixx, ...)
        labels = COMPONENTS.get(p.kind, ("",) * len(p.value)) if len(p.value) > 1 else ("",)
        for label, value, half, start in zip(labels, p.value, p.half_width_95, p.start):
            name = f"{p.name}.{label}" if label else p.name
            print(f"{name:<24}{value:>14.6g}{half:>12.4g}{start:>12.6g}  {'yes' if p.identifiable else 'NO'}")
    torque = result.metrics.get("held_out_torque_rms_nm")
    if torque:  # an arm: held-out joint torque per joint and model
        labels = [
            k
            for k in ("nominal", "start_values", "window_fit", "torque_space", "identified", "regression_friction")
            if k in torque
        ]
        print(f"held-out joint torque RMS, N m ({torque['held_out']}):")
        print(f"{'joint':<24}" + "".join(f"{k:>20}" for k in labels))
        for joint in torque[labels[0]]:
            print(f"{joint:<24}" + "".join(f"{torque[k][joint]:>20.4g}" for k in labels))
    for note in result.notes:
        print(f"note: {note}")
    print(f"results: {paths['yaml']}  report: {paths['report']}")
    print(f"verdict: {result.verdict}", file=sys.stderr)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 1 if args.strict and result.verdict != "ok" else 0


def _report(args: argparse.Namespace) -> int:
    from ..core.report import redraw

    print(redraw(args.folder))
    return 0


def _export(args: argparse.Namespace) -> int:
    import yaml

    from ..core.gains import parameter_block
    from ..core.tuner import proposal_target, proven_parameters

    _, controller, style = proposal_target(args.proposal, args.controller, args.style)
    parameters, note = proven_parameters(args.proposal, args.gains_only)
    if note:
        print(f"note: {note}", file=sys.stderr)
    text = yaml.safe_dump(parameter_block(parameters, controller, style), sort_keys=False)
    if args.out is None:
        print(text, end="")
        return 0
    from ..core.files import write_file

    if args.out.exists():
        raise SysidRosError(f"{args.out} exists: not overwritten (use apply --persist to update a controllers file)")
    write_file(args.out, lambda tmp: tmp.write_text(text))  # whole or not at all
    print(args.out)
    return 0


def _tapes_plot(args: argparse.Namespace) -> int:
    from ..core import tapes
    from ..core.errors import ConfigError
    from ..core.files import load_ros_parameters, load_yaml
    from ..core.report import write_tape_page
    from ..core.tapes import envelopes_from_parameters

    params = load_ros_parameters(args.params_file, "tape_recorder")
    joints = list(params.get("joints") or [])
    envelopes = envelopes_from_parameters(joints, params)
    if args.file is not None:
        data = load_yaml(args.file, "tape file")
        tape = tapes.Tape.from_dict(data["tape"] if isinstance(data, dict) and "tape" in data else data)
    else:
        kind = args.tape or params.get("tape.kind", "multisine")
        if kind not in tapes.KINDS:
            raise ConfigError(f"tape kind {kind!r} is not one of {tapes.KINDS}")
        options = {}
        if kind in tapes.tape.EFFORT_KINDS:
            stream = params.get("command_mode", "stream") == "stream"
            options["interface"] = params.get("forward_interface", "position") if stream else "position"
        if kind in tapes.MODEL_KINDS:
            options["model"] = params.get("model") or ""
        seed = args.seed if args.seed is not None else int(params.get("tape.seed", 0))
        tape = tapes.build(kind, envelopes, float(params.get("command_rate_hz", 500.0)), seed, **options)
    missing = [j for j in tape.joints if j not in envelopes]
    if missing:
        raise ConfigError(f"tape {tape.name} moves {missing}, which have no envelope in {args.params_file}")
    if args.out.exists():
        raise SysidRosError(f"{args.out} exists: not overwritten")
    print(write_tape_page(tape, envelopes, args.out, params.get("model") or None))
    return 0


def _online(args: argparse.Namespace) -> int:
    from ..core.files import resolve_target
    from ..core.linear import read_effort_scale
    from ..core.online import replay_bag

    if args.out is not None:
        resolve_target(args.out)  # a link (dangling or not) is refused before the replay
    scale = None if args.effort_scale is None else read_effort_scale(args.effort_scale)

    replay = replay_bag(
        args.bag,
        args.model,
        joints=args.joints,
        body=args.body,
        inertia=not args.no_inertia,
        topic=args.topic,
        distro=args.distro,
        out=args.out,
        effort_scale=scale,
    )
    for line in replay.lines():
        print(line)
    if args.out:
        print(f"events: {args.out}")
    return 0


def _record(args: argparse.Namespace) -> int:
    from .record import record

    return record(args)


def split_ros_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """A command line split into (its own arguments, the rules after `--ros-args` up to `--`), as ROS tools do."""
    if "--ros-args" not in argv:
        return list(argv), []
    k = argv.index("--ros-args")
    rest = argv[k + 1 :]
    end = rest.index("--") if "--" in rest else len(rest)
    return argv[:k] + rest[end + 1 :], rest[:end]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sysid-ros", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"sysid_ros {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("models", help="list the embedded robot models").set_defaults(run=_models)

    bag_options = argparse.ArgumentParser(add_help=False)
    bag_options.add_argument("bag", type=Path, help="a rosbag2 folder (mcap or sqlite3) or a ROS 1 .bag")
    bag_options.add_argument("--distro", default=None, help="typestore for bags without definitions (e.g. jazzy)")
    bag_options.add_argument("--joints", nargs="+", default=None, help="joint names to take (default: all)")
    bag_options.add_argument(
        "--feedback-topic", default=None, help="the JointState topic to read (default: all, merged by joint name)"
    )
    bag_options.add_argument(
        "--command-joints", nargs="+", default=None, help="the controller's joint order for Float64MultiArray commands"
    )
    bag_options.add_argument(
        "--segments",
        default="all",
        choices=("all", "longest"),
        help="gap-free stretches to use: all, or only the longest",
    )

    inspect = commands.add_parser(
        "inspect", parents=[bag_options], help="topics, rates, joints, time span, and what is usable for identification"
    )
    inspect.set_defaults(run=_inspect)

    convert = commands.add_parser("convert", parents=[bag_options], help="a bag to arrays (.npz, or .csv)")
    convert.add_argument(
        "--out", required=True, help="FILE.npz (samples, commands, metadata) or FILE.csv; missing folders are created"
    )
    convert.add_argument("--force", action="store_true", help="replace an existing --out file")
    convert.add_argument("--time-source", default="auto", choices=("auto", "header", "record"))
    convert.set_defaults(run=_convert)

    bag = commands.add_parser("bag", help="bag maintenance").add_subparsers(dest="bag_command", required=True)
    repair = bag.add_parser(
        "repair",
        help="make a recording cut short by a crash readable again, as a new bag "
        "next to it (the original is never changed)",
    )
    repair.add_argument("bag", type=Path)
    repair.add_argument(
        "--out", type=Path, default=None, help="the repaired bag's folder (default BAG_repaired; must not exist)"
    )
    repair.set_defaults(run=_repair)
    safe = bag.add_parser(
        "replay-safe",
        help="a copy whose command topics are renamed under /sysid/replay/ "
        "(ros2 bag play cannot drive the robot with it)",
    )
    safe.add_argument("bag", type=Path)
    safe.add_argument("--out", type=Path, required=True, help="the new bag folder (must not exist)")
    safe.set_defaults(run=_replay_safe)

    ident = commands.add_parser("identify", help="identify a MuJoCo model's parameters from bags (problem YAML)")
    ident.add_argument("problem", type=Path, help="problem YAML (see config/identify_pendulum.yaml)")
    ident.add_argument("--out", type=Path, required=True, help="results folder (created when missing)")
    ident.add_argument("--force", action="store_true", help="replace earlier results in --out")
    ident.add_argument("--train", nargs="+", default=None, help="training bags (replace the problem's)")
    ident.add_argument("--validate", nargs="+", default=None, help="held-out bags (replace the problem's)")
    ident.add_argument(
        "--control",
        default="auto",
        choices=("auto", "commands", "effort"),
        help="with --train/--validate: drive the model with the effort commands or the measured effort",
    )
    ident.add_argument("--quiet", action="store_true", help="no progress line")
    ident.add_argument(
        "--strict", action="store_true", help="exit 1 when the verdict is suspect (the results are still written)"
    )
    ident.set_defaults(run=_identify)

    report = commands.add_parser("report", help="draw a results folder's report.html again from its results and bags")
    report.add_argument(
        "folder",
        type=Path,
        help="a results folder: identification (identified.yaml), "
        "tuner/tune_<UTC> (proposal.yaml) or tuner/canary_<UTC> (canary.yaml)",
    )
    report.set_defaults(run=_report)

    tape_options = argparse.ArgumentParser(add_help=False)
    tape_options.add_argument(
        "--params-file",
        type=Path,
        default=config_dir() / "tape_recorder.yaml",
        help="tape_recorder parameters (ros__parameters YAML): joints, envelopes, tape",
    )
    tape_options.add_argument("--tape", default=None, help="tape kind (overrides tape.kind)")
    tape_options.add_argument("--seed", type=int, default=None, help="tape seed (overrides tape.seed)")

    tapes = commands.add_parser("tapes", help="designed tapes").add_subparsers(dest="tapes_command", required=True)
    plot = tapes.add_parser(
        "plot", parents=[tape_options], help="a tape's position, velocity, acceleration and torque against the envelope"
    )
    plot.add_argument("--file", type=Path, default=None, help="a tape YAML or a tuner play (play_NNNN_<tape>.yaml)")
    plot.add_argument("--out", type=Path, required=True, help="the page to write (.html)")
    plot.set_defaults(run=_tapes_plot)

    online = commands.add_parser(
        "online",
        parents=[bag_options],
        help="replay the online payload estimator over a bag; print its events with times",
    )
    online.add_argument(
        "--model",
        required=True,
        help="the arm without the payload (nominal or identified): MJCF, URDF or an embedded name",
    )
    online.add_argument("--body", default=None, help="the body the payload is on (default: the last link)")
    online.add_argument("--topic", default=None, help="the JointState topic (default: every JointState topic)")
    online.add_argument("--no-inertia", action="store_true", help="estimate mass and first moments only")
    online.add_argument("--out", type=Path, default=None, help="also write the events and final estimate (YAML)")
    online.add_argument(
        "--effort-scale",
        type=Path,
        default=None,
        help="drive gains to multiply the logged effort by (the YAML `sysid-ros calibrate-gains --out` writes)",
    )
    online.set_defaults(run=_online)

    # verbs that talk to nodes: a robot's namespace, and any ROS rules after --ros-args (split off in main)
    ros_options = argparse.ArgumentParser(add_help=False)
    ros_options.add_argument("--namespace", default="", help="the robot's namespace (e.g. r1): its nodes and topics")
    record = commands.add_parser(
        "record",
        parents=[tape_options, ros_options],
        help="play a tape on the robot and record it (no lifecycle manager)",
    )
    record.add_argument("--out", type=Path, default=None, help="output folder (overrides output_dir)")
    record.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the robot")
    record.set_defaults(run=_record)
    export = commands.add_parser(
        "export",
        help="what a proposal's canary proved (gains, and the feed-forward the "
        "controller can hold) as its parameter-file block",
    )
    export.add_argument("proposal", type=Path, help="a proposal YAML (servo_tuner's proposal.yaml)")
    export.add_argument(
        "--style",
        default="auto",
        choices=("auto", *STYLES, *ALIASES),
        help="the controller's PID parameter names (auto: as the proposal recorded them)",
    )
    export.add_argument("--controller", default=None, help="the controller's name (default: the proposal's)")
    export.add_argument(
        "--out", type=Path, default=None, help="write this file (never overwritten) instead of printing"
    )
    export.add_argument(
        "--gains-only",
        action="store_true",
        help="write the gains even when the canary also ran with a host feed-forward the "
        "controller's parameters cannot hold (said on stderr)",
    )
    export.set_defaults(run=_export)
    add_tuner_commands(commands, ros_options)  # tune, apply, rollback: requests to a running servo_tuner
    add_call_command(commands, ros_options)  # a Trigger service, as `ros2 service call` (the venv has no ros2)
    add_fleet_commands(commands)  # fleet identify
    add_calibrate_command(commands)  # calibrate-gains: drive gains from a known payload
    return parser


def main(argv: list[str] | None = None) -> int:
    own, ros_args = split_ros_args(sys.argv[1:] if argv is None else list(argv))
    args = build_parser().parse_args(own)
    args.ros_args = ros_args
    if ros_args and not hasattr(args, "namespace"):
        print(f"sysid-ros {args.command}: --ros-args only applies to commands that talk to nodes", file=sys.stderr)
        return 2
    try:
        code = args.run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except SysidRosError as exc:
        return _error(args, str(exc))
    except BrokenPipeError:  # `sysid-ros inspect BAG | head`: the reader left, nothing more to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as exc:  # unreadable or unwritable files: the path and the reason, no traceback
        where = f" ({exc.filename})" if exc.filename else ""
        return _error(args, f"{exc.strerror or exc}{where}")
    except KeyboardInterrupt as exc:  # a verb that cancels its job says how it ended
        return _error(args, f"interrupted: {exc}" if str(exc) else "interrupted", 130)
    except Exception as exc:
        kind = (
            type(exc).__name__
            if type(exc).__module__ == "builtins"
            else f"{type(exc).__module__.split('.')[0]}.{type(exc).__name__}"
        )
        return _error(args, f"unexpected {kind}: {str(exc) or 'no message'}")


def _error(args: argparse.Namespace, message: str, code: int = 2) -> int:
    """One line on stderr: the command and what went wrong (multi-line library messages joined)."""
    line = "; ".join(part.strip() for part in message.splitlines() if part.strip())
    line = line if len(line) <= 2000 else line[:1997] + "..."  # a message that quotes a whole input
    command = " ".join(filter(None, (args.command, getattr(args, "bag_command", None))))
    print(f"sysid-ros {command}: {line}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
