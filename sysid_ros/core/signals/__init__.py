"""Time-stamped joint data and what is derived from it, on an integer-nanosecond time base.

- `arrays`: `JointSamples` (feedback) and `JointCommands`, the arrays that flow between stages.
- `joint_trajectory`: `Trajectory`, a joint trajectory as ros2_control's trajectory controller interpolates it.
- `derivatives`: velocity and acceleration from sampled positions (Savitzky-Golay, quartic, held differences);
  not re-exported here, so that importing the arrays does not import scipy.signal.
- `plausible`: values no joint measures (a row holding one is garbage).
- `size_bounds`: bounds on sizes derived from input (grid points of a time span), checked before allocating.
"""

from .. import front_door

EXPORTS = {
    "Derivatives": ".derivatives",
    "advanced": ".derivatives",
    "JointCommands": ".arrays",
    "JointSamples": ".arrays",
    "MAX_ABS_POSITION": ".plausible",
    "MAX_ABS_RATE": ".plausible",
    "MAX_GRID_POINTS": ".size_bounds",
    "Trajectory": ".joint_trajectory",
    "check_memory": ".size_bounds",
    "estimate_position_noise": ".derivatives",
    "finite_differences": ".derivatives",
    "grid_points": ".size_bounds",
    "hold_differences": ".derivatives",
    "hold_kernel": ".derivatives",
    "quartic_derivatives": ".derivatives",
    "same_filter": ".derivatives",
    "samples_derivatives": ".derivatives",
    "savgol_derivatives": ".derivatives",
    "smooth_like_acceleration": ".derivatives",
    "uniform_dt_s": ".derivatives",
    "velocity_lag": ".derivatives",
    "window_samples": ".derivatives",
}
"""Name -> the module that defines it, imported on first use (callers pay only for what they use)."""

__getattr__, __dir__, __all__ = front_door(__name__, EXPORTS, eager=())
