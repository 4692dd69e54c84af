"""A joint's PID gains: our names, their guard, the controllers' names, the journal, the controllers' file.

- `pid`: `PidGains` (`gains.<joint>.p|i|d|i_clamp|ff_velocity_scale`) and `GainGuard` (finite, 0 <= value <= max).
- `controller_styles`: how each ros2_control controller names its PID parameters; detecting a controller's style.
- `controller_file`: the gains as a controller manager's parameter file block, or written into the user's file.
- `journal`: `GainsJournal`, every gain change on disk before it is sent, so it can always be undone.
"""

from .controller_file import parameter_block as parameter_block
from .controller_file import persist as persist
from .controller_styles import ControllerStyle as ControllerStyle
from .controller_styles import detect_style as detect_style
from .journal import GainChange as GainChange
from .journal import GainsJournal as GainsJournal
from .pid import GainGuard as GainGuard
from .pid import PidGains as PidGains
from .pid import parameter_name as parameter_name
