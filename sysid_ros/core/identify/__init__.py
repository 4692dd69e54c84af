"""Simulation-based identification on mujoco.sysid: a problem file in, `identified.yaml` and a report out.

- `problem/`: the problem file and the model it builds (parameters, bounds from physics, inertia, URDF arms).
- `stages/`: the run's six stages (load, warm start, optimize, intervals, validation, summarize).
- `rollout/`: the glue to mujoco.sysid (data sequences, the residual, start states, stopping rule).
- `checks/`: what judges a fit (start-state noise, misfit, time offset, held-out torque, the suspect warnings).
- `output/`: `identified.yaml`, the report, the identified MJCF/URDF and values.
- `pipeline`: `identify`, the stages in order; `results`: what a run returns (`IdentificationResult`).
"""

from .. import front_door

EXPORTS = {
    "COMPONENTS": ".problem.file",
    "CONTROLS": ".problem.overrides",
    "CachedBuild": ".problem.parameters",
    "DRIVE_ACCELERATION_RAD_S2": ".problem.plausibility",
    "DataSource": ".problem.file",
    "FRICTION_FRACTION": ".problem.plausibility",
    "IIWA_FLANGE": ".problem.arm_models",
    "IIWA_JOINTS": ".problem.arm_models",
    "IIWA_TORQUE_LIMITS_NM": ".problem.arm_models",
    "IdentificationResult": ".results",
    "MASS_RANGE": ".problem.plausibility",
    "NegligibleStep": ".rollout.stopping",
    "OptimizerSpec": ".problem.file",
    "ParameterResult": ".results",
    "ParameterSpec": ".problem.file",
    "Payload": ".problem.arm_models",
    "PeriodicSpec": ".problem.file",
    "Problem": ".problem.file",
    "RunLog": ".results",
    "ScaledResidual": ".rollout.residual",
    "StoppingJacobian": ".rollout.stopping",
    "bound_warnings": ".checks.suspect",
    "build_parameters": ".problem.parameters",
    "check_problem": ".problem.model",
    "choose_start_states": ".rollout.start_states",
    "compiled_model": ".problem.model_cache",
    "coupled_joints": ".stages.torque_fit",
    "fit_on_parts": ".stages.torque_fit",
    "fitted_bodies": ".stages.torque_fit",
    "identifiable": ".stages.summarize",
    "identified_urdf": ".output.export",
    "identified_xml": ".output.export",
    "identify": ".pipeline",
    "iiwa_mjcf": ".problem.arm_models",
    "inertia_tensor": ".problem.spec_values",
    "load_problem": ".problem.file",
    "load_run": ".stages.load",
    "load_source": ".stages.load",
    "load_source_periods": ".stages.load",
    "mass_sum_groups": ".problem.arm_models",
    "measured_velocity": ".checks.torque_validation",
    "physical_body": ".stages.torque_fit",
    "physical_bounds": ".problem.plausibility",
    "prepare_urdf_spec": ".problem.arm_models",
    "problem_from_dict": ".problem.file",
    "problem_spec": ".problem.model",
    "pybullet_data_file": ".problem.arm_models",
    "quiet_output": ".rollout.quiet",
    "result_names": ".output.write",
    "results_document": ".results",
    "rms_per_joint": ".checks.torque_validation",
    "set_rollout_threads": ".rollout.residual",
    "step_standard_errors": ".rollout.stopping",
    "torque_rows": ".checks.torque_validation",
    "torque_validation": ".checks.torque_validation",
    "with_data": ".problem.overrides",
    "write_mjcf": ".problem.arm_models",
    "write_results": ".output.write",
}
"""Name -> the module that defines it, imported on first use (callers pay only for what they use)."""

__getattr__, __dir__, __all__ = front_door(__name__, EXPORTS, eager=())
