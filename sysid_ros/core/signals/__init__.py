"""Time-stamped joint data and what is derived from it, on an integer-nanosecond time base.

- `arrays`: `JointSamples` (feedback) and `JointCommands`, the arrays that flow between stages.
- `joint_trajectory`: `Trajectory`, a joint trajectory as ros2_control's trajectory controller interpolates it.
- `derivatives`: velocity and acceleration from sampled positions (Savitzky-Golay, quartic, held differences);
  not re-exported here, so that importing the arrays does not import scipy.signal.
- `plausible`: values no joint measures (a row holding one is garbage).
- `size_bounds`: bounds on sizes derived from input (grid points of a time span), checked before allocating.
"""

from .arrays import JointCommands as JointCommands
from .arrays import JointSamples as JointSamples
from .joint_trajectory import Trajectory as Trajectory
from .plausible import MAX_ABS_POSITION as MAX_ABS_POSITION
from .plausible import MAX_ABS_RATE as MAX_ABS_RATE
from .size_bounds import MAX_GRID_POINTS as MAX_GRID_POINTS
from .size_bounds import grid_points as grid_points
