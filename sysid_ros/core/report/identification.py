"""The identification report: verdict and warnings first, the parameter table, then per joint measured vs
simulated with the residual and its noise band (training and held out, windows marked), the excitation
(spectrum, condition number) and the cost per iteration. Drawn from the results document (`identified.yaml`)
and the traces (`report_data.npz`), so `sysid-ros report DIR` draws the same page again from the results."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError
from ..files import load_npz, load_yaml
from .page import Page, back_to_back, figure, line, mark_windows

DATA_FILE = "report_data.npz"
COLORS = {"measured": "#1f77b4", "simulated": "#d62728", "band": "rgba(44,160,44,0.18)"}
SPLITS = {"training": "training", "validation": "held out"}


@dataclass(frozen=True)
class Trace:
    """Measured and predicted joint positions of one segment, for plots."""

    split: str
    segment: str
    joints: tuple[str, ...]
    time_s: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray


def _vec(v: Any) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _interval(value: Any, half: Any) -> str:
    return ", ".join(
        f"[{v - h:.6g}, {v + h:.6g}]" if h is not None and math.isfinite(h) else "none"
        for v, h in zip(_vec(value), _vec(half))
    )


def verdict_box(page: Page, document: dict) -> None:
    """Verdict and warnings, first thing on the page."""
    verdict, warnings = document.get("verdict"), list(document.get("warnings") or [])
    if verdict is None:
        page.verdict("no verdict recorded with these results", "none", warnings)
    else:
        level = "ok" if verdict == "ok" and not warnings else ("warn" if verdict == "ok" else "bad")
        page.verdict(f"verdict: {verdict}" + (f" ({len(warnings)} warnings)" if warnings else ""), level, warnings)


UNITS = {
    "body_mass": "kg",
    "body_mass_com": "kg; m, m, m",
    "body_inertia": "kg; m x3; kg m^2 x6",
    "joint_damping": "N m s/rad",
    "joint_frictionloss": "N m",
    "joint_armature": "kg m^2",
    "joint_effort_offset": "N m",
    "actuator_gain": "-",
    "signal_delay": "s",
    "signal_gain": "-",
    "signal_bias": "the signal's",
}
"""Units of each parameter kind's values on a hinge joint (a slide joint's: N s/m, N, kg)."""


def parameter_table(page: Page, parameters: dict) -> None:
    rows, flagged = [], []
    for name, p in parameters.items():
        rows.append(
            [
                name,
                f"{p['kind']} {p['target']}",
                UNITS.get(p["kind"], ""),
                p["value"],
                p["half_width_95"],
                _interval(p["value"], p["half_width_95"]),
                p["start"],
                p.get("warm_start"),
                f"{p['min']} .. {p['max']}",
                "frozen" if p["frozen"] else ("yes" if p["identifiable"] else "NO"),
            ]
        )
        flagged.append(not p["identifiable"])
    page.table(
        [
            "name",
            "what",
            "unit",
            "value",
            "95 % half-width",
            "95 % interval",
            "start",
            "regression warm start",
            "bounds",
            "identifiable",
        ],
        rows,
        flagged,
    )


def _cell(term: Any) -> str:
    return f"{term['value']:.4g} +- {term['half_width_95']:.2g}" if isinstance(term, dict) else str(term)


def torque_tables(page: Page, document: dict) -> None:
    """Held-out joint torque RMS per joint and model, and the regression's friction per joint (arm results)."""
    check = (document.get("metrics") or {}).get("held_out_torque_rms_nm")
    if not check:
        return
    labels = [
        k
        for k in ("nominal", "start_values", "window_fit", "torque_space", "identified", "regression_friction")
        if k in check
    ]
    page.heading("Held-out joint torque")
    page.text(
        f"RMS of measured minus predicted joint torque (N m) on {check.get('held_out')} "
        f"({check.get('samples')} samples): the model file, the window fit (or the start values, when the "
        "torque-space fit stood alone and the window fit did not run), the torque-space fit, the identified model "
        "(the one the MJCF carries), the regression with friction."
    )
    joints = list(check[labels[0]])
    page.table(
        ["joint", *labels],
        [[j, *(f"{check[k][j]:.4g}" for k in labels)] for j in joints],
        [check.get("identified", {}).get(j, 0) > check["nominal"][j] for j in joints],
    )
    friction = document.get("friction") or {}
    if friction:
        page.table(
            ["joint", "offset (N m)", "viscous (N m s/rad)", "coulomb (N m)", "v_s (rad/s)", "in MuJoCo"],
            [
                [
                    j,
                    _cell(f["offset"]),
                    _cell(f["viscous"]),
                    _cell(f["coulomb"]),
                    f"{f['velocity_scale_rad_s']:.3g}",
                    "damping, frictionloss, joint_effort_offset; not: " + f["mujoco"]["not_representable"],
                ]
                for j, f in friction.items()
            ],
        )


def joint_plots(page: Page, traces: Sequence[Trace], noise_rad: float | None) -> None:
    """Per split and joint: measured vs simulated over the windows shown, then the residual in its noise band."""
    for split in ("training", "validation"):
        group = [tr for tr in traces if tr.split == split]
        if not group:
            continue
        t, windows = back_to_back([tr.time_s for tr in group], [tr.segment for tr in group])
        for j, joint in enumerate(group[0].joints):
            meas = np.concatenate([tr.measured[:, j] for tr in group])
            pred = np.concatenate([tr.predicted[:, j] for tr in group])
            fig = figure(
                f"{joint}, {SPLITS[split]}: measured vs simulated", "time in the windows shown [s]", "position [rad]"
            )
            line(fig, t, meas, "measured", color=COLORS["measured"])
            line(fig, t, pred, "simulated", dash="dash", color=COLORS["simulated"])
            mark_windows(fig, windows)
            page.plot(fig)
            err = (meas - pred) * 1e3
            rms = float(np.sqrt(np.mean(err**2)))
            band = f"; band: +-2 sigma of the declared noise {noise_rad * 1e3:.3g} mrad" if noise_rad else ""
            fig = figure(
                f"{joint}, {SPLITS[split]}: residual (RMS {rms:.3g} mrad{band})",
                "time in the windows shown [s]",
                "measured - simulated [mrad]",
                height=230,
            )
            if noise_rad:
                fig.add_hrect(y0=-2e3 * noise_rad, y1=2e3 * noise_rad, fillcolor=COLORS["band"], line_width=0)
            line(fig, t, err, "residual", color="#444", width=1.0)
            mark_windows(fig, windows)
            page.plot(fig)


