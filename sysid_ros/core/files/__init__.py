"""Files in and out: ROS parameter files, schema-checked YAML, the package's shared files, safe outputs.

- `ros_params`: ROS 2 parameter files (`<node>: ros__parameters: ...`) read into flat `a.b.c` names.
- `schema`: check a parsed YAML document against a declarative table of keys (`Table`, `Key`, `check`).
- `paths`: where the package's shared files live (`config_dir`, `model_path`).
- `models`: a robot model's file (embedded name, MJCF or URDF) read into an MjSpec (`load_spec`; not re-exported
  here: it imports MuJoCo, which the light readers of ROS parameter files do without).
- `outputs`: results written atomically into a checked folder (`check_writable`, `staged`, `write_file`).
- `reading`: the one door for the files sysid_ros reads (regular files only, bounded sizes).
- `writing`: the one door for the files sysid_ros writes (exclusive temporaries beside their targets).
"""

from .. import front_door

EXPORTS = {
    "AnyOf": ".schema",
    "Choice": ".schema",
    "Flag": ".schema",
    "Integer": ".schema",
    "Key": ".schema",
    "ListOf": ".schema",
    "MapOf": ".schema",
    "Number": ".schema",
    "Numbers": ".schema",
    "REQUIRED": ".schema",
    "STALE": ".writing",
    "Table": ".schema",
    "Text": ".schema",
    "applies_to": ".ros_params",
    "check": ".schema",
    "check_writable": ".outputs",
    "check_yaml_text": ".reading",
    "config_dir": ".paths",
    "create_new": ".writing",
    "flatten": ".ros_params",
    "folder_lock": ".writing",
    "load_npz": ".reading",
    "load_ros_parameters": ".ros_params",
    "load_spec": ".models",
    "load_yaml": ".reading",
    "model_path": ".paths",
    "npz_headers": ".reading",
    "parameter_blocks": ".ros_params",
    "parameter_sections": ".ros_params",
    "pending_beside": ".writing",
    "process_alive": ".writing",
    "read_bytes": ".reading",
    "refuse_inputs_inside": ".writing",
    "remove_stale": ".writing",
    "replace_file": ".writing",
    "resolve_target": ".writing",
    "share_dir": ".paths",
    "staged": ".outputs",
    "write_file": ".outputs",
}
"""Name -> the module that defines it, imported on first use (callers pay only for what they use)."""

__getattr__, __dir__, __all__ = front_door(__name__, EXPORTS, eager=())
