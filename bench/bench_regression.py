"""Accuracy of the linear estimator on lesson 18.1's pendulum: truth, the lesson's table, and ours.

Run:  .venv/bin/python bench/bench_regression.py   (about 10 s)

The plant and record come from test/test_regression.py (one definition of the pendulum for tests and
bench): 10 s at 500 Hz, five-sine torque (seed 1), 0.5 mrad angle noise (seed 0 = the lesson's record;
seeds 0-7 for the spread).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from support.open_loop import validate_open_loop
from support.regression_pendulum import LENGTH_M, NOISE_RAD, ROTOR_KG_M2, TRUTH, pendulum, pendulum_with, record
from sysid_ros.core.errors import DataError
from sysid_ros.core.linear import (
    PENDULUM_TERMS,
    RowSelection,
    fit_pendulum,
)
from sysid_ros.core.signals import finite_differences, savgol_derivatives

LESSON = {  # lesson 18.1's printed estimates on the same record
    "finite differences (lesson)": (0.0007, 0.1006, 0.0514),
    "Savitzky-Golay cubic 0.1 s (lesson)": (1.3266, 0.0868, 0.0417),
    "same, without samples < 0.1 rad/s (lesson, noise seed 1)": (1.3238, 0.0797, 0.0501),
}
ALL_ROWS = RowSelection(moving_speed_rad_s=0.0, slow_speed_rad_s=0.0)  # the lesson's: every sample
DEFAULT_ROWS = RowSelection()  # moving across the window (0.02 rad/s) and faster than 0.1 rad/s
# (label, derivative (polyorder, window s) or "fd", compensate noise, row selection)
METHODS = [
    ("finite differences, all samples", "fd", False, ALL_ROWS),
    ("SG cubic 0.1 s, OLS, all samples (the lesson's method)", (3, 0.1), False, ALL_ROWS),
    ("SG cubic 0.1 s, OLS, without slow samples", (3, 0.1), False, DEFAULT_ROWS),
    ("quartic 0.11 s (seed 004), OLS", (4, 0.11), False, DEFAULT_ROWS),
    ("quartic 0.11 s, noise-compensated", (4, 0.11), True, DEFAULT_ROWS),
    ("quartic 0.2 s, noise-compensated (ours)", (4, 0.2), True, DEFAULT_ROWS),
    ("sextic 0.3 s, noise-compensated", (6, 0.3), True, DEFAULT_ROWS),
]


def fit(q: np.ndarray, torque: np.ndarray, method: object, compensate: bool, selection: RowSelection):
    h = pendulum().opt.timestep
    deriv = finite_differences(q, h) if method == "fd" else savgol_derivatives(q, h, method[1], method[0])
    return fit_pendulum(
        deriv,
        torque,
        length_m=LENGTH_M,
        rotor_inertia_kg_m2=ROTOR_KG_M2,
        compensate_noise=compensate,
        selection=selection,
    )


def pct(values: np.ndarray) -> str:
    truth = np.array([TRUTH[k] for k in PENDULUM_TERMS])
    return "".join(f"{100 * (v / t - 1):+9.2f}%" for v, t in zip(values, truth))


def main() -> None:
    start = time.perf_counter()
    truth = np.array([TRUTH[k] for k in PENDULUM_TERMS])
    torque, _, q = record()
    print(f"pendulum, 10 s at 500 Hz, {1000 * NOISE_RAD:.1f} mrad noise; columns: mass, damping, friction loss\n")
    print(f"{'':60s}{'m (kg)':>9s}{'b':>9s}{'f (N m)':>9s}   {'errors':>30s}")
    print(f"{'truth':60s}" + "".join(f"{v:9.4f}" for v in truth))
    for label, values in LESSON.items():
        print(f"{label:60s}" + "".join(f"{v:9.4f}" for v in values) + "   " + pct(np.array(values)))
    print("\nours on the lesson's record (noise seed 0), 95 % block-bootstrap half-widths in %:")
    for label, method, compensate, slow in METHODS:
        result = fit(q, torque, method, compensate, slow).fit
        hw = "".join(f"{100 * h / t:7.1f}" for h, t in zip(result.half_width_95, truth))
        print(f"{label:60s}" + "".join(f"{v:9.4f}" for v in result.values) + "   " + pct(result.values) + f"   +-{hw}")
    print("\nspread over 8 noise draws (seeds 0-7): RMS error in % (mass, damping, friction loss), warnings raised")
    for label, method, compensate, slow in METHODS[1:]:
        errs, warned = [], 0
        for seed in range(8):
            result = fit(record(noise_seed=seed)[2], torque, method, compensate, slow).fit
            errs.append(100 * (result.values / truth - 1))
            warned += bool(result.warnings)
        rms = np.sqrt(np.mean(np.square(errs), axis=0))
        print(f"{label:60s}" + "".join(f"{v:9.2f}" for v in rms) + f"   {warned}/8 with warnings")

    ours = fit(q, torque, (4, 0.2), True, DEFAULT_ROWS).fit
    held_torque, _, held_q = record(torque_seed=7, noise_seed=2)
    print("\nheld-out record (torque seed 7), open-loop angle RMS error (lesson: 2.57 mrad for its SG estimate):")
    for label, params in (
        ("true parameters (the noise floor)", TRUTH),
        ("ours", ours.as_dict()),
        (
            "nominal guess (1.0 kg, no damping or friction)",
            {"mass_kg": 1.0, "damping_nm_s_rad": 0.0, "friction_nm": 0.0},
        ),
    ):
        v = validate_open_loop(pendulum_with(params), held_torque, held_q)
        print(f"  {label:58s}{1000 * v.rms_rad:8.2f} mrad   first second {1000 * v.rms_first_s_rad:6.2f} mrad")

    weak_torque, _, weak_q = record(amplitude_nm=0.25)
    print("\nweak excitation (0.25 N m):")
    try:
        fit(weak_q, weak_torque, (4, 0.2), True, DEFAULT_ROWS)
    except DataError as exc:
        print(f"  with slow samples left out: refused: {exc}")
    weak = fit(weak_q, weak_torque, (4, 0.2), True, ALL_ROWS).fit
    print("  keeping them:" + "".join(f"{v:9.4f}" for v in weak.values) + "   " + pct(weak.values))
    for w in weak.warnings:
        print(f"    warning: {w}")
    print(f"\n({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
