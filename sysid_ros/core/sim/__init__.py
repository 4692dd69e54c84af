"""The simulated robot: a ros2_control arm on MuJoCo with hidden physics, wrapped by the `sim_robot` node.

- `robot`: `SimRobot` (sample-and-hold PID drives, noisy feedback, friction, delay).
- `motors`: a joint's motor in a MuJoCo model and the torque-sensor offset it holds (read and written).
"""

from .motors import effort_offset as effort_offset
from .motors import joint_motor as joint_motor
from .motors import set_effort_offset as set_effort_offset
from .robot import Feedback as Feedback
from .robot import FeedbackNoise as FeedbackNoise
from .robot import SimRobot as SimRobot
from .robot import SmoothFriction as SmoothFriction
