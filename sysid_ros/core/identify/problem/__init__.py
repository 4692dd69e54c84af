"""The problem and the model it builds.

- `file`: the problem file's format (`load_problem`, `problem_from_dict` -> a frozen `Problem`).
- `model`: the problem's model prepared (`problem_spec`) and the problem checked against it (`check_problem`);
  `model_cache` compiles it once per process; `spec_values` reads parameter values out of the model.
- `parameters`: parameter specs -> a mujoco.sysid ParameterDict (modifiers on the spec); `inertia`: a body's 10
  inertial parameters in log-Cholesky coordinates; `arm_models`: URDF arms as identification models.
- `plausibility`: bounds from physics where the problem gives none, and the optional prior.
- `overrides`: the problem pointed at other data files (`with_data`).
"""
