"""Online identification of a joint's linear parameters, following changes with a confidence score (seed 002).

    est = OnlineEstimator(pendulum_config("hinge", length_m=0.5, rotor_inertia_kg_m2=1e-4))
    for chunk in stream:                      # JointSamples with position and effort
        for event in est.update(chunk):       # ChangeDetected | ParameterChange | ExcitationRequest | ...
            ...
        est.estimate                          # Estimate: values, confidence, weight per parameter

See docs/online_estimator.md.
"""

from .config import (DEFAULT_CHANGE_THRESHOLD, DEFAULT_PRECISION, OnlineConfig, WindowModel, joint_window_model,
                     pendulum_config, pendulum_window_model)
from .estimator import OnlineEstimator
from .reports import (ACCEPTED, DISCARDED, PENDING, REPLACED, SETTLING, ChangeDetected, Estimate, Event,
                      ExcitationRecovered, ExcitationRequest, ParameterChange, WindowFit)
from .window import fit_window

__all__ = ["ACCEPTED", "DEFAULT_CHANGE_THRESHOLD", "DEFAULT_PRECISION", "DISCARDED", "PENDING", "REPLACED",
           "SETTLING", "ChangeDetected", "Estimate", "Event", "ExcitationRecovered", "ExcitationRequest",
           "OnlineConfig", "OnlineEstimator", "ParameterChange", "WindowFit", "WindowModel", "fit_window",
           "joint_window_model", "pendulum_config", "pendulum_window_model"]
