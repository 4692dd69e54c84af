"""Wide bounds against bounds from physics, mass-only against the 10-parameter hand, with and without the prior:
how often the fit ends implausible or on a bound, and its held-out error against the nominal model's.

Run:  .venv/bin/python bench/bench_plausibility.py [--seeds 5] [--cases wide,defaults,inertia,prior]

The arm and its logs are test/test_plausibility.py's (shoulder and elbow pitch, a wrist roll with a hand, every
body a fullinertia; hidden truth: masses, joint terms, friction loss, and the hand's centre of mass 4 cm off
across the wrist axis; 3 s PID tracking for training, 2 s held out, 0.2 mrad), one new draw (multisine phases,
noise) per seed. Cases (all identify masses of the upper arm and forearm, damping, armature and friction loss
of every joint):
- `wide`: a user's wide bounds (masses 0.01-10 kg, armature 0-1 kg m^2, damping and friction 0-5) and the
  hand's mass alone (`body_mass`);
- `defaults`: no min/max (bounds from physics), the hand's mass alone;
- `inertia`: no min/max, the hand as `body_inertia` (mass, centre of mass, tensor);
- `prior`: as `inertia`, with `regularization: {weight: 1}`.
Per case: the share of runs with a parameter on a bound, with an implausible value (a mass outside 0.5-2x the
nominal model's, an armature above the torque limit / 100 rad/s^2), held-out position RMS over the nominal
model's (worst joint: median and max over seeds), the share of finite 95 % intervals and of those the share
that covers the truth (masses, joint terms; the hand's mass), seconds per run.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from support.plausibility_arm import JOINTS, LIMITS_NM, TRUE_MASSES, TRUE_TERMS, joint_terms, problem_doc, write_logs
from sysid_ros.core.identify import (
    DRIVE_ACCELERATION_RAD_S2,
    identify,
    problem_from_dict,
)

CASES = ("wide", "defaults", "inertia", "prior")
NOMINAL_MASSES = {"upper": 2.0, "fore": 1.2, "hand": 0.5}
TRUTH = {
    "upper_mass": TRUE_MASSES[0],
    "fore_mass": TRUE_MASSES[1],
    "hand_mass": TRUE_MASSES[2],
    "hand_inertia": TRUE_MASSES[2],
    **{f"{j}_{kind}": values[k] for kind, values in TRUE_TERMS.items() for k, j in enumerate(JOINTS)},
}


def parameters(case: str) -> list[dict]:
    wide = case == "wide"
    out = [
        {"name": f"{b}_mass", "kind": "body_mass", "body": b, **({"min": 0.01, "max": 10.0} if wide else {})}
        for b in ("upper", "fore")
    ]
    if case in ("wide", "defaults"):
        out.append(
            {"name": "hand_mass", "kind": "body_mass", "body": "hand", **({"min": 0.01, "max": 10.0} if wide else {})}
        )
    else:
        out.append({"name": "hand_inertia", "kind": "body_inertia", "body": "hand"})
    return out + joint_terms(wide)


def implausible(result) -> list[str]:
    out = []
    for p in result.parameters:
        if p.kind.startswith("body_"):
            nominal = NOMINAL_MASSES[p.target]
            if not 0.5 * nominal <= p.value[0] <= 2.0 * nominal:
                out.append(f"{p.name} {p.value[0]:.3g} kg")
        elif p.kind == "joint_armature":
            limit = LIMITS_NM[JOINTS.index(p.target)] / DRIVE_ACCELERATION_RAD_S2
            if p.value[0] > limit:
                out.append(f"{p.name} {p.value[0]:.3g} kg m^2")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args(argv)
    cases = args.cases.split(",")
    rows = {
        case: {"bound": 0, "implausible": 0, "ratio": [], "cover": [], "finite": [], "seconds": []} for case in cases
    }
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(1, args.seeds + 1):
            folder = Path(tmp) / f"seed{seed}"
            folder.mkdir()
            write_logs(folder, train_seed=seed, validation_seed=100 + seed)
            for case in cases:
                extra = {"regularization": {"weight": 1.0}} if case == "prior" else {}
                t0 = time.perf_counter()
                result = identify(problem_from_dict(problem_doc(folder, parameters(case), **extra)))
                row = rows[case]
                row["seconds"].append(time.perf_counter() - t0)
                row["bound"] += any("rests on its" in w for w in result.warnings)
                row["implausible"] += bool(implausible(result))
                held, nominal = (
                    result.metrics["validation_position_rms_rad"],
                    result.metrics["validation_position_rms_rad_start"],
                )
                row["ratio"].append(max(held[j] / nominal[j] for j in JOINTS))
                finite = [p for p in result.parameters if p.name in TRUTH and math.isfinite(p.half_width_95[0])]
                row["cover"] += [abs(p.value[0] - TRUTH[p.name]) <= p.half_width_95[0] for p in finite]
                row["finite"] += [math.isfinite(p.half_width_95[0]) for p in result.parameters if p.name in TRUTH]
                print(
                    f"seed {seed} {case:9s} worst held-out/nominal {row['ratio'][-1]:.3g}  "
                    f"implausible {implausible(result)}  warnings {len(result.warnings)}",
                    flush=True,
                )
    print(
        f"\n{'case':10s}{'runs':>6}{'on bound':>10}{'implausible':>13}{'held-out/nominal (median, max)':>32}"
        f"{'finite intervals':>18}{'truth inside (finite)':>23}{'s/run':>8}"
    )
    for case, row in rows.items():
        n = len(row["seconds"])
        print(
            f"{case:10s}{n:>6}{row['bound'] / n:>10.0%}{row['implausible'] / n:>13.0%}"
            f"{statistics.median(row['ratio']):>20.3g}, {max(row['ratio']):<10.3g}"
            f"{sum(row['finite']) / max(len(row['finite']), 1):>18.0%}"
            f"{sum(row['cover']) / max(len(row['cover']), 1):>23.0%}{statistics.median(row['seconds']):>8.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
