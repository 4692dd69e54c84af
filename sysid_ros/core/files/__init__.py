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

from .outputs import check_writable as check_writable
from .outputs import staged as staged
from .outputs import write_file as write_file
from .paths import config_dir as config_dir
from .paths import model_path as model_path
from .ros_params import load_ros_parameters as load_ros_parameters
from .schema import Key as Key
from .schema import Table as Table
from .schema import check as check
