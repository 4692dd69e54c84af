"""Bags to arrays and back: read rosbag2 / ROS 1 bags into `JointSamples` / `JointCommands`, write and repair.

ROS-free (rosbags, numpy, pyyaml). Errors are `BagError` (the bag cannot be read as asked) and `DataError`
(its data is unusable), each naming the bag, topic, joint and time at fault.

- `read`: open any bag rosbags reads (rosbag2 mcap / sqlite3, ROS 1) and stream its messages.
- `fastcdr`: fast CDR decoders for JointState and Float64MultiArray.
- `joint_states`: JointState topics -> `JointSamples`; `commands`: command topics -> `JointCommands`.
- `trajectory`: JointTrajectory messages expanded into setpoints as ros2_control's controller samples them.
- `timing`: header stamps vs record times, offsets, duplicates, gaps; `logger_clock`: real loggers' time bases.
- `recording`: `read_recording`, feedback, commands and metadata of one bag on one time base.
- `summary`: `inspect_bag`, what a bag holds and what of it can serve identification.
- `write`: `BagWriter`, crash-tolerant recording; `arrays_io`: `.npz` and CSV without a bag.
- `repair`: a killed recording made readable in a new folder (`mcap_salvage` reads what is left of an mcap).
- `replay_safe`: bags that cannot drive a robot (command topics marked and renamed).
"""

from .arrays_io import export_csv, load_csv_samples, load_npz, save_npz
from .commands import TrajectorySetpoints, read_array_commands, read_commands, read_trajectory
from .joint_states import JointStateRead, check_motion, read_joint_states
from .read import BagSource, Shortfall, TopicInfo, typestore_for
from .recording import Recording, read_recording
from .repair import RepairReport, repair
from .replay_safe import command_topics, replay_safe_copy
from .summary import BagSummary, TopicSummary, inspect_bag
from .timing import Gap, TimeBase, TimingReport
from .write import METADATA_TOPIC, BagWriter, read_metadata

inspect = inspect_bag
"""Alias: `inspect(bag) -> BagSummary`."""

__all__ = [
    "METADATA_TOPIC", "BagSource", "BagSummary", "BagWriter", "Gap", "JointStateRead", "Recording", "RepairReport",
    "Shortfall", "TimeBase", "TimingReport", "TopicInfo", "TopicSummary", "TrajectorySetpoints", "check_motion", "export_csv",
    "inspect", "inspect_bag", "load_csv_samples", "load_npz", "read_array_commands", "read_commands",
    "read_joint_states", "read_metadata", "read_recording", "read_trajectory", "repair", "save_npz",
    "command_topics", "replay_safe_copy",
    "typestore_for",
]
