"""Servo tuner benchmark: the full refine grid against twin screening, on several SimPlant joints.

For each joint: seconds of plant motion per stage, the held-out (verify) cost of the delivered controller
against as found (2.0), the identified model against the hidden truth, and the wall time. Twin screening
plays refine candidates on a MuJoCo twin of the identified model first and the plant only those the twin
cannot rule out; its sweep starts two rungs below where the twin's own sweep stopped ringing.

    .venv/bin/python bench/bench_tuner.py [--quick] [--twin-only] [--before OLD_TREE]

`--before OLD_TREE` also tunes each joint (twin screening) with the code of another checkout (e.g. `git worktree
add /tmp/old d74658d`), in a subprocess, and prints its seconds of motion beside this tree's. The closing table
puts each joint's seconds of motion and verify costs side by side (before, twin, full grid) and checks the
budget: <= 300 s of motion delivering the full grid's controller or one of lower cost (the same controller's
verify cost differs between the modes by the noise of its plays: the plant's noise draws differ after a
different number of plays).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from support.tuner_joints import DemoJoint, direct_drive, shoulder, with_gains
from sysid_ros.core.linear import JointModel
from sysid_ros.core.tapes import Envelope
from sysid_ros.core.tuner import DriveGains, Goal, Servo, SimPlant, tune


def pendulum() -> DemoJoint:
    """config/models/pendulum.xml (J 0.325 kg m^2, 6.4 N m of gravity, 3 N m cap) at 500 Hz through a 0.5 mrad
    encoder one interval late, with poor gains kp 4, kd 0.05 (test/test_tuner_pendulum.py)."""
    env = Envelope(origin_rad=0.0, travel_rad=0.4, max_speed_rad_s=2.0, max_torque_nm=3.0)
    plant = SimPlant("pendulum", "hinge", env, 500.0, 3.0, {}, 5e-4, 0.002, 0)
    truth = JointModel(1.3 * 0.25 + 1e-4, 0.08, 0.05, 1.3 * 9.81 * 0.5)
    return DemoJoint(Servo("hinge", DriveGains(4.0, 0.05), 3.0, env), plant, truth)


def joints(quick: bool) -> dict[str, Callable[[], DemoJoint]]:
    out = {
        "shoulder 3.6 kg m^2, 200 Hz": lambda: shoulder(),
        "direct drive 6.6e-5 kg m^2, 500 Hz": lambda: direct_drive(),
        "pendulum 0.33 kg m^2, 0.5 mrad encoder": pendulum,
    }
    if not quick:
        out["shoulder, 0.1 mrad encoder noise"] = lambda: shoulder(noise_rad=1e-4)
        out["direct drive, soft factory gains, 250 Hz"] = lambda: with_gains(
            direct_drive(command_rate_hz=250.0), DriveGains(0.1, 0.002)
        )
    return out


def run(make: Callable[[], DemoJoint], twin: bool) -> dict[str, Any]:
    joint: DemoJoint = make()
    t0 = time.perf_counter()
    result = tune(joint.servo, joint.plant, Goal(twin_screening=twin), twin=twin)
    wall = time.perf_counter() - t0
    model = result.identification.model
    played = sum(c.played_on_plant for c in result.refine.candidates)
    return {
        "plant_s": result.seconds["total"],
        "seconds": result.seconds,
        "cost": result.verify.chosen.cost,
        "controller": result.verify.chosen.controller,
        "improved": result.improved,
        "wall_s": wall,
        "played": played,
        "tried": len(result.refine.candidates),
        "J_err": model.inertia_kg_m2 / joint.truth.inertia_kg_m2 - 1,
        "tc_err": model.coulomb_nm / joint.truth.coulomb_nm - 1,
        "delay_ms": 1e3 * result.identification.delay_s,
        "delay_true_ms": 1e3 * joint.plant.delay_s,
        "wn_max": result.sweep.wn_max_rad_s,
        "rungs": len(result.sweep.rungs),
    }


BUDGET_S = 300.0  # seconds of motion a tune may take from production per joint

BEFORE = """import json, sys
sys.path[:0] = [{tree!r}, {tree!r} + '/test']
from bench.bench_tuner import joints, run
r = run(joints(True)[{name!r}], True)
print(json.dumps({{"plant_s": r["plant_s"], "seconds": r["seconds"], "cost": r["cost"]}}))
"""


def before(tree: str, name: str) -> dict[str, Any]:
    """The twin-screened tune of joint `name` by the code in checkout `tree` (a subprocess on that tree)."""
    out = subprocess.run(
        [sys.executable, "-c", BEFORE.format(tree=tree, name=name)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": tree},
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three joints only")
    parser.add_argument("--twin-only", action="store_true", help="twin screening only (no full grid)")
    parser.add_argument("--before", metavar="OLD_TREE", help="a checkout whose tuner to run beside this one")
    args = parser.parse_args()
    print(
        f"{'joint':<42} {'mode':<6} {'plant s':>8} {'cost':>6} {'played':>7} {'rungs':>5} {'J err':>7} "
        f"{'tc err':>7} {'delay ms':>12} {'wall s':>7}"
    )
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for name, make in joints(args.quick).items():
        for twin in (True,) if args.twin_only else (False, True):
            r = rows.setdefault(name, {})["twin" if twin else "grid"] = run(make, twin)
            print(
                f"{name:<42} {'twin' if twin else 'grid':<6} {r['plant_s']:8.0f} {r['cost']:6.3f} "
                f"{r['played']:>3}/{r['tried']:<3} {r['rungs']:5d} {r['J_err']:+7.1%} {r['tc_err']:+7.1%} "
                f"{r['delay_ms']:5.2f}/{r['delay_true_ms']:<5.1f} {r['wall_s']:7.1f}"
            )
            print(f"{'':<42} stages: " + ", ".join(f"{k} {v:.0f}" for k, v in r["seconds"].items()))
        if args.before:
            b = rows[name]["before"] = before(args.before, name)
            print(
                f"{'':<42} before ({args.before}), twin: {b['plant_s']:.0f} s of motion, cost {b['cost']:.3f}; "
                "stages: " + ", ".join(f"{k} {v:.0f}" for k, v in b["seconds"].items()),
                flush=True,
            )
    print(
        f"\n{'joint':<42} {'s of motion: before':>19} {'twin':>6} {'grid':>6}   {'cost: before':>12} {'twin':>7} "
        f"{'grid':>7}   {'pick':>6}   <= {BUDGET_S:.0f} s, grid's pick or cost <= grid"
    )
    for name, r in rows.items():
        b, t, g = r.get("before"), r["twin"], r.get("grid")
        same = g is not None and t["controller"] == g["controller"]
        met = t["plant_s"] <= BUDGET_S and (g is None or same or t["cost"] <= g["cost"])
        print(
            f"{name:<42} {b['plant_s'] if b else float('nan'):19.0f} {t['plant_s']:6.0f} "
            f"{g['plant_s'] if g else float('nan'):6.0f}   {b['cost'] if b else float('nan'):12.4f} "
            f"{t['cost']:7.4f} {g['cost'] if g else float('nan'):7.4f}   "
            f"{'-' if g is None else 'grid' if same else 'other':>6}   "
            f"{'yes' if met else 'NO'}"
        )


if __name__ == "__main__":
    main()
