"""Models linear in their parameters (tau = Phi theta) and their least-squares fits.

- `regression`: the shared machinery: row selection, `fit_linear`, block bootstrap, `FitThresholds`, validation.
- `joint_model`: one joint: `JointModel` (servo) and `PendulumModel`, their columns and fits.
- `arm_regressor`: a whole arm's inverse dynamics from MuJoCo (`ArmRegressor`, base parameters, `fit_arm`).
- `arm_friction`: per-joint friction (offset, viscous, smooth Coulomb) on top of the arm's rigid bodies.
- `base_fit`: the base-parameter fit of an arm with measured torque (weighted LS, then physically consistent by
  log-Cholesky), written back into the MJCF.
- `drive_gains`: each joint's drive gain (torque scale) from an unloaded and a loaded run with a known payload.
- `periodic`: a periodic record averaged over its periods and differentiated in the frequency domain; `Periods`
  (where they lie) and the check that consecutive periods agree (`check_period`).
"""

from .. import front_door

EXPORTS = {
    "ALL_TERMS": ".joint_model",
    "ArmFit": ".arm_regressor",
    "ArmFrictionFit": ".arm_friction",
    "ArmRegressor": ".arm_regressor",
    "BaseFitSettings": ".base_fit",
    "CalibrationRun": ".drive_gains",
    "DriveGains": ".drive_gains",
    "calibrate_drive_gains": ".drive_gains",
    "calibration_run": ".drive_gains",
    "BaseParameters": ".arm_regressor",
    "BootstrapSettings": ".regression",
    "DEFAULT_KEEP_HZ": ".periodic",
    "FRICTION_SOLIMP": ".base_fit",
    "FRICTION_SOLREF": ".base_fit",
    "FitThresholds": ".regression",
    "INERTIAL_NAMES": ".arm_regressor",
    "JOINT_TERMS": ".arm_regressor",
    "JointFit": ".joint_model",
    "JointModel": ".joint_model",
    "KEEP_FACTOR": ".periodic",
    "LinearFit": ".regression",
    "MIN_CORRELATION": ".periodic",
    "PENDULUM_TERMS": ".joint_model",
    "PRISMATIC_TERMS": ".joint_model",
    "PendulumModel": ".joint_model",
    "PeriodCheck": ".periodic",
    "PeriodicRecord": ".periodic",
    "Periods": ".periodic",
    "REVOLUTE_TERMS": ".joint_model",
    "RowSelection": ".regression",
    "Rows": ".base_fit",
    "base_parameters": ".arm_regressor",
    "body_inertial_parameters": ".arm_regressor",
    "check_period": ".periodic",
    "concatenate": ".arm_friction",
    "condition_number": ".regression",
    "coulomb_columns": ".arm_friction",
    "friction_loss_columns": ".arm_friction",
    "default_settle_s": ".periodic",
    "filtered_rows": ".base_fit",
    "fit_arm": ".arm_regressor",
    "fit_arm_friction": ".arm_friction",
    "fit_base_parameters": ".base_fit",
    "physically_consistent": ".base_fit",
    "block_normal_equations": ".base_fit",
    "read_effort_scale": ".drive_gains",
    "fit_joint_model": ".joint_model",
    "fit_linear": ".regression",
    "fit_pendulum": ".joint_model",
    "joint_columns": ".joint_model",
    "pendulum_columns": ".joint_model",
    "periodic_record": ".periodic",
    "select_rows": ".regression",
    "structural_base_parameters": ".arm_regressor",
    "weigh_joints": ".regression",
}
"""Name -> the module that defines it, imported on first use (callers pay only for what they use)."""

__getattr__, __dir__, __all__ = front_door(__name__, EXPORTS, eager=())
