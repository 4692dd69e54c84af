"""The proposal: what tune() would change, in the drive's units, readable by a person and serializable to YAML.

Drive gains as ros2_control parameters (`gains.<joint>.p|i|d|i_clamp|ff_velocity_scale`), the host
feed-forward terms, the identified model with its intervals, before/after on the held-out tapes, every
rung and every candidate.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from ..errors import ConfigError
from ..gains import parameter_name
from ..joint_model import REVOLUTE_TERMS, JointModel
from .model import Controller, Gains, loop_of, to_pid_gains
from .pipeline import TuneResult

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
    return {"label": controller.label,
            "drive_parameters": {parameter_name(joint, k): v for k, v in pid.as_dict().items()},
            "host_feedforward": feedforward_dict(controller.feedforward),
            "wn_rad_s": loop.wn_rad_s, "zeta": loop.zeta}


def proposal(result: TuneResult) -> dict[str, Any]:
    """The proposal of one tuned joint as a plain dict (see module docstring)."""
    joint = result.servo.name
    model = result.identification.model
    before, after = result.verify.entries[0], result.verify.chosen
    out = {
        "format": FORMAT,
        "joint": joint,
        "improved": result.improved,
        "summary": (f"{joint}: {'change' if result.improved else 'keep as found'}; held-out cost "
                    f"{before.cost:.3f} -> {after.cost:.3f} (stop p90 {before.score.stop_p90_mrad:.3g} -> "
                    f"{after.score.stop_p90_mrad:.3g} mrad, tracking {before.score.tracking_rms_mrad:.3g} -> "
                    f"{after.score.tracking_rms_mrad:.3g} mrad)"),
        "as_found": controller_dict(joint, result.servo.as_found, model),
        "proposed": controller_dict(joint, result.deployed, model),
        "model": result.identification.as_dict(),
        "limits": {"ringing_mrad": result.limits.ringing_mrad, "chatter_nm": result.limits.chatter_nm,
                   "stop_allocation_mrad": result.limits.stop_allocation_mrad,
                   "torque_limit_nm": result.limits.torque_limit_nm},
        "deploy_ceiling": {"wn_max_rad_s": result.sweep.wn_max_rad_s, "rule": result.sweep.rule,
                           "wn_quiet_rad_s": result.sweep.wn_quiet_rad_s},
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


def gains_from_proposal(data: dict[str, Any]) -> tuple[str, Gains, dict[str, float] | None]:
    """(joint, proposed drive gains, host feed-forward terms) read back from a proposal dict."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f"not a servo proposal (format {data.get('format') if isinstance(data, dict) else None})")
    joint = data["joint"]
    params = data["proposed"]["drive_parameters"]
    gains = Gains(kp=params[parameter_name(joint, "p")], kd=params[parameter_name(joint, "d")],
                  ki=params[parameter_name(joint, "i")], i_clamp_nm=params[parameter_name(joint, "i_clamp")])
    return joint, gains, data["proposed"]["host_feedforward"]
