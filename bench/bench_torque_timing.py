"""How much the torque-space fit depends on when the torque was stamped, on arm3 (a PID drive holding its effort
2 ms, logged at 500 Hz, test/support/arm3.py): the numbers docs/identification.md gives for `window_fit: auto`.

Run:  .venv/bin/python bench/bench_torque_timing.py [--seeds 1]   (~10 s per seed, one process)

Per seed (training seed, held-out seed + 1), `identify` with `window_fit: auto` (what it carries, and why the
window fit ran) and `always`, and the torque-space fit alone on the training rows three ways: as logged, each
effort read half a sample later (the mean of itself and the one before, `torque_fit.late_torque`'s reading), and
with its noise-only intervals; printed per value: the truth, the error of each, the noise half-width and the
move in noise half-widths (`torque_space.timing_sensitive`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "test")]

from support.arm3 import TRUTH, _record, arm3_problem
from sysid_ros.core.bags import save_npz
from sysid_ros.core.identify import identify
from sysid_ros.core.identify.stages import (
    torque_fit,
    validation,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args()
    captured: dict = {}
    choose = validation.choose_on_training

    def spy(spec, parameters, model, maps, parts, widths=None):  # the torque-space fit's inputs, kept
        captured.update(spec=spec, parameters=parameters, model=model, maps=maps, parts=parts)
        return choose(spec, parameters, model, maps, parts, widths)

    validation.choose_on_training = spy
    for seed in range(1, args.seeds + 1):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            save_npz(d / "train.npz", _record(seed, 6.0))
            save_npz(d / "val.npz", _record(seed + 1, 3.0))
            problem = arm3_problem(d / "train.npz", d / "val.npz")
            auto = identify(replace(problem, window_fit="auto"))
            always = identify(problem)
        space = auto.torque_space
        runs = [n for n in auto.notes if n.startswith("the window fit runs")]
        print(f"seed {seed}: auto carries the {auto.metrics['identified_model']}, {space['form']} form")
        print(f"  {runs[0] if runs else 'the torque-space fit stands alone'}")
        c = captured
        rows = torque_fit.torque_fit_rows(c["model"], c["maps"], c["parts"], space["filter_window_s"])
        alone = torque_fit.fit_torque_space(c["spec"], c["parameters"], rows, c["model"], form=space["form"])
        late_rows = replace(rows, tau=torque_fit.late_torque(c["model"], c["maps"], c["parts"], rows))
        late = torque_fit.fit_torque_space(c["spec"], c["parameters"], late_rows, c["model"], form=space["form"])
        by_auto = {p.name: p.value[0] for p in auto.parameters}
        by_always = {p.name: p.value[0] for p in always.parameters}
        heads = ("truth", "auto", "always", "alone", "late", "noise hw", "move/hw")
        print(f"  {'value':18} " + " ".join(f"{h:>8}" for h in heads))
        for name, truth in TRUTH.items():
            target = name.rsplit("_", 1)[0]
            mass = name.endswith("_mass")
            a, b = (f.bodies[target][0] if mass else f.joints[target]["damping"] for f in (alone, late))
            half = alone.intervals[target if mass else f"{target}.damping"][0]
            errors = [v / truth - 1 for v in (by_auto[name], by_always[name], a, b)]
            print(
                f"  {name:18} {truth:8.3f} " + " ".join(f"{e:+8.2%}" for e in errors) + f" {half:8.4f} "
                f"{abs(b - a) / half:8.1f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
