"""Bags to arrays and back: read rosbag2 / ROS 1 bags into `JointSamples` / `JointCommands`, write and repair.

ROS-free (rosbags, numpy, pyyaml). Errors are `BagError` (the bag cannot be read as asked) and `DataError`
(its data is unusable), each naming the bag, topic, joint and time at fault.
"""

from .arrays_io import export_csv, load_csv_samples, load_npz, save_npz
from .commands import TrajectorySetpoints, read_array_commands, read_commands, read_trajectory
from .joint_states import JointStateRead, check_motion, read_joint_states
from .read import BagSource, TopicInfo, typestore_for
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
    "TimeBase", "TimingReport", "TopicInfo", "TopicSummary", "TrajectorySetpoints", "check_motion", "export_csv",
    "inspect", "inspect_bag", "load_csv_samples", "load_npz", "read_array_commands", "read_commands",
    "read_joint_states", "read_metadata", "read_recording", "read_trajectory", "repair", "save_npz",
    "command_topics", "replay_safe_copy",
    "typestore_for",
]
