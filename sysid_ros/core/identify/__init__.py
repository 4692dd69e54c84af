"""Simulation-based identification on mujoco.sysid: a problem file in, `identified.yaml` and a report out.

The path of the data, in order:
- `problem`: the problem file's format (`load_problem`, `problem_from_dict` -> a frozen `Problem`).
- `problem_model`: the problem's model prepared (`problem_spec`) and the problem checked against it;
  `model_cache` compiles it once per process; `spec_values` reads parameter values out of the model.
- `plausibility`: bounds from physics where the problem gives none; the optional prior.
- `pipeline`: `identify`, the run: six stages, one module each, in this order:
  - `data` (`load_run`): the model, bounds, the checked problem; bags and npz files -> joint samples and
    commands (`load_source`), cut into segments; `sysid_data`: those arrays -> mujoco.sysid data
    (TimeSeries, ModelSequences); `start_states`: how segments start from measured states;
  - `warm_start` (`start_values`): start values from the linear regression; `torque_check` its held-out
    torque check; `parameters`: parameter specs -> a mujoco.sysid ParameterDict (modifiers on the spec);
    `inertia` for a body's 10 inertial parameters in log-Cholesky coordinates; `arm_models` for URDF arms;
  - `optimize` (`fit_parameters`): `residual`, the residual of every segment, minimised (`stopping`; `quiet`);
  - `intervals` (`estimate_spread`): intervals; `start_error`, `residual_stats`, `time_offset`: the start
    states' noise, misfit and time-offset checks;
  - `validation` (`validate`): metrics, held-out replays and torque; `torque_space`: an arm's fit on the
    measured torque (full inertials, joint terms), which the result carries when it beats the window fit's on
    the training rows;
  - `parameter_results`: each parameter's result (`carried_parameters`: as the torque-space fit holds it);
    `verdict`: the warnings that make a run suspect.
- `results`: what the run returns (`IdentificationResult`), its `RunLog` and verdict.
- `write`: `identified.yaml`, the HTML report and the library's output; `export`: the identified MJCF/URDF and values.
- `synthetic`, `overrides`: synthetic recordings for tests and demos; a problem with other data files.
"""

from .data import load_source as load_source
from .pipeline import identify as identify
from .problem import DataSource as DataSource
from .problem import OptimizerSpec as OptimizerSpec
from .problem import ParameterSpec as ParameterSpec
from .problem import Problem as Problem
from .problem import load_problem as load_problem
from .problem import problem_from_dict as problem_from_dict
from .quiet import quiet_output as quiet_output
from .results import IdentificationResult as IdentificationResult
from .results import ParameterResult as ParameterResult
from .results import results_document as results_document
from .write import result_names as result_names
from .write import write_results as write_results

__all__ = ["DataSource", "IdentificationResult", "OptimizerSpec", "ParameterResult", "ParameterSpec", "Problem",
           "identify", "load_problem", "load_source", "problem_from_dict", "quiet_output", "result_names",
           "results_document", "write_results"]
