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

from .. import front_door
from .repair import repair as repair  # a submodule's name: imported now

EXPORTS = {
    "BagSource": ".read",
    "BagSummary": ".summary",
    "BagWriter": ".write",
    "COMMANDS_KEY": ".write",
    "Gap": ".timing",
    "JointStateRead": ".joint_states",
    "METADATA_TOPIC": ".write",
    "MOSTLY_GARBAGE": ".joint_states",
    "Recording": ".recording",
    "RepairReport": ".repair",
    "TimeBase": ".timing",
    "TimingReport": ".timing",
    "TopicInfo": ".read",
    "TopicSummary": ".summary",
    "TrajectorySetpoints": ".commands",
    "check_motion": ".joint_states",
    "command_topics": ".replay_safe",
    "decode_cdr": ".fastcdr",
    "decode_f64_array_cdr": ".fastcdr",
    "export_csv": ".arrays_io",
    "inspect_bag": ".summary",
    "load_csv_samples": ".arrays_io",
    "load_npz": ".arrays_io",
    "names_from_key": ".fastcdr",
    "offered_qos": ".write",
    "read_array_commands": ".commands",
    "read_commands": ".commands",
    "read_joint_states": ".joint_states",
    "read_metadata": ".write",
    "read_recording": ".recording",
    "read_trajectory": ".commands",
    "regularize": ".logger_clock",
    "repeated_rows": ".logger_clock",
    "replay_safe_copy": ".replay_safe",
    "save_npz": ".arrays_io",
    "typestore_for": ".read",
}
"""Name -> the module that defines it, imported on first use (callers pay only for what they use)."""

__getattr__, __dir__, __all__ = front_door(__name__, EXPORTS, eager=("repair",))
