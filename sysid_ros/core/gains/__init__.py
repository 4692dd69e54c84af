"""A joint's PID gains: our names, their guard, the controllers' names, the journal, the controllers' file.

- `pid`: `PidGains` (`gains.<joint>.p|i|d|i_clamp|ff_velocity_scale`) and `GainGuard` (finite, 0 <= value <= max).
- `controller_styles`: how each ros2_control controller names its PID parameters; detecting a controller's style.
- `controller_file`: the gains as a controller manager's parameter file block, or written into the user's file.
- `journal`: `GainsJournal`, every gain change on disk before it is sent, so it can always be undone.
"""

from .. import front_door

EXPORTS = {
    "ALIASES": ".controller_styles",
    "ControllerStyle": ".controller_styles",
    "FINAL": ".journal",
    "GAIN_FIELDS": ".pid",
    "GainChange": ".journal",
    "GainGuard": ".pid",
    "GainsJournal": ".journal",
    "PidGains": ".pid",
    "STYLES": ".controller_styles",
    "clamp_for_tuning": ".pid",
    "detect_style": ".controller_styles",
    "from_controller": ".controller_styles",
    "gain_refusal": ".pid",
    "get_style": ".controller_styles",
    "integral_switches": ".controller_styles",
    "is_switch": ".controller_styles",
    "parameter_block": ".controller_file",
    "parameter_name": ".pid",
    "persist": ".controller_file",
    "prepare_persist": ".controller_file",
    "split_parameter_name": ".pid",
    "switch_refusal": ".controller_styles",
    "switched_on": ".controller_styles",
    "to_controller": ".controller_styles",
}
"""Name -> the module that defines it, imported on first use (callers pay only for what they use)."""

__getattr__, __dir__, __all__ = front_door(__name__, EXPORTS, eager=())
