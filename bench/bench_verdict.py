"""How often is the verdict `suspect`? False alarms on clean data, detections on damaged data, side by side.

Run:  .venv/bin/python bench/bench_verdict.py [--seeds 20] [--cases clean,early20,...]

The recordings and problems are test/test_identify_verdict.py's (hidden pendulum: 6 s of five sines,
0.5 mrad; arm3: 4 s of PID tracking, 0.2 mrad, 0.25 s windows), one new draw (multisine phases and noise)
per seed. Cases: `clean` (pendulum and arm3: every `suspect` is a false alarm), commands stamped 20 ms
and 300 ms early (`early20`, `early300`), sign-flipped (`flip`), x1000 (`x1000`), a model without the
pendulum's friction loss (`nofriction`) and an arm whose payload is 0.3 kg where the model says 0.1 kg
(`payload`). Per case: the share of `suspect` verdicts, how often each rule fired, the share of
parameters whose 95 % interval covers the truth, the median estimated command offset, seconds per run.
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

from support.arm3 import PHYSICS as ARM3
from support.arm3 import arm3_problem
from support.pendulum import TRUTH as PENDULUM_TRUTH
from support.synthetic import arm3_tracking_record
from support.verdict_cases import TOPIC, damaged, pendulum_problem, pendulum_record
from sysid_ros.core.bags import save_npz
from sysid_ros.core.identify import identify

RULES = {
    "residual": "training residual",
    "offset": "time offset",
    "bound": "rests on its",
    "warm start": "regression warm start",
    "data": "stamped twice",
}
CASES = (
    "pendulum/clean",
    "arm3/clean",
    "pendulum/early20",
    "pendulum/early300",
    "pendulum/flip",
    "pendulum/x1000",
    "pendulum/nofriction",
    "arm3/payload",
)
ARM3_TRUTH = {k.replace(".", "_"): v for k, v in ARM3.items()}


def run(case: str, seed: int, folder: Path):
    robot, damage = case.split("/")
    if robot == "arm3":
        physics = {**ARM3, "payload.mass": 0.3} if damage == "payload" else ARM3
        path = save_npz(folder / f"{damage}_{seed}.npz", arm3_tracking_record(seed, 4.0, physics))
        return identify(arm3_problem(path)), ARM3_TRUTH
    samples, commands = pendulum_record(seed)
    path = save_npz(
        folder / f"{damage}_{seed}.npz",
        samples,
        {TOPIC: commands if damage in ("clean", "nofriction") else damaged(commands, damage)},
    )
    problem = pendulum_problem(path)
    if damage == "nofriction":
        parameters = problem.parameters[:2] + (replace(problem.parameters[2], start=(0.0,), frozen=True),)
        problem = replace(problem, parameters=parameters)
    return identify(problem), PENDULUM_TRUTH


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args(argv)
    header = (
        f"{'case':22s}{'runs':>5s}{'suspect':>9s}"
        + "".join(f"{r:>11s}" for r in RULES)
        + f"{'covered':>9s}{'offset ms':>11s}{'s/run':>7s}"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases.split(","):
            suspect, fired, covered, offsets, seconds = [], {r: 0 for r in RULES}, [], [], 0.0
            for seed in range(1, args.seeds + 1):
                t0 = time.perf_counter()
                result, truth = run(case, seed, Path(tmp))
                seconds += time.perf_counter() - t0
                suspect.append(result.verdict == "suspect")
                for rule, words in RULES.items():
                    fired[rule] += any(words in w for w in result.warnings)
                covered += [
                    abs(p.value[0] - truth[p.name]) <= p.half_width_95[0] for p in result.parameters if not p.frozen
                ]
                offsets.append(result.metrics.get("command_offset_ms", np.nan))
            n = len(suspect)
            rows.append(
                f"{case:22s}{n:5d}{np.mean(suspect):9.0%}"
                + "".join(f"{fired[r] / n:11.0%}" for r in RULES)
                + f"{np.mean(covered):9.0%}{np.nanmedian(offsets):11.3g}{seconds / n:7.1f}"
            )
            print(header if len(rows) == 1 else "", rows[-1], sep="\n" if len(rows) == 1 else "", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
