"""Simulation-based identification on mujoco.sysid: a problem file in, `identified.yaml` and a report out.

- `problem/`: the problem file and the model it builds (parameters, bounds from physics, inertia, URDF arms).
- `stages/`: the run's six stages (load, warm start, optimize, intervals, validation, summarize).
- `rollout/`: the glue to mujoco.sysid (data sequences, the residual, start states, stopping rule).
- `checks/`: what judges a fit (start-state noise, misfit, time offset, held-out torque, the suspect warnings).
- `output/`: `identified.yaml`, the report, the identified MJCF/URDF and values.
- `pipeline`: `identify`, the stages in order; `results`: what a run returns (`IdentificationResult`).
"""

from .stages.load import load_source as load_source
from .pipeline import identify as identify
from .problem.file import DataSource as DataSource
from .problem.file import OptimizerSpec as OptimizerSpec
from .problem.file import ParameterSpec as ParameterSpec
from .problem.file import Problem as Problem
from .problem.file import load_problem as load_problem
from .problem.file import problem_from_dict as problem_from_dict
from .rollout.quiet import quiet_output as quiet_output
from .results import IdentificationResult as IdentificationResult
from .results import ParameterResult as ParameterResult
from .results import results_document as results_document
from .output.write import result_names as result_names
from .output.write import write_results as write_results

__all__ = ["DataSource", "IdentificationResult", "OptimizerSpec", "ParameterResult", "ParameterSpec", "Problem",
           "identify", "load_problem", "load_source", "problem_from_dict", "quiet_output", "result_names",
           "results_document", "write_results"]
