"""The proposal: what tune() would change, in the drive's units, readable by a person and serializable to YAML.

Drive gains as ros2_control parameters (`gains.<joint>.p|i|d|i_clamp|ff_velocity_scale`), the host
feed-forward terms, the identified model with its intervals, before/after on the held-out tapes, every
rung and every candidate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..files import load_yaml
from ..gains import ControllerStyle, GainGuard, get_style, parameter_name, split_parameter_name
from ..linear import ALL_TERMS, REVOLUTE_TERMS, JointModel
from ..tapes import Tape
from .pipeline import TuneResult
from .scoring import Score, cost
from .servo import Controller, DriveGains, loop_of, to_pid_gains
from .whole_arm import ArmResult

CONTROLLER_NAME = re.compile(r"/?(\*\*/)?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*")
"""A controller's node name as a parameter file names it: `arm_controller`, `/ns/arm_controller`, `/**/arm_ctl`."""
TUNED_GAINS = ("p", "i", "d", "i_clamp")  # what the tuner sets; ff_velocity_scale stays as the drive has it

FORMAT = "sysid_ros.servo_proposal/1"


def _clean(value: Any) -> Any:
    """Plain YAML-safe values: floats (None for non-finite), ints, strings, lists, dicts."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return number if math.isfinite(number) else None


def feedforward_dict(model: JointModel | None) -> dict[str, float] | None:
    return None if model is None else {t: float(getattr(model, t)) for t in REVOLUTE_TERMS + ("offset_nm",)}


def controller_dict(joint: str, controller: Controller, model: JointModel) -> dict[str, Any]:
    """A controller as drive parameters, host feed-forward and its (wn, zeta) on the model."""
    pid = to_pid_gains(controller.gains)
    loop = loop_of(controller.gains, model)
    return {
        "label": controller.label,
        "drive_parameters": {parameter_name(joint, k): v for k, v in pid.as_dict().items()},
        "host_feedforward": feedforward_dict(controller.feedforward),
        "wn_rad_s": loop.wn_rad_s,
        "zeta": loop.zeta,
    }


def proposal(result: TuneResult) -> dict[str, Any]:
    """The proposal of one tuned joint as a plain dict (see module docstring)."""
    joint = result.servo.name
    model = result.identification.model
    before, after = result.verify.entries[0], result.verify.chosen
    out = {
        "format": FORMAT,
        "joint": joint,
        "improved": result.improved,
        "summary": (
            f"{joint}: {'change' if result.improved else 'keep as found'}; held-out cost "
            f"{before.cost:.3f} -> {after.cost:.3f} (stop p90 {before.score.stop_p90_mrad:.3g} -> "
            f"{after.score.stop_p90_mrad:.3g} mrad, tracking {before.score.tracking_rms_mrad:.3g} -> "
            f"{after.score.tracking_rms_mrad:.3g} mrad)"
        ),
        "as_found": controller_dict(joint, result.servo.as_found, model),
        "proposed": controller_dict(joint, result.deployed, model),
        "model": result.identification.as_dict(),
        "limits": {
            "ringing_mrad": result.limits.ringing_mrad,
            "chatter_nm": result.limits.chatter_nm,
            "stop_allocation_mrad": result.limits.stop_allocation_mrad,
            "torque_limit_nm": result.limits.torque_limit_nm,
        },
        "deploy_ceiling": {
            "wn_max_rad_s": result.sweep.wn_max_rad_s,
            "rule": result.sweep.rule,
            "wn_quiet_rad_s": result.sweep.wn_quiet_rad_s,
        },
        "held_out": [e.as_dict() for e in result.verify.entries],
        "rungs": [r.as_dict() for r in result.sweep.rungs],
        "candidates": [c.as_dict() for c in result.refine.candidates],
        "seconds_of_motion": result.seconds,
        "notes": list(result.notes),
    }
    return _clean(out)


def to_yaml(result_or_dict: TuneResult | dict[str, Any]) -> str:
    data = proposal(result_or_dict) if isinstance(result_or_dict, TuneResult) else result_or_dict
    return yaml.safe_dump(data, sort_keys=False, width=110)


def gains_from_proposal(data: dict[str, Any]) -> tuple[str, DriveGains, dict[str, float] | None]:
    """(joint, proposed drive gains, host feed-forward terms) read back from a proposal dict."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f"not a servo proposal (format {data.get('format') if isinstance(data, dict) else None})")
    joint = data["joint"]
    params = data["proposed"]["drive_parameters"]
    gains = DriveGains(
        kp=params[parameter_name(joint, "p")],
        kd=params[parameter_name(joint, "d")],
        ki=params[parameter_name(joint, "i")],
        i_clamp_nm=params[parameter_name(joint, "i_clamp")],
    )
    return joint, gains, data["proposed"]["host_feedforward"]


