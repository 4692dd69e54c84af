"""Simulation-based identification on mujoco.sysid: problem files, parameters, the run, results, report."""

from .data import load_source
from .pipeline import IdentificationResult, ParameterResult, identify, write_results
from .quiet import quiet_output
from .problem import DataSource, OptimizerSpec, ParameterSpec, Problem, load_problem, problem_from_dict

__all__ = ["DataSource", "IdentificationResult", "OptimizerSpec", "ParameterResult", "ParameterSpec", "Problem",
           "identify", "load_problem", "load_source", "problem_from_dict", "quiet_output", "write_results"]
