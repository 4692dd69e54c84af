"""The simulated robot: a ros2_control arm on MuJoCo with hidden physics, wrapped by the `sim_robot` node.

- `robot`: `SimRobot` (sample-and-hold PID drives, noisy feedback, friction, delay).
- `motors`: a joint's motor in a MuJoCo model and the torque-sensor offset it holds (read and written).
- `friction`: a joint's friction loss over a velocity band as MuJoCo holds it (written and read).
"""

from .. import front_door

EXPORTS = {
    "DriveEncoder": ".robot",
    "Feedback": ".robot",
    "FeedbackNoise": ".robot",
    "SimRobot": ".robot",
    "SmoothFriction": ".robot",
    "constant_bias": ".motors",
    "effort_offset": ".motors",
    "effort_offsets": ".motors",
    "friction_bands": ".friction",
    "hold_band": ".friction",
    "joint_motor": ".motors",
    "load_spec": ".robot",
    "set_effort_offset": ".motors",
}
"""Name -> the module that defines it, imported on first use (callers pay only for what they use)."""

__getattr__, __dir__, __all__ = front_door(__name__, EXPORTS, eager=())
