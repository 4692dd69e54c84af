"""The tuning report (`tuner/<run>/report.html`): the proposal and, for each joint, each stage's plays (tape
and measured motion) with the stage's decision, the sweep's rungs against the ceiling, the refine
candidates (twin-screened or played), the held-out responses before and after, and the canary's verdict.

Drawn from the run folder: `proposal.yaml`, `play_NNNN_<tape>.yaml` (what was played) and the measured
motion of each play, `play_NNNN_<tape>.npz` (saved by the ROS plant as it read the play's bag) or, where that
file is missing, the bag itself; a canary folder holds `canary.yaml` and its own plays.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..bags import read_joint_states, read_metadata
from ..errors import ConfigError, DataError
from ..files import load_npz, load_yaml
from ..tapes import Tape, sample
from .page import Page, back_to_back, figure, line, mark_windows

PLAY_FIELDS = ("time_s", "position", "velocity", "torque", "reference")
PLAY_NAME = re.compile(r"play_(\d+)_(.+)\.yaml$")
GAIN_UNITS = {"p": "N m/rad", "i": "N m/(rad s)", "d": "N m s/rad", "i_clamp": "N m", "ff_velocity_scale": "N m s/rad"}
"""Units of a joint's gains (`gains.<joint>.<gain>`, a revolute joint's effort output)."""
FEEDFORWARD = (
    "The host feed-forward is part of the proposal: the torque the host adds to the controller's output "
    "from the joint model and the reference, tau_ff = J qdd_ref + b qd_ref + tc tanh(qd_ref / band) + "
    "gs sin q_ref + gc cos q_ref + offset (the terms below, units in their names). The proposal's costs "
    "and the canary were measured with it: gains deployed without it are not what was proven."
)
COST = (
    "Cost, on the same tapes: stop error (90th percentile of |error| while the reference is still) over as "
    "found's, plus tracking error (RMS of the error while the reference moves) over as found's (each as-found "
    "figure floored at 0.05 mrad; the stop error also at 10 % of the joint's stop allocation). As found scores "
    "about 2; lower is better. A cost ratio is a cost over as found's cost on the same tapes: 1 is no change, "
    "0.5 half the error."
)
CANARY_RULE = (
    "Keep rule: the change is kept only if the live cost ratio <= 1 - (1 - predicted ratio) / 2, i.e. at "
    "least half of the predicted improvement shows on the robot; an aborted or non-finite run rolls back."
)
STAGES = (
    ("identify", "1. identify: excitation tapes, the model fitted to them"),
    ("sweep", "2. sweep: steps at rising stiffness until it rings (the deploy ceiling)"),
    ("refine", "3. refine: evaluation tapes under candidate gains"),
    ("verify", "4. verify: held-out tapes, as found and proposed"),
    ("canary", "canary: held-out tapes under the applied gains"),
)


MOTION_ORDER = ("identify", "as found", "sweep", "refine", "verify")
"""The tuner's stages in the order they move the joint (seconds of motion by stage)."""


def save_play(path: Path, telemetry: dict[str, Any]) -> None:
    """What a play measured, per joint (a `Telemetry` each), next to its tape: `play_NNNN_<tape>.npz`."""
    arrays = {}
    for joint, t in telemetry.items():
        for name in PLAY_FIELDS:
            arrays[f"{joint}/{name}"] = np.asarray(getattr(t, name), dtype=np.float32)
        arrays[f"{joint}/gains"] = np.asarray([t.kp, t.kd])
        arrays[f"{joint}/aborted"] = np.asarray(t.aborted or "")
    np.savez_compressed(path, **arrays)