APPLY_FORMAT = "sysid_ros.gain_proposal/1"


@dataclass(frozen=True)
class GainProposal:
    """What the servo tuner proposes for a controller's joints, and how a canary checks it on the robot.

    `parameters` are the controller parameters to set at once; `as_found` what the tuner read before it
    moved anything. The canary replays `canary_tapes` under the proposed controllers (gains plus host
    feed-forward) and compares each joint's cost with `before` (the as-found run on the same tapes):
    the live ratio sum(cost) / sum(as-found cost) must be <= 1 - (1 - predicted_ratio) / 2.
    """

    joints: tuple[str, ...]
    improved: bool
    parameters: dict[str, float]
    as_found: dict[str, float]
    feedforward: dict[str, JointModel | None]
    canary_tapes: tuple[Tape, ...]
    before: dict[str, Score]
    allocation_mrad: dict[str, float]
    predicted_ratio: float
    summary: str
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in self.parameters.items():
            split = split_parameter_name(name)
            if split is None or split[0] not in self.joints or not math.isfinite(value):
                raise ConfigError(f"proposal parameter {name}={value!r} is not a finite gain of its joints")
        if set(self.parameters) != set(self.as_found):
            raise ConfigError("a proposal names the same parameters as proposed and as found")

    def controllers(self) -> dict[str, Controller]:
        """The proposed controller of every joint (gains as in `parameters`, host feed-forward)."""
        out = {}
        for joint in self.joints:
            p = {g: self.parameters.get(parameter_name(joint, g), 0.0) for g in ("p", "d", "i", "i_clamp")}
            out[joint] = Controller(
                DriveGains(kp=p["p"], kd=p["d"], ki=p["i"], i_clamp_nm=p["i_clamp"]),
                self.feedforward.get(joint),
                "proposed",
            )
        return out

    def live_ratio(self, after: dict[str, Score]) -> tuple[float, str | None]:
        """(sum of live costs / sum of as-found costs, why the canary fails regardless) from live scores."""
        failure = next((f"{j}: {s.aborted}" for j, s in after.items() if s.aborted), None)
        failure = failure or next((f"{j}: telemetry not finite" for j, s in after.items() if not s.finite), None)
        live = sum(cost(after[j], self.before[j], self.allocation_mrad[j]) for j in self.joints)
        base = sum(cost(self.before[j], self.before[j], self.allocation_mrad[j]) for j in self.joints)
        return live / base, failure

    def to_dict(self) -> dict[str, Any]:
        return _clean(
            {
                "format": APPLY_FORMAT,
                "summary": self.summary,
                "joints": list(self.joints),
                "improved": self.improved,
                "parameters": self.parameters,
                "as_found": self.as_found,
                "host_feedforward": {j: (asdict(m) if m is not None else None) for j, m in self.feedforward.items()},
                "predicted_cost_ratio": self.predicted_ratio,
                "canary": {
                    "before": {j: s.as_dict() for j, s in self.before.items()},
                    "allocation_mrad": self.allocation_mrad,
                    "tapes": [t.to_dict() for t in self.canary_tapes],
                },
                "details": self.details,
            }
        )

    @classmethod
    def from_dict(cls, data: Any, guard: GainGuard = GainGuard(), **where: object) -> GainProposal:
        """A proposal read back; its gains must pass `guard` (finite, >= 0, at most its ceilings) as the
        tuner's own would: GainsError naming the gain (and `where`, e.g. the file) otherwise."""
        if not isinstance(data, dict) or data.get("format") != APPLY_FORMAT:
            raise ConfigError(
                f"not a gain proposal (format {data.get('format') if isinstance(data, dict) else None},"
                f" expected {APPLY_FORMAT})",
                **where,
            )
        try:
            canary = data["canary"]
            parameters = {k: as_number(v) for k, v in data["parameters"].items()}
            guard.check_parameters(parameters, **where)
            return cls(
                tuple(data["joints"]),
                bool(data["improved"]),
                parameters,
                {k: float(v) for k, v in data["as_found"].items()},
                {j: (_joint_model(m, j, where) if m else None) for j, m in data["host_feedforward"].items()},
                tuple(Tape.from_dict(t) for t in canary["tapes"]),
                {j: Score(**{**s, "aborted": s.get("aborted")}) for j, s in canary["before"].items()},
                {j: float(v) for j, v in canary["allocation_mrad"].items()},
                float(data["predicted_cost_ratio"]),
                str(data.get("summary", "")),
                data.get("details") or {},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"gain proposal is incomplete or malformed: {exc!r}", **where) from exc


