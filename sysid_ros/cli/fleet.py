"""`sysid-ros fleet identify MANIFEST --out DIR`: identify every robot of a fleet, print one line per robot
as it finishes and the fleet's outliers and drift. Exit 0 when every robot was identified ok, 1 when some
failed or are suspect (the others' results are written), 2 on bad input (nothing written), 130 when
interrupted (finished robots are kept; the same command resumes)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _line(outcome: dict) -> None:
    values = ", ".join(
        f"{k} {p['value']:.6g}" if not isinstance(p["value"], list) else f"{k} {p['value']}"
        for k, p in outcome["parameters"].items()
    )
    why = outcome["reason"] or "; ".join(outcome["warnings"])
    tail = " (resumed)" if outcome["resumed"] else f" ({outcome['seconds']:.1f} s)"
    print(f"{outcome['name']:<16} {outcome['status']:<8}{tail} {why or values}", flush=True)


def fleet_identify(args: argparse.Namespace) -> int:
    from ..core.fleet import local_workers, run_fleet

    capped = local_workers(args.workers)[1] if args.engine == "local" else ""
    if capped:
        print(capped, flush=True)
    try:
        doc = run_fleet(
            args.manifest,
            args.out,
            engine=args.engine,
            workers=args.workers,
            address=args.address,
            baseline=args.baseline,
            force=args.force,
            progress=_line,
        )
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished robots are kept in {args.out}; the same command resumes", file=sys.stderr)
        return 130
    for name, stats in doc["parameters"].items():
        if stats["outliers"]:
            print(
                f"outlier: {name} of {', '.join(stats['outliers'])} (fleet median {stats['median']:.6g}, "
                f"spread {stats['spread']:.3g})"
            )
    for robot, moved in (doc.get("drift") or {}).get("drifted", {}).items():
        for name, d in moved.items():
            print(f"drifted: {robot} {name} {d['before']:.6g} -> {d['now']:.6g} (allowed +-{d['allowed']:.3g})")
    fleet = doc["fleet"]
    startup = fleet["startup"]
    if startup["seconds"] is not None:
        print(
            f"{fleet['engine']}: {len(startup['workers'])} worker(s) ready in {startup['seconds']:.1f} s "
            f"(start, imports, model compile), then the robots in {fleet['jobs_seconds']:.1f} s, shut down in "
            f"{fleet['shutdown_seconds']:.1f} s"
        )
    counts = fleet["counts"]
    out = Path(fleet["out"])
    print(
        f"{counts['ok']} ok, {counts['suspect']} suspect, {counts['failed']} failed; "
        f"{out / 'fleet.yaml'}  {out / 'fleet.html'}"
    )
    return 0 if counts["ok"] == len(doc["robots"]) else 1


def add_commands(commands: argparse._SubParsersAction) -> None:
    fleet = commands.add_parser("fleet", help="many robots at once").add_subparsers(dest="fleet_command", required=True)
    ident = fleet.add_parser(
        "identify", help="identify every robot of a fleet manifest (results, provenance, outliers, drift)"
    )
    ident.add_argument("manifest", type=Path, help="fleet manifest YAML (robots: [{name, problem}, ...])")
    ident.add_argument("--out", type=Path, required=True, help="results folder: <robot>/, fleet.yaml, fleet.html")
    ident.add_argument(
        "--engine",
        default="local",
        choices=("serial", "local", "ray"),
        help="serial in this process, a local process pool, or Ray (default: local)",
    )
    ident.add_argument("--workers", type=int, default=None, help="parallel robots (default: the CPU count)")
    ident.add_argument(
        "--address",
        default=None,
        help="with --engine ray: join this Ray cluster (e.g. 10.0.0.5:6379) instead of starting a local one",
    )
    ident.add_argument("--baseline", type=Path, default=None, help="an earlier fleet run's --out: report drift")
    ident.add_argument(
        "--force",
        action="store_true",
        help="replace a robot's earlier results made from other inputs (same inputs: resumed)",
    )
    ident.set_defaults(run=fleet_identify)
