"""How often do the 95 % intervals cover the truth? The hidden pendulum over many seeds, six estimators.

Run:  .venv/bin/python bench/bench_coverage.py [--seeds 40]   (about 5 min for 40 seeds on 2 shared cores)
      .venv/bin/python bench/bench_coverage.py --iiwa [--seeds 5] [--seconds 10]   (needs pybullet)

Each seed draws new multisine phases (five sines 0.2-3 Hz, peak 2.5 N m, 10 s at 500 Hz) and new 0.5 mrad
angle noise (the recording is test/test_interval_coverage.py's). Per estimator and parameter it prints the
coverage, the mean half-width, the bias and spread of the errors, the ratio half-width / (1.96 x spread)
(1 = the interval is as wide as the actual errors; < 1 too narrow) and the share of fits that warned.

`--iiwa` runs the bigger KUKA iiwa identification of test/test_identify_iiwa.py (hidden payload and
damping, 0.25 s windows from measured states) on longer records and several seeds, and prints each
parameter's error against its half-width.
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

from support.coverage import NAMES, TRUTH, covered, pipeline_interval, regression_interval


def table(label: str, values: np.ndarray, half: np.ndarray, flagged: np.ndarray, seconds: float) -> None:
    hits = covered(values, half)
    err = values - TRUTH
    spread = err.std(axis=0, ddof=1)
    print(f"\n{label}  ({len(values)} seeds, {seconds / len(values):.2f} s per fit)")
    print(
        f"  {'parameter':10s}{'coverage':>10s}{'half-width':>12s}{'bias':>10s}{'spread':>10s}"
        f"{'hw/1.96sd':>11s}{'flagged':>9s}"
    )
    for j, name in enumerate(NAMES):
        print(
            f"  {name:10s}{hits[:, j].mean():10.0%}{100 * half[:, j].mean() / TRUTH[j]:11.3f}%"
            f"{100 * err[:, j].mean() / TRUTH[j]:+9.3f}%{100 * spread[j] / TRUTH[j]:9.3f}%"
            f"{half[:, j].mean() / (1.96 * spread[j]):11.2f}{flagged[:, j].mean():9.0%}"
        )
    print(f"  all{'':7s}{hits.mean():10.0%}")


def iiwa(seeds: range, seconds: float) -> None:
    """Payload and seven dampings of the iiwa per seed: error, half-width, and their ratio."""
    import support.iiwa as arm
    from sysid_ros.core.bags import save_npz
    from sysid_ros.core.identify import identify

    truth = {f"joint{k + 1}_damping": d for k, d in enumerate(arm.TRUE_DAMPING)} | {"payload_mass": arm.TRUE_PAYLOAD_KG}
    errors, halves = [], []
    with tempfile.TemporaryDirectory() as folder:
        model = arm.iiwa_mjcf(Path(folder) / "iiwa.xml", payload=arm.NOMINAL_PAYLOAD)
        for seed in seeds:
            t0 = time.perf_counter()
            train = save_npz(Path(folder) / f"train{seed}.npz", arm.record(model, 100 + seed, seconds, arm.HIDDEN))
            params = arm.damping_parameters() + [
                {"name": "payload_mass", "kind": "body_mass", "body": "payload", "min": 0.05, "max": 3.0, "start": 0.5}
            ]
            result = identify(arm.problem(model, train, None, params))
            by_name = {p.name: p for p in result.parameters}
            errors.append([by_name[n].value[0] / v - 1 for n, v in truth.items()])
            halves.append([by_name[n].half_width_95[0] / v for n, v in truth.items()])
            rms = result.metrics["training_position_rms_rad"].values()
            print(
                f"seed {seed}: {time.perf_counter() - t0:.1f} s, {result.metrics['training_segments']} windows, "
                f"{result.metrics['parameter_points']} parameter points, window RMS {min(rms) * 1e3:.2f}-"
                f"{max(rms) * 1e3:.2f} mrad"
            )
    err, half = np.array(errors), np.array(halves)
    print(
        f"\niiwa, {seconds:g} s records, {len(err)} seeds: relative error (mean |e|, max |e|), half-width, "
        "coverage, |e| / half-width"
    )
    for j, name in enumerate(truth):
        ratio = np.abs(err[:, j]) / half[:, j]
        print(
            f"  {name:16s}{100 * np.abs(err[:, j]).mean():8.3f}%{100 * np.abs(err[:, j]).max():8.3f}%"
            f"{100 * half[:, j].mean():9.4f}%{np.mean(ratio <= 1):8.0%}{np.median(ratio):8.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=None, help="default 40 (pendulum), 5 (--iiwa)")
    parser.add_argument("--iiwa", action="store_true", help="the 7-joint arm instead of the pendulum")
    parser.add_argument("--seconds", type=float, default=10.0, help="iiwa record length")
    args = parser.parse_args()
    if args.iiwa:
        iiwa(range(args.seeds or 5), args.seconds)
        return
    seeds = range(args.seeds or 40)
    print(f"hidden pendulum: mass {TRUTH[0]} kg, damping {TRUTH[1]} N m s/rad, friction loss {TRUTH[2]} N m")
    for filter_window_s in (0.2, 0.1):
        t0 = time.perf_counter()
        out = [regression_interval(s, filter_window_s=filter_window_s) for s in seeds]
        flags = np.array([f for _, _, f in out])
        table(
            f"regression, quartic {filter_window_s} s derivatives, block bootstrap",
            np.array([v for v, _, _ in out]),
            np.array([h for _, h, _ in out]),
            flags,
            time.perf_counter() - t0,
        )
    t0 = time.perf_counter()
    out = [regression_interval(s, filter_torque=False) for s in seeds]
    table(
        "regression, quartic 0.2 s, torque not filtered (before filter_torque)",
        np.array([v for v, _, _ in out]),
        np.array([h for _, h, _ in out]),
        np.array([f for _, _, f in out]),
        time.perf_counter() - t0,
    )
    with tempfile.TemporaryDirectory() as folder:
        for x0, mode, label in (
            ("estimate", "weight", "mujoco.sysid pipeline, estimated start state"),
            ("measured", "weight", "mujoco.sysid pipeline, measured start state, weighted by its noise (default)"),
            ("measured", "propagate", "mujoco.sysid pipeline, measured start state, its noise propagated"),
        ):
            t0 = time.perf_counter()
            out = [pipeline_interval(s, Path(folder), initial_state=x0, start_noise=mode) for s in seeds]
            values, half = np.array([o[0] for o in out]), np.array([o[1] for o in out])
            seconds = time.perf_counter() - t0
            table(label, values, half, ~np.array([o[2] for o in out]), seconds)
            if mode == "propagate":  # the library's own half-widths, before the start-state term
                table(
                    "  the same, library intervals only (white residuals)",
                    values,
                    half / np.array([o[3] for o in out]),
                    ~np.array([o[2] for o in out]),
                    seconds,
                )


if __name__ == "__main__":
    main()
