"""Held-out joint torque of a real arm's log, side by side: the model file, the simulation path with and
without torque-sensor offsets, the regression with smooth friction, and the true model (issue 19).

The log: pybullet's KUKA iiwa written with `fullinertia` tensors tracking multisine setpoints with its PID
drives, hidden payload (0.8 kg, the model says 0.5) and damping, a smooth Coulomb friction c tanh(v / v_s)
per joint and a joint-torque sensor that reads an offset (`synthetic.IIWA_FRICTION`), logged by a polling
logger into rosbag2 bags (jittered stamps, repeated rows, missed states, gaps). `--stribeck` adds a
Stribeck bump (stiction 60 % above the Coulomb level, decaying over 0.15 rad/s), which neither the
regression's tanh nor MuJoCo's friction loss represents. Each model's held-out RMS is measured on the same
filtered validation record (`identify.torque_check`); the ratio to the true model's is printed with it.

    .venv/bin/python bench/bench_friction.py [--seconds 6] [--seed 1] [--stribeck]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from support.synthetic import IIWA_FRICTION, iiwa_friction_problem, iiwa_logged_bag, true_torque_rms
from sysid_ros.core.identify import Payload, identify, iiwa_mjcf, problem_from_dict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="training record length (validation: 3 s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stribeck", action="store_true", help="add a Stribeck bump to the true friction")
    args = parser.parse_args()
    friction = IIWA_FRICTION
    if args.stribeck:
        friction = replace(
            friction, stribeck_nm=tuple(0.6 * c for c in friction.coulomb_nm), stribeck_velocity_rad_s=0.15
        )
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        model = iiwa_mjcf(d / "iiwa_full.xml", payload=Payload(0.5), full_inertia=True)
        train, _, robot = iiwa_logged_bag(model, d / "train", args.seed, args.seconds, 100 + args.seed, friction)
        val, _, _ = iiwa_logged_bag(model, d / "val", args.seed + 1, 3.0, 200 + args.seed, friction)
        truth = true_torque_rms(model, robot, val)
        runs = {}
        for label, offsets in (("no offsets", False), ("with offsets", True)):
            t0 = time.perf_counter()
            runs[label] = identify(problem_from_dict(iiwa_friction_problem(model, train, val, offsets)))
            print(
                f"simulation path {label}: {time.perf_counter() - t0:.1f} s, verdict {runs[label].verdict} "
                f"({len(runs[label].warnings)} warnings)"
            )
    for note in runs["no offsets"].notes:
        if "torque offsets" in note:
            print(f"simulation path no offsets, note: {note}")
    check = runs["with offsets"].metrics["held_out_torque_rms_nm"]
    columns = {
        "nominal": check["nominal"],
        "sim, no offsets": runs["no offsets"].metrics["held_out_torque_rms_nm"]["identified"],
        "sim + offsets": check["identified"],
        "regression+friction": check["regression_friction"],
        "true": truth,
    }
    print(
        f"\nheld-out joint torque RMS, N m (x the true model's); {args.seconds:g} s training, 3 s validation, "
        f"{check['samples']} samples" + (", Stribeck in the truth" if args.stribeck else "")
    )
    print("joint".ljust(18) + "".join(name.rjust(20) for name in columns))
    for joint in truth:
        print(
            joint.ljust(18)
            + "".join(f"{c[joint]:9.4f} ({c[joint] / truth[joint]:5.2f}x)".rjust(20) for c in columns.values())
        )
    worst = {name: max(c[j] / truth[j] for j in truth) for name, c in columns.items()}
    print("worst ratio".ljust(18) + "".join(f"{w:5.2f}x".rjust(20) for w in worst.values()))
    doc = runs["with offsets"].friction
    print("\nregression with friction per joint: value +- 95 % half-width (truth)")
    for k, (joint, f) in enumerate(doc.items()):
        cell = lambda t: f"{t['value']:.3f} +- {t['half_width_95']:.3f}" if isinstance(t, dict) else "combined"  # noqa
        print(
            f"{joint}: v_s {f['velocity_scale_rad_s']:.3f} ({friction.velocity_scale_rad_s[k]}) rad/s, "
            f"coulomb {cell(f['coulomb'])} ({friction.coulomb_nm[k]}), offset {cell(f['offset'])} "
            f"({friction.effort_offset_nm[k]}), viscous {cell(f['viscous'])}"
        )
    sim = {p.name: p for p in runs["with offsets"].parameters}
    print("\nsimulation path (MuJoCo representation) per joint: damping, frictionloss, joint_effort_offset (truth)")
    for k in range(7):
        values = [sim[f"j{k + 1}_{n}"].value[0] for n in ("damping", "frictionloss", "offset")]
        print(
            f"lbr_iiwa_joint_{k + 1}: {values[0]:.3f}, {values[1]:.3f}, {values[2]:.3f} "
            f"({np.round(robot.physical_parameters()[f'lbr_iiwa_joint_{k + 1}.damping'], 3)}, "
            f"{friction.coulomb_nm[k]}, {friction.effort_offset_nm[k]})"
        )
    print(f"payload {sim['payload_mass'].value[0]:.4f} kg (0.8)")


if __name__ == "__main__":
    main()
