"""Wall time of the whole-arm regression with smooth friction (`fit_arm_friction`) on a 1 kHz 7-joint record.

Run:  .venv/bin/python bench/bench_arm_friction_speed.py [--seconds 15] [--repeat 1] [--search-rows N]
          [--bootstrap-seed 0] [--save a.npz] [--compare a.npz]

The simulated iiwa (test_identify_friction's truth: hidden payload and damping, smooth Coulomb friction and
torque-sensor offsets, `synthetic.IIWA_FRICTION`) tracks multisine setpoints with state and torque every 1 ms;
the torque check's rows (`torque_records`: 50 ms Savitzky-Golay derivatives, the measured velocity) go to
`fit_arm_friction` as `identify` calls it. Printed: its wall time, each joint's v_s and friction terms; `--save`
keeps them, `--compare` prints the relative change against a saved run (e.g. before and after a change).

Measured (15 s, 14951 rows, one BLAS thread): 35-40 s with the search on every row, 5.9-7.2 s with it on
`SEARCH_ROWS` (4000); v_s moved 0.2-3.3 %, the values at most 0.13 of their half-widths, the half-widths 0.83-1.29x
(another bootstrap seed alone moves them 0.6-1.7x). Most of what is left is the regressor (`ArmRegressor.compute`,
twice on every row).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from support.synthetic import IIWA_FRICTION, IIWA_GAINS, IIWA_HIDDEN, IIWA_LOG_NOISE, iiwa_setpoints, record_position
from sysid_ros.core.identify import IIWA_JOINTS, Payload, iiwa_mjcf
from sysid_ros.core.identify.checks.torque_validation import torque_records
from sysid_ros.core.identify.rollout import sequences as sd
from sysid_ros.core.linear import BootstrapSettings, arm_friction, fit_arm_friction
from sysid_ros.core.linear.arm_friction import FRICTION_TERMS
from sysid_ros.core.sim import SimRobot


def record(seconds: float, seed: int) -> tuple:
    """The iiwa's derivatives, torques and measured velocities at 1 kHz, and its model."""
    with tempfile.TemporaryDirectory() as folder:
        path = iiwa_mjcf(Path(folder) / "iiwa.xml", payload=Payload(0.5), full_inertia=True)
        model = mujoco.MjModel.from_xml_path(str(path))
        setpoints = iiwa_setpoints(seed, seconds, 0.001)
        robot = SimRobot(
            str(path),
            physics_dt_s=0.001,
            command_rate_hz=1000.0,
            publish_rate_hz=1000.0,
            physics=IIWA_HIDDEN,
            noise=IIWA_LOG_NOISE,
            seed=seed,
            initial_positions=list(setpoints[0]),
            friction=IIWA_FRICTION,
        )
        samples = record_position(robot, lambda t: setpoints[int(round(t / 0.001))], seconds, IIWA_GAINS)
    maps = sd.joint_maps(model, IIWA_JOINTS)
    return model, *torque_records(model, maps, [(samples, None)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bootstrap-seed", type=int, default=0, help="the block bootstrap's seed")
    parser.add_argument("--repeat", type=int, default=1, help="fit this many times; the fastest is printed")
    parser.add_argument("--search-rows", type=int, help="override arm_friction.SEARCH_ROWS (where it exists)")
    parser.add_argument("--save", type=Path, help="keep v_s, values and half-widths in this .npz")
    parser.add_argument("--compare", type=Path, help="a --save of another run: print the relative changes")
    args = parser.parse_args()
    if args.search_rows:
        arm_friction.SEARCH_ROWS = args.search_rows
    model, deriv, tau, velocity = record(args.seconds, args.seed)
    rows = int((deriv.valid.all(axis=1) & np.isfinite(tau).all(axis=1)).sum())
    settings = BootstrapSettings(seed=args.bootstrap_seed)
    wall, cpu = [], []
    for _ in range(args.repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        fit = fit_arm_friction(model, deriv, tau, friction_velocity=velocity, bootstrap=settings)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    print(
        f"fit_arm_friction: {min(wall):.2f} s wall (fastest of {args.repeat}; {min(cpu):.2f} s CPU) on {rows} rows, "
        f"{fit.search_evaluations} trials"
    )
    scales = np.array([j.velocity_scale_rad_s for j in fit.joints])
    terms = np.array([[j.terms[t] or (np.nan, np.nan) for t in FRICTION_TERMS] for j in fit.joints])  # (nv, 4, 2)
    print("joint".ljust(18) + "v_s".rjust(8) + "".join(f"{t:>22s}" for t in FRICTION_TERMS))
    for j, joint in enumerate(fit.joints):
        cells = "".join(f"{v:10.4f} +- {h:8.4f}" for v, h in terms[j])
        print(f"{joint.joint:18s}{scales[j]:8.4f}{cells}")
    if args.save:
        np.savez(args.save, scales=scales, terms=terms, values=fit.fit.fit.values, half=fit.fit.fit.half_width_95)
    if args.compare:
        old = np.load(args.compare)
        print(f"v_s, relative change per joint: {np.round(scales / old['scales'] - 1, 4)}")
        for k, term in enumerate(FRICTION_TERMS):
            moved = np.abs(terms[:, k, 0] - old["terms"][:, k, 0])
            print(
                f"{term}: |value change| / half-width max {np.nanmax(moved / old['terms'][:, k, 1]):.3f}, "
                f"relative {np.nanmax(moved / np.abs(old['terms'][:, k, 0])):.2%}; "
                f"half-width relative change max {np.nanmax(np.abs(terms[:, k, 1] / old['terms'][:, k, 1] - 1)):.2%}"
            )
        moved = np.abs(fit.fit.fit.values - old["values"]) / old["half"]
        print(f"all {len(moved)} base parameters: |value change| / half-width max {moved.max():.3f}")
        print(f"half-widths: relative change max {np.abs(fit.fit.fit.half_width_95 / old['half'] - 1).max():.2%}")


if __name__ == "__main__":
    main()
