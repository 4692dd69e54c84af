"""The simulated robot: a ros2_control arm on MuJoCo with hidden physics, wrapped by the `sim_robot` node.

- `robot`: `SimRobot` (sample-and-hold PID drives, noisy feedback, friction, delay), `load_spec` for models.
"""

from .robot import Feedback as Feedback
from .robot import FeedbackNoise as FeedbackNoise
from .robot import SimRobot as SimRobot
from .robot import SmoothFriction as SmoothFriction
from .robot import load_spec as load_spec
