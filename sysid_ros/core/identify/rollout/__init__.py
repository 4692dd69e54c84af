"""The glue to mujoco.sysid's rollouts.

- `sequences`: joint arrays <-> mujoco.sysid data (TimeSeries, initial states, ModelSequences), every data trap
  of mujoco.sysid 4.0.0 guarded; `timeseries_to_samples` and `control_to_commands` bring them back to arrays.
- `residual`: the batched rollout residual; `start_states`: where measured start states come from;
  `stopping`: the statistical stopping rule; `quiet`: silencing the backends.
"""
