"""Online identification of a joint's linear parameters, following changes with a confidence score.

    est = OnlineEstimator(pendulum_config("hinge", length_m=0.5, rotor_inertia_kg_m2=1e-4))
    for chunk in stream:                      # JointSamples with position and effort
        for event in est.update(chunk):       # ChangeDetected | ParameterChange | ExcitationRequest | ...
            ...
        est.estimate                          # Estimate: values, confidence, weight per parameter

See docs/online_estimator.md.

- `config`: the estimator's settings and window models; `payload`: a whole arm's payload as a window model.
- `window`: one window's fit (derivatives, linear fit, confidence per parameter); `timebase`: a log's samples
  resampled onto a uniform grid first; `calibration`: its standard errors calibrated by the record's scatter.
- `estimator`: `OnlineEstimator`, the streaming estimator; `detector`: the residual change detector; `guard`: the
  input guard (stale efforts, position jumps, dead input pause estimation).
- `reports`: the estimate, events and window fits it reports; `replay`: the estimator over a recorded bag.
"""

from .config import (DEFAULT_CHANGE_THRESHOLD, DEFAULT_PRECISION, OnlineConfig, WindowModel, joint_window_model,
                     pendulum_config, pendulum_window_model)
from .estimator import OnlineEstimator
from .payload import FIRST_MOMENTS, WITH_INERTIA, PayloadWindowModel, payload_config
from .reports import (ACCEPTED, DISCARDED, PENDING, REPLACED, SETTLING, ChangeDetected, Estimate, Event,
                      ExcitationRecovered, ExcitationRequest, InputPaused, InputResumed, ParameterChange, WindowFit,
                      event_record)
from .window import fit_window

__all__ = ["ACCEPTED", "DEFAULT_CHANGE_THRESHOLD", "DEFAULT_PRECISION", "DISCARDED", "FIRST_MOMENTS", "PENDING",
           "REPLACED", "SETTLING", "WITH_INERTIA", "ChangeDetected", "Estimate", "Event", "ExcitationRecovered",
           "ExcitationRequest", "InputPaused", "InputResumed", "OnlineConfig", "OnlineEstimator", "ParameterChange",
           "PayloadWindowModel", "WindowFit", "WindowModel", "event_record", "fit_window", "joint_window_model",
           "payload_config", "pendulum_config", "pendulum_window_model"]
