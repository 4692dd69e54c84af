"""The real-arm workflow on an industrial arm's logs (issue 23, docs/real_arms.md): the arm from an unloaded run,
then the payload from a loaded run of the same trajectory on the identified MJCF with a payload body written at
its origin. Prints the payload's mass and centre against the truth, the arm's link masses, and the time.

The logs are test/industrial_arm.py's (100 Hz, 8-14 ms steps, current-scaled effort, Coulomb friction of
4-28 N m, garbage rows); the problems are test/test_identify_industrial_arm.py's.

    .venv/bin/python bench/bench_industrial_arm.py [--seconds 12] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "test")]

from industrial_arm import LINKS, PAYLOAD_KG, TRUE_LINK_MASS_KG, loaded_and_unloaded

from support.industrial_problems import JOINTS, _arm_problem, _with_tool
from sysid_ros.core.files import model_path
from sysid_ros.core.identify import identify, problem_from_dict, write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.process_time()
        unloaded, loaded = loaded_and_unloaded(tmp / "runs", seed=args.seed, seconds=args.seconds)
        t1 = time.process_time()
        spec = mujoco.MjSpec.from_file(str(model_path("ur10e_like")))
        spec.delete(spec.body("payload"))
        (tmp / "arm.xml").write_text(spec.to_xml())
        arm = identify(problem_from_dict(_arm_problem(str(tmp / "arm.xml"), str(unloaded.path))))
        t2 = time.process_time()
        mjcf = write_results(arm, tmp / "arm")["mjcf"]
        (tmp / "tool.xml").write_text(_with_tool(mjcf.read_text()))
        doc = {
            "model": str(tmp / "tool.xml"),
            "joints": list(JOINTS),
            "segment_s": 0.25,
            "training": [{"path": str(loaded.path), "control": "effort"}],
            "initial_state": "measured",
            "optimizer": {"max_iters": 20},
            "parameters": [{"name": "tool", "kind": "body_mass_com", "body": "tool"}],
        }  # bounds from physics
        payload = identify(problem_from_dict(doc))
        t3 = time.process_time()
    (p,) = payload.parameters
    print(
        f"{args.seconds:g} s runs, seed {args.seed}; CPU s: logs {t1 - t0:.1f}, arm {t2 - t1:.1f}, "
        f"payload {t3 - t2:.1f}"
    )
    print(
        f"payload mass {p.value[0]:.4f} kg (truth {PAYLOAD_KG}, {100 * (p.value[0] / PAYLOAD_KG - 1):+.2f} %), "
        f"95 % half-width {p.half_width_95[0]:.4f} kg; bounds {p.min_value[0]:.3g}..{p.max_value[0]:.3g} kg"
    )
    print(
        "payload centre (m, truth 0 0 0): "
        + " ".join(f"{c:+.4f}+-{h:.4f}" for c, h in zip(p.value[1:], p.half_width_95[1:]))
    )
    by_name = {q.name: q for q in arm.parameters}
    for body, truth in zip(LINKS[1:], TRUE_LINK_MASS_KG[1:]):
        q = by_name[f"{body}_mass"]
        print(f"  {body:15s} {q.value[0]:7.3f} kg (truth {truth:6.3f}, {100 * (q.value[0] / truth - 1):+5.1f} %)")
    print(
        f"verdicts: arm {arm.verdict}, payload {payload.verdict}; "
        f"garbage warnings: {sum('garbage' in w for w in arm.warnings + payload.warnings)}"
    )
    print(f"mean |com| error {np.mean(np.abs(p.value[1:])):.4f} m")


if __name__ == "__main__":
    main()
