"""What judges a fit.

- `start_noise`: the measured start states' noise, weighted or propagated; `misfit`: the residual per signal
  against the declared noise and the block sandwich; `time_offset`: the command/feedback time-offset scan.
- `torque_validation`: held-out joint torque per joint (model file, identified model, friction regression).
- `actuator_limits`: replayed efforts beyond the model's actuator limits (which MuJoCo clamps).
- `suspect`: the warnings that make a run's verdict `suspect`.
"""