def as_number(value: Any) -> Any:
    """A gain as YAML gave it, as a float (YAML 1.1 reads `1e3` as a string); anything else unchanged, for the
    guard to refuse by name."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return value
    try:
        return float(value)
    except ValueError:
        return value


def _joint_model(terms: Any, joint: str, where: dict[str, object]) -> JointModel:
    """A host feed-forward read back: known terms only, every one a finite number."""
    if not isinstance(terms, dict):
        raise ConfigError(f"{joint}'s host feed-forward must be a mapping of terms, got {str(terms)[:80]}", **where)
    unknown = sorted(str(k) for k in terms if k not in {f.name for f in fields(JointModel)})
    if unknown:
        raise ConfigError(f"{joint}'s host feed-forward has unknown terms {unknown[:5]}", **where)
    model = JointModel(**terms)
    bad = {
        k: v
        for k, v in asdict(model).items()
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
    }
    if bad:
        raise ConfigError(f"{joint}'s host feed-forward terms must be finite numbers, got {str(bad)[:80]}", **where)
    return model


def gain_parameters(controllers: dict[str, Controller]) -> dict[str, float]:
    """The controller parameters the tuner sets (p, i, d, i_clamp of each joint) for `controllers`."""
    out = {}
    for joint, controller in controllers.items():
        pid = to_pid_gains(controller.gains).as_dict()
        out.update({parameter_name(joint, g): float(pid[g]) for g in TUNED_GAINS})
    return out


def from_tune(result: TuneResult, canary_tapes: Sequence[Tape]) -> GainProposal:
    """The proposal of one tuned joint; the canary replays its held-out verify tapes."""
    joint = result.servo.name
    before, after = result.verify.entries[0], result.verify.chosen
    return GainProposal(
        (joint,),
        result.improved,
        gain_parameters({joint: result.deployed}),
        gain_parameters({joint: result.servo.as_found}),
        {joint: result.deployed.feedforward},
        tuple(canary_tapes),
        {joint: before.score},
        {joint: result.limits.stop_allocation_mrad},
        after.cost / before.cost,
        proposal(result)["summary"],
        {joint: proposal(result)},
    )


def from_arm(result: ArmResult, canary_tapes: Sequence[Tape]) -> GainProposal:
    """The proposal of a tuned arm; the canary replays the whole-arm check tapes."""
    joints = tuple(result.delivered)
    delivered = next((r for r in result.rounds if r.controllers == result.delivered), result.as_found)
    predicted = sum(delivered.costs.values()) / sum(result.as_found.costs.values())
    as_found = {j: o.servo.as_found for j, o in result.outcomes.items()}
    summary = (
        f"{', '.join(joints)}: {'change' if result.improved else 'keep as found'}; whole-arm check cost "
        f"{sum(result.as_found.costs.values()):.3f} -> {sum(delivered.costs.values()):.3f}"
    )
    details = {j: proposal(o.result) for j, o in result.outcomes.items() if o.result is not None}
    details["arm_notes"] = list(result.notes)
    return GainProposal(
        joints,
        result.improved,
        gain_parameters(result.delivered),
        gain_parameters(as_found),
        {j: c.feedforward for j, c in result.delivered.items()},
        tuple(canary_tapes),
        dict(result.as_found.scores),
        {j: o.limits.stop_allocation_mrad for j, o in result.outcomes.items()},
        predicted,
        summary,
        details,
    )


def load_proposal(path: str | Path, guard: GainGuard = GainGuard()) -> GainProposal:
    """The proposal in file `path`, its gains checked against `guard` (see `GainProposal.from_dict`)."""
    return GainProposal.from_dict(load_yaml(path, "gain proposal"), guard, file=str(path))


def proposal_target(
    path: str | Path, controller: str | None = None, style: str = "auto"
) -> tuple[GainProposal, str, ControllerStyle]:
    """A proposal file with the controller it is for and that controller's parameter style.

    `controller` and `style` default ("auto") to what the servo_tuner recorded in the file
    (`controller`, `controller_style`).
    """
    document = load_yaml(path, "gain proposal")
    found = GainProposal.from_dict(document, file=str(path))
    controller = controller or document.get("controller")
    if not controller:
        raise ConfigError(f"{path} does not name its controller: give --controller")
    if not isinstance(controller, str) or not CONTROLLER_NAME.fullmatch(controller):
        raise ConfigError(
            f"controller must be a ROS node name (e.g. arm_controller or /ns/arm_controller), got "
            f"{str(controller)[:60]!r}",
            file=str(path),
        )
    if style == "auto":
        style = document.get("controller_style") or ""
        if not style:
            raise ConfigError(f"{path} does not record the controller's parameter style: give --style")
        if not isinstance(style, str):
            raise ConfigError(f"controller_style must be a style name, got {str(style)[:60]!r}", file=str(path))
    return found, controller, get_style(style)


def proven_parameters(path: str | Path, gains_only: bool = False) -> tuple[dict[str, float], str]:
    """The controller parameters that hold what the proposal's canary proved, and a note of what they leave out.

    The canary played the proposed gains with the proposal's host feed-forward (and, for an arm, the nominal
    model's inverse dynamics) unless the controller was measured to ignore it. A controller's own parameters can
    hold only a viscous term: the drive's `ff_velocity_scale` (effort = ff_velocity_scale * v_ref + PID) raised
    by it from its as-found value. Anything else would be lost by writing the gains alone: ConfigError naming it,
    unless `gains_only` (then the gains alone, and the note names every term left out, the viscous one too).
    Every value returned passes the tuner's guard (GainGuard's defaults): GainsError naming it otherwise.
    """
    document = load_yaml(path, "gain proposal")
    proposal = GainProposal.from_dict(document, file=str(path))
    if document.get("trajectory_feedforward") == "ignored by the controller":
        return dict(proposal.parameters), ""  # measured: the plays ran on the gains alone
    found = document.get("ff_velocity_scale_as_found") or {}
    if not isinstance(found, dict):
        raise ConfigError(
            "ff_velocity_scale_as_found must map gains.<joint>.ff_velocity_scale to numbers", file=str(path)
        )
    held: dict[str, float] = {}
    base = document.get("base_feedforward")
    lost = [f"the nominal inverse dynamics of {str(base)[:60]}"] if base else []
    dropped = list(lost)  # everything the canary ran with beside the gains: what --gains-only leaves out
    for joint, model in proposal.feedforward.items():
        terms = {t: v for t, v in asdict(model).items() if t in ALL_TERMS and v} if model is not None else {}
        if terms:
            dropped.append(f"{joint}'s " + ", ".join(f"{t} {v:.4g}" for t, v in terms.items()))
        scale = parameter_name(joint, "ff_velocity_scale")
        if "viscous_nm_s_rad" in terms and scale in found:
            as_found = as_number(found[scale])
            GainGuard().check_parameters({scale: as_found}, file=str(path), key="ff_velocity_scale_as_found")
            held[scale] = as_found + terms.pop("viscous_nm_s_rad")
        if terms:
            lost.append(f"{joint}'s " + ", ".join(f"{t} {v:.4g}" for t, v in terms.items()))
    if not lost:
        GainGuard().check_parameters(held, file=str(path))  # the as-found scale raised by the viscous term
        return {**proposal.parameters, **held}, ""
    if not gains_only:
        raise ConfigError(
            f"the canary proved these gains together with a host feed-forward the controller's "
            f"parameters cannot hold ({'; '.join(lost)}): the gains alone were never tried on the "
            f"robot. Send that feed-forward from the host, or give --gains-only to write the gains "
            f"anyway"
        )
    return dict(proposal.parameters), (
        "the host feed-forward the canary also ran with is not written: " + "; ".join(dropped)
    )
