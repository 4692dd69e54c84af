"""`sysid-ros calibrate-gains`: each joint's drive gain from an unloaded and a loaded run with a known payload.

The model is the arm with the known payload as a body (its true mass, centre and inertia); both bags play the
same motion, one without the payload and one with it. Prints each joint's gain (the true torque is gain x the
logged effort) with its 95 % half-width, and writes them as the `effort_scale` a problem file's data entries
take (joints the payload does not load are left out, with a warning). Nothing is written when the fit fails,
and an existing output file is never overwritten.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import yaml

from ..core.errors import ConfigError, DataError


def _run(bag: Path, joints: list[str], cutoff_hz: float, warnings: list[str]):
    from ..core.bags import read_joint_states
    from ..core.linear import calibration_run

    read = read_joint_states(bag, joints=joints)
    warnings += [f"{bag}: {w}" for w in read.warnings]
    segment = max(read.segments, key=len)
    if len(read.segments) > 1:
        warnings.append(f"{bag}: {len(read.segments)} gap-free stretches; the longest ({len(segment)} rows) is used")
    if segment.effort is None:
        raise DataError("the bag's joint states carry no effort", bag=str(bag))
    fields = [segment.position, segment.effort] + ([segment.velocity] if segment.velocity is not None else [])
    ok = np.logical_and.reduce([np.isfinite(f).all(axis=1) for f in fields])
    if ok.sum() < len(ok):
        warnings.append(f"{bag}: {int((~ok).sum())} rows with a non-finite value left out")
    velocity = None if segment.velocity is None else segment.velocity[ok]
    return calibration_run(segment.time_ns[ok], segment.position[ok], segment.effort[ok], velocity, cutoff_hz)


def run(args: argparse.Namespace) -> int:
    from ..core.files import write_file
    from ..core.linear import calibrate_drive_gains
    from ..core.online import load_model

    if args.out is not None and (args.out.exists() or args.out.is_symlink()):
        raise ConfigError("the output file exists already; choose another (nothing is overwritten)", out=str(args.out))
    model = load_model(args.model)
    joints = [model.joint(model.dof_jntid[d]).name for d in range(model.nv)]
    if model.nv != model.njnt:
        raise ConfigError("the model must have hinge or slide joints only (one DOF each)", model=str(args.model))
    if args.payload not in {model.body(b).name for b in range(model.nbody)}:
        raise ConfigError(f"the model has no body {args.payload!r} (the known payload)", model=str(args.model))
    warnings: list[str] = []
    gains = calibrate_drive_gains(
        model,
        _run(args.unloaded, joints, args.cutoff_hz, warnings),
        _run(args.loaded, joints, args.cutoff_hz, warnings),
        args.payload,
    )
    for joint, k, h, share, ok in zip(
        gains.joints, gains.gain, gains.half_width_95, gains.payload_share, gains.calibrated
    ):
        mark = "" if ok else "  (not calibrated)"
        print(f"{joint}: gain {k:.4f} +- {h:.4f} (payload torque {share:.1%} of the logged){mark}")
    for line in warnings + list(gains.warnings):
        print(f"warning: {line}")
    if args.out is not None:
        doc = {**gains.document(), "model": str(args.model), "payload_body": args.payload}
        doc["bags"] = {"unloaded": str(args.unloaded), "loaded": str(args.loaded)}
        text = yaml.safe_dump(doc, sort_keys=False)
        write_file(args.out, lambda tmp: Path(tmp).write_text(text))
        print(f"effort_scale: {args.out}")
    return 0


def add_command(commands) -> None:
    cal = commands.add_parser(
        "calibrate-gains",
        help="each joint's drive gain from an unloaded and a loaded run with a known payload",
        description=__doc__.splitlines()[0],
    )
    cal.add_argument("--model", required=True, help="the arm with the known payload as a body: MJCF, URDF or a name")
    cal.add_argument("--payload", required=True, help="the known payload's body in the model")
    cal.add_argument("--unloaded", required=True, type=Path, help="the run without the payload (a rosbag2 bag)")
    cal.add_argument("--loaded", required=True, type=Path, help="the same motion with the payload (a rosbag2 bag)")
    cal.add_argument(
        "--cutoff-hz",
        type=float,
        default=4.0,
        help="low-pass of positions and torque (default 4 Hz; above the motion's content, below the servo's)",
    )
    cal.add_argument("--out", type=Path, default=None, help="write the gains as effort_scale (YAML; not overwritten)")
    cal.set_defaults(run=run)