def periodogram(x: np.ndarray, fs: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided power spectral density of x (mean removed, Hann window), as scipy.signal.periodogram."""
    w = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(len(x)) / len(x))  # periodic Hann, as scipy.signal
    spectrum = np.fft.rfft((x - np.mean(x)) * w)
    power = np.abs(spectrum) ** 2 / (fs * np.sum(w**2))
    power[1 : len(x) - len(power) + 1] *= 2.0  # one-sided: every bin but DC (and Nyquist when len(x) is even)
    return np.fft.rfftfreq(len(x), 1.0 / fs), power


def spectrum_plot(page: Page, traces: Sequence[Trace]) -> None:
    """Power spectrum of the measured training positions (averaged over the windows): what the motion excited."""
    group = [tr for tr in traces if tr.split == "training" and len(tr.time_s) > 16]
    if not group:
        return
    fig = figure(
        "excitation: spectrum of the measured training positions",
        "frequency [Hz]",
        "power [rad^2/Hz]",
        log_x=True,
        log_y=True,
    )
    for j, joint in enumerate(group[0].joints):
        spectra = [periodogram(tr.measured[:, j], 1.0 / float(np.median(np.diff(tr.time_s)))) for tr in group]
        f = spectra[0][0]
        p = np.mean([np.interp(f, g, q) for g, q in spectra], axis=0)
        line(fig, f[1:], np.maximum(p[1:], 1e-300), joint)
    page.plot(fig)


def report_page(
    document: dict, traces: Sequence[Trace], objective: Sequence[float], noise_rad: float | None, name: str
) -> Page:
    """The identification report from the results document, the traces, the cost history and the noise."""
    page = Page(f"Identification report: {name}")
    verdict_box(page, document)
    notes = document.get("notes") or []
    page.text(f"Model {document.get('model')}; {len(document['parameters'])} parameters.")
    page.heading("Parameters")
    parameter_table(page, document["parameters"])
    page.items(notes)
    torque_tables(page, document)
    page.heading("Measured vs simulated")
    joint_plots(page, traces, noise_rad)
    page.heading("Excitation")
    metrics = document.get("metrics") or {}
    cond = metrics.get("jacobian_condition_number")
    page.text(
        "Condition number of the parameter Jacobian (columns scaled to unit norm): "
        + (f"{cond:.4g}" if isinstance(cond, (int, float)) else "not recorded")
        + " (large: some parameter combination is barely excited)."
    )
    spectrum_plot(page, traces)
    if objective:
        fig = figure("cost per iteration", "iteration", "cost", height=250, log_y=True)
        line(fig, np.arange(len(objective)), np.asarray(objective), "cost", mode="lines+markers")
        page.plot(fig)
    page.heading("Metrics")
    page.table(["metric", "value"], [[k, _metric(k, v)] for k, v in metrics.items() if k != "held_out_torque_rms_nm"])
    return page


def _metric(key: str, value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(
            f"{k}: {v * 1e3:.4g} mrad" if key.endswith("_rad") and isinstance(v, float) else f"{k}: {v}"
            for k, v in value.items()
        )
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def save_report_data(
    path: Path, traces: Sequence[Trace], objective: Sequence[float], noise_rad: float | None, name: str
) -> None:
    """What the page draws beyond `identified.yaml`, for `regenerate`."""
    arrays: dict[str, Any] = {
        "objective": np.asarray(objective, dtype=float),
        "noise_position_rad": np.asarray(noise_rad or 0.0),
        "name": np.asarray(name),
    }
    for k, tr in enumerate(traces):
        arrays[f"trace{k}_meta"] = np.asarray([tr.split, tr.segment, *tr.joints])
        for field in ("time_s", "measured", "predicted"):
            arrays[f"trace{k}_{field}"] = np.asarray(getattr(tr, field))
    np.savez_compressed(path, **arrays)


def regenerate(folder: Path) -> Path:
    """Draw `report.html` again from `identified.yaml` and `report_data.npz` in `folder`."""
    try:
        document = load_yaml(folder / "identified.yaml", "identified.yaml")
        data = load_npz(folder / DATA_FILE)
    except ConfigError as exc:
        raise DataError(f"cannot read identification results in {folder}: {exc}") from None
    traces = []
    k = 0
    while f"trace{k}_meta" in data:
        split, segment, *joints = [str(s) for s in data[f"trace{k}_meta"]]
        trace = Trace(
            split,
            segment,
            tuple(joints),
            *(np.asarray(data[f"trace{k}_{f}"], dtype=float) for f in ("time_s", "measured", "predicted")),
        )
        if not len(trace.time_s) == len(trace.measured) == len(trace.predicted):
            raise DataError(f"{DATA_FILE} trace {k}: time, measured and predicted differ in length")
        traces.append(trace)
        k += 1
    noise = float(data["noise_position_rad"]) or None
    return report_page(document, traces, data["objective"].tolist(), noise, str(data["name"])).write(
        folder / "report.html"
    )
