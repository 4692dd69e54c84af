"""Models linear in their parameters (tau = Phi theta) and their least-squares fits.

- `regression`: the shared machinery: row selection, `fit_linear`, block bootstrap, `FitThresholds`, validation.
- `joint_model`: one joint: `JointModel` (servo) and `PendulumModel`, their columns and fits.
- `arm_regressor`: a whole arm's inverse dynamics from MuJoCo (`ArmRegressor`, base parameters, `fit_arm`).
- `arm_friction`: per-joint friction (offset, viscous, smooth Coulomb) on top of the arm's rigid bodies.
- `periodic`: a periodic record averaged over its periods and differentiated in the frequency domain.
"""

from .arm_friction import ArmFrictionFit as ArmFrictionFit
from .arm_friction import fit_arm_friction as fit_arm_friction
from .arm_regressor import ArmFit as ArmFit
from .arm_regressor import ArmRegressor as ArmRegressor
from .arm_regressor import fit_arm as fit_arm
from .joint_model import JointFit as JointFit
from .joint_model import JointModel as JointModel
from .joint_model import PendulumModel as PendulumModel
from .joint_model import fit_joint_model as fit_joint_model
from .joint_model import fit_pendulum as fit_pendulum
from .periodic import PeriodicRecord as PeriodicRecord
from .periodic import periodic_record as periodic_record
from .regression import BootstrapSettings as BootstrapSettings
from .regression import FitThresholds as FitThresholds
from .regression import LinearFit as LinearFit
from .regression import RowSelection as RowSelection
from .regression import fit_linear as fit_linear
