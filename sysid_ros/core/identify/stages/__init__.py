"""The run's six stages, in order, each a function of what the stages before it returned.

- `load` (`load_run`): the model, bounds, the checked problem; bags and npz files -> joint samples and
  commands (`load_source`), cut into segments.
- `warm_start` (`start_values`): start values from the linear regression, the prior.
- `optimize` (`fit_parameters`): the residual of every segment, minimised.
- `intervals` (`estimate_spread`): intervals, the start states' noise, misfit widening, the time-offset scan.
- `validation` (`validate`): metrics, held-out replays and torque; `torque_fit`: an arm's fit on the measured
  torque, which the result carries when it beats the window fit on the training rows.
- `summarize` (`parameter_results`): each parameter's result (`carried_parameters`: as the torque fit holds it).
"""