def _from_bag(play: dict, bag: str, joints: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
    """The measured motion of a play read back from its bag, on the tape's time (no npz saved)."""
    meta: dict = {}
    for doc in read_metadata(bag):
        if isinstance(doc, dict):
            meta.update(doc)
    read = read_joint_states(bag, joints=list(joints), time_source="header", on_gap="split")
    segments = [s for s in read.segments if len(s)]
    if not segments or "start_ns" not in meta:
        raise DataError(f"no joint states of {list(joints)} or no start time in {bag}")
    stamps = np.concatenate([s.time_ns for s in segments])
    t = (stamps - int(meta["start_ns"])) * 1e-9
    tape = Tape.from_dict(play["tape"])
    ref = sample(tape, np.clip(t, 0.0, None)).position
    out = {}
    for k, joint in enumerate(joints):
        out[joint] = {
            "time_s": t,
            "reference": ref[:, tape.joints.index(joint)] if joint in tape.joints else t * 0,
            **{f: np.concatenate([getattr(s, f)[:, k] for s in segments]) for f in ("position", "velocity")},
        }
    return out


def load_plays(folder: Path, bags: Sequence[str], joints: Sequence[str]) -> list[tuple[str, dict]]:
    """(tape name, {joint: {field: array}}) of every play in `folder`, in order."""
    plays = []
    for path in sorted(folder.glob("play_*.yaml")):
        match = PLAY_NAME.match(path.name)
        if not match:
            continue
        index, name = int(match.group(1)), match.group(2)
        measured = path.with_suffix(".npz")
        if measured.is_file():
            by_joint: dict[str, dict] = {}
            for key, values in load_npz(measured).items():
                if "/" not in key:
                    raise DataError(f"{measured.name}: array {key!r} is not named <joint>/<field>")
                joint, field = key.rsplit("/", 1)
                by_joint.setdefault(joint, {})[field] = values
        elif index < len(bags):
            by_joint = _from_bag(load_yaml(path, "play file"), bags[index], joints)
        else:
            raise DataError(f"{path.name}: neither {measured.name} nor its bag in the proposal")
        plays.append((name, by_joint))
    return plays


def stage_of(name: str, held_out: set[str]) -> str | None:
    if name == "move_to_start":
        return None
    if name.startswith(("ident", "delay")):
        return "identify"
    if name.startswith("steps"):
        return "sweep"
    return "verify" if name in held_out else "refine"


def stage_plot(page: Page, title: str, plays: Sequence[tuple[str, dict]], joint: str, labels: Sequence[str]) -> None:
    """Reference and measured position of the plays, back to back, each play marked."""
    runs = [(label, p[joint]) for label, (_, p) in zip(labels, plays) if joint in p]
    if not runs:
        return
    t, windows = back_to_back([r["time_s"] for _, r in runs], [label for label, _ in runs])
    fig = figure(title, "time in the plays shown [s]", "position [rad]", height=280)
    line(fig, t, np.concatenate([r["reference"] for _, r in runs]), "tape (reference)", color="#999")
    line(fig, t, np.concatenate([r["position"] for _, r in runs]), "measured", color="#1f77b4")
    mark_windows(fig, windows)
    page.plot(fig)


def rungs_plot(page: Page, joint: str, details: dict) -> None:
    rungs, ceiling = details.get("rungs") or [], details.get("deploy_ceiling") or {}
    limits = details.get("limits") or {}
    if not rungs:
        return
    fig = figure(
        f"{joint}: sweep rungs (ceiling wn {ceiling.get('wn_max_rad_s', float('nan')):.4g} rad/s, "
        f"rule {ceiling.get('rule')})",
        "loop natural frequency wn [rad/s]",
        "ringing [mrad]",
        height=280,
    )
    line(fig, [r["wn_rad_s"] for r in rungs], [r["ringing_mrad"] for r in rungs], "ringing", mode="lines+markers")
    if ceiling.get("wn_max_rad_s"):
        fig.add_vline(
            x=ceiling["wn_max_rad_s"],
            line_color="#d62728",
            line_dash="dash",
            annotation_text="ceiling",
            annotation_position="top left",
        )
    if limits.get("ringing_mrad"):
        fig.add_hline(
            y=limits["ringing_mrad"],
            line_color="#ff7f0e",
            line_dash="dot",
            annotation_text="ringing limit",
            annotation_position="bottom right",
        )
    page.plot(fig)


def candidates_plot(page: Page, joint: str, details: dict) -> None:
    """Refine candidates in the kp-kd plane, coloured by cost; twin-screened only vs played on the robot."""
    from plotly.colors import sample_colorscale

    cands = details.get("candidates") or []
    if not cands:
        return
    fig = figure(
        f"{joint}: refine candidates (colour: cost 0 dark .. 2 = as found or worse, yellow)",
        "kp [N m/rad]",
        "kd [N m s/rad]",
        height=320,
    )
    for played, name, symbol in ((False, "twin-screened only", "circle"), (True, "played on the robot", "diamond")):
        group = [c for c in cands if bool(c.get("played_on_plant")) == played]
        if not group:
            continue
        costs = [c["cost"] if c.get("cost") is not None else c.get("twin_cost") for c in group]
        text = [
            f"{c['label']}<br>cost {_num(c.get('cost'))}, twin {_num(c.get('twin_cost'))}<br>"
            + "; ".join(c.get("failures") or [])
            for c in group
        ]
        colors = sample_colorscale("Viridis", [_capped(v) / 2.0 for v in costs])
        fig.add_scatter(
            x=[c["kp"] for c in group],
            y=[c["kd"] for c in group],
            mode="markers",
            name=name,
            text=text,
            hoverinfo="text",
            marker=dict(symbol=symbol, size=10 + 3 * played, color=colors, line=dict(width=1, color="#333")),
        )
    page.plot(fig)


def _num(v: Any) -> str:
    return "-" if v is None else f"{v:.4g}"


def _capped(cost: Any) -> float:
    return 2.0 if cost is None or not math.isfinite(cost) else min(float(cost), 2.0)


def held_out_plots(page: Page, joint: str, plays: Sequence[tuple[str, dict]], entries: Sequence[dict]) -> None:
    """Each held-out tape: the reference, as found and proposed responses overlaid."""
    if not plays or not entries:
        return
    per_entry = len(plays) // len(entries)
    for k in range(per_entry):
        fig = figure(f"{joint}, held out: {plays[k][0]} before and after", "time [s]", "position [rad]", height=280)
        first = plays[k][1].get(joint)
        if first is None:
            continue
        line(fig, first["time_s"], first["reference"], "tape (reference)", color="#999")
        for e, (entry, color) in enumerate(zip(entries, ("#d62728", "#2ca02c", "#9467bd"))):
            run = plays[e * per_entry + k][1].get(joint)
            if run is not None:
                line(
                    fig,
                    run["time_s"],
                    run["position"],
                    f"{entry['label']} (cost {_num(entry.get('cost'))})",
                    color=color,
                    dash=None if e else "dot",
                )
        page.plot(fig)


def canary_verdict(page: Page, canary: dict) -> None:
    kept = canary.get("kept")
    page.verdict(
        f"canary: {'kept' if kept else 'rolled back'}; live cost ratio {_num(canary.get('live_cost_ratio'))}"
        f" vs predicted {_num(canary.get('predicted_cost_ratio'))}"
        f" (keep if <= {_num(canary.get('threshold'))})",
        "ok" if kept else "bad",
        [canary.get("reason", "")],
    )


def canary_section(page: Page, canary: dict, plays: Sequence[tuple[str, dict]], joints: Sequence[str]) -> None:
    """The verdict, the predicted and live cost ratios against the threshold, and the canary's plays."""
    kept = canary.get("kept")
    canary_verdict(page, canary)
    page.text(CANARY_RULE)
    ratios = {"predicted": canary.get("predicted_cost_ratio"), "live": canary.get("live_cost_ratio")}
    # a log axis: a live ratio of 0.004 beside a threshold of 0.5 is two decades apart, not a bar too small to see
    fig = figure(
        "canary: cost ratio to as found (log scale; kept at or below the keep threshold)",
        "",
        "cost / as-found cost",
        height=260,
        log_y=True,
    )
    shown = {k: v for k, v in ratios.items() if isinstance(v, (int, float)) and math.isfinite(v) and v > 0}
    fig.add_scatter(
        x=list(shown),
        y=list(shown.values()),
        text=[f"{v:.3g}" for v in shown.values()],
        mode="markers+text",
        textposition="middle right",
        name="cost ratio",
        showlegend=False,
        marker=dict(
            size=14, color=["#1f77b4" if k == "predicted" else ("#2ca02c" if kept else "#d62728") for k in shown]
        ),
    )
    threshold = canary.get("threshold")
    if isinstance(threshold, (int, float)) and math.isfinite(threshold) and threshold > 0:
        fig.add_hline(
            y=threshold,
            line_color="#555",
            line_dash="dash",
            annotation_text=f"keep threshold {threshold:.3g}",
            annotation_position="top right",
        )
    fig.add_hline(
        y=1.0, line_color="#bbb", line_dash="dot", annotation_text="as found (1)", annotation_position="top left"
    )
    page.plot(fig)
    runs = [p for p in plays if p[0] != "move_to_start"]
    for joint in joints:
        stage_plot(page, f"{joint}: canary plays, live", runs, joint, [name for name, _ in runs])


def _read_yaml(path: Path) -> dict:
    try:
        data = load_yaml(path, "tuner result")
    except ConfigError as exc:
        raise DataError(str(exc)) from None
    if not isinstance(data, dict):
        raise DataError(f"{path} is not a tuner result")
    return data


def canary_for(folder: Path) -> tuple[Path, dict] | None:
    """The latest canary folder next to `folder` whose canary.yaml names this run's proposal."""
    proposal = (folder / "proposal.yaml").resolve()
    found = None
    for path in sorted(folder.parent.glob("canary_*/canary.yaml")):
        doc = _read_yaml(path)
        if Path(str(doc.get("proposal_file", ""))).resolve() == proposal:
            found = (path.parent, doc)
    return found


def tuning_page(folder: Path) -> Page:
    doc = _read_yaml(folder / "proposal.yaml")
    joints = list(doc.get("joints") or [])
    page = Page(f"Tuning report: {', '.join(joints)} on {doc.get('controller', '?')}")
    canary = canary_for(folder)
    improved = bool(doc.get("improved"))
    page.verdict(
        ("proposal: change the gains" if improved else "proposal: keep the gains as found")
        + f"; predicted cost ratio {_num(doc.get('predicted_cost_ratio'))}",
        "ok" if improved else "none",
        [doc.get("summary", "")],
    )
    if canary is not None:
        canary_verdict(page, canary[1])
    got = doc.get("seconds_by_stage") or {}
    stages = {
        k: got[k] for k in sorted(got, key=lambda k: MOTION_ORDER.index(k) if k in MOTION_ORDER else len(MOTION_ORDER))
    }
    page.text(
        f"{doc.get('seconds_of_motion', 0):.0f} s of motion in {len(doc.get('bags') or [])} plays"
        + (f" ({', '.join(f'{k} {v:.0f} s' for k, v in stages.items())})" if stages else "")
        + "."
    )
    page.text(COST)
    page.heading("Gains")
    found, proposed = doc.get("as_found") or {}, doc.get("parameters") or {}
    page.table(
        ["parameter", "unit", "as found", "proposed"],
        [[k, GAIN_UNITS.get(k.rsplit(".", 1)[-1], ""), found.get(k), proposed.get(k)] for k in proposed],
    )
    feedforward = {j: f for j, f in (doc.get("host_feedforward") or {}).items() if f}
    if feedforward:
        page.heading("Host feed-forward (part of the proposal)", 3)
        page.text(FEEDFORWARD)
        terms = list(next(iter(feedforward.values())))
        page.table(["joint", *terms], [[j, *(_num(f.get(t)) for t in terms)] for j, f in feedforward.items()])
    plays = load_plays(folder, doc.get("bags") or [], joints)
    held_out = {t.get("name") for t in (doc.get("canary") or {}).get("tapes") or []}
    for joint in joints:
        details = (doc.get("details") or {}).get(joint) or {}
        page.heading(f"Joint {joint}")
        model = details.get("model") or {}
        if model.get("model"):
            half = model.get("half_width_95") or {}
            page.table(
                ["model term", "value", "95 % half-width"], [[k, v, half.get(k)] for k, v in model["model"].items()]
            )
        decisions = {
            "identify": model.get("notes") or [],
            "sweep": [
                f"ceiling wn {_num((details.get('deploy_ceiling') or {}).get('wn_max_rad_s'))} rad/s by rule "
                f"{(details.get('deploy_ceiling') or {}).get('rule')}"
            ],
            "refine": [f"chosen: {(details.get('proposed') or {}).get('label', '?')}"],
            "verify": [
                f"{e.get('label')}: cost {_num(e.get('cost'))}"
                + (f" ({'; '.join(e['failures'])})" if e.get("failures") else "")
                for e in details.get("held_out") or []
            ],
        }
        for stage, title in STAGES[:4]:
            chosen = [(n, p) for n, p in plays if stage_of(n, held_out) == stage]
            if not chosen:
                continue
            page.heading(title, 3)
            page.items(decisions[stage])
            stage_plot(page, f"{joint}: {stage}", chosen, joint, [n for n, _ in chosen])
            if stage == "sweep":
                rungs_plot(page, joint, details)
            elif stage == "refine":
                candidates_plot(page, joint, details)
            elif stage == "verify":
                held_out_plots(page, joint, chosen, details.get("held_out") or [])
        page.items(details.get("notes") or [])
    if canary is not None:
        page.heading("Canary")
        canary_section(page, canary[1], load_plays(canary[0], canary[1].get("bags") or [], joints), joints)
    return page


def canary_page(folder: Path) -> Page:
    doc = _read_yaml(folder / "canary.yaml")
    joints = list(doc.get("joints") or [])
    page = Page(f"Canary report: {', '.join(joints)}")
    canary_section(page, doc, load_plays(folder, doc.get("bags") or [], joints), joints)
    page.text(f"proposal: {doc.get('proposal_file')}")
    return page


def write_tuning_report(folder: str | Path) -> Path:
    folder = Path(folder)
    return tuning_page(folder).write(folder / "report.html")


def write_canary_report(folder: str | Path) -> Path:
    folder = Path(folder)
    return canary_page(folder).write(folder / "report.html")
