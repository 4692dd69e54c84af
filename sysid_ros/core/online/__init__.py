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

from .. import front_door

EXPORTS = {
    "ACCEPTED": ".reports",
    "ChangeDetected": ".reports",
    "DEFAULT_CHANGE_THRESHOLD": ".config",
    "DEFAULT_PRECISION": ".config",
    "DISCARDED": ".reports",
    "Estimate": ".reports",
    "Event": ".reports",
    "ExcitationRecovered": ".reports",
    "ExcitationRequest": ".reports",
    "FIRST_MOMENTS": ".payload",
    "InputPaused": ".reports",
    "InputResumed": ".reports",
    "OnlineConfig": ".config",
    "OnlineEstimator": ".estimator",
    "PENDING": ".reports",
    "ParameterChange": ".reports",
    "PayloadWindowModel": ".payload",
    "REPLACED": ".reports",
    "SETTLING": ".reports",
    "WITH_INERTIA": ".payload",
    "WindowFit": ".reports",
    "WindowModel": ".config",
    "event_record": ".reports",
    "fit_window": ".window",
    "joint_window_model": ".config",
    "last_link": ".replay",
    "load_model": ".payload",
    "on_uniform_grid": ".timebase",
    "payload_config": ".payload",
    "payload_inertia": ".payload",
    "pendulum_config": ".config",
    "pendulum_window_model": ".config",
    "physical_payload": ".payload",
    "prepare": ".window",
    "replay_bag": ".replay",
}
"""Name -> the module that defines it, imported on first use (callers pay only for what they use)."""

__getattr__, __dir__, __all__ = front_door(__name__, EXPORTS, eager=())
