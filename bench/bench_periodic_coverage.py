"""Do the periodic path's 95 % intervals cover? The simulated iiwa plays one `optimal` tape, new noise per seed.

Run:  .venv/bin/python bench/bench_periodic_coverage.py [--seeds 20]   (needs pybullet; ~20 s per seed here)

Per seed the tape (2 periods of 5 s, test_identify_periodic's) is played on the hidden arm (payload 0.8 kg, joint
damping 0.15-0.9, no Coulomb friction, 0.2 N m torque noise) and the whole-arm regression runs on the averaged
periods as `identify` runs it (`periodic_record`, `fit_arm_friction`, its bootstrap). Printed: the share of the
69 base parameters whose hidden truth lies inside its 95 % interval, per seed and over all, and the parameters
covered least, with the ratio of their mean half-width to 1.96 x the spread of their errors over the seeds
(1: the interval as wide as the errors; < 1: too narrow).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

import mujoco

from support.periodic_iiwa import ENVELOPES, HIDDEN, RATE_HZ, play
from sysid_ros.core import tapes
from sysid_ros.core.identify import IIWA_JOINTS, Payload, iiwa_mjcf
from sysid_ros.core.identify.checks.torque_validation import PERIODIC_BOOTSTRAP
from sysid_ros.core.linear import (
    JOINT_TERMS,
    ArmRegressor,
    fit_arm_friction,
    periodic_record,
    structural_base_parameters,
)
from sysid_ros.core.sim import SimRobot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        model = iiwa_mjcf(Path(folder) / "iiwa.xml", payload=Payload(0.5, com_m=(0.0, 0.0, 0.08)))
        tape = tapes.optimal(ENVELOPES, RATE_HZ, model=model, seed=0, cache_dir=Path(folder) / "cache")
        mj = mujoco.MjModel.from_xml_path(str(model))
        base = structural_base_parameters(ArmRegressor(mj, JOINT_TERMS))
        truth = base.values(ArmRegressor(SimRobot(str(model), physics=HIDDEN).model, JOINT_TERMS).true_parameters())
        values, halves = [], []
        for seed in range(1, args.seeds + 1):
            started = time.perf_counter()
            samples, t0 = play(model, tape, seed)
            p = tapes.recorded_periods({"periodic": tapes.periodic_metadata(tape, t0)})
            record = periodic_record(
                samples.time_ns,
                samples.position,
                samples.effort,
                p.start_ns,
                p.period_s,
                p.periods,
                p.keep_hz,
                p.settle_s,
            )
            fit = fit_arm_friction(mj, record.deriv, record.torque, bootstrap=PERIODIC_BOOTSTRAP).fit.fit
            values.append(fit.values)
            halves.append(fit.half_width_95)
            inside = np.abs(fit.values - truth) <= fit.half_width_95
            print(f"seed {seed}: {inside.sum()} of {len(truth)} inside ({time.perf_counter() - started:.1f} s)")
        values, halves = np.array(values), np.array(halves)
        inside = np.abs(values - truth) <= halves
        spread = (values - truth).std(axis=0, ddof=1)
        print(f"\nall: {inside.mean():.1%} of {inside.size} intervals cover (nominal 95 %)")
        print(f"{'parameter':34s}{'coverage':>9s}{'hw/1.96sd':>10s}{'bias/sd':>9s}")
        for k in np.argsort(inside.mean(axis=0))[:20]:
            ratio = halves[:, k].mean() / (1.96 * spread[k]) if spread[k] > 0 else float("inf")
            bias = (values[:, k] - truth[k]).mean() / spread[k] if spread[k] > 0 else 0.0
            print(f"{base.base_names[k][:34]:34s}{inside[:, k].mean():9.0%}{ratio:10.2f}{bias:+9.2f}")
        print(f"joints: {', '.join(IIWA_JOINTS)}")


if __name__ == "__main__":
    main()
