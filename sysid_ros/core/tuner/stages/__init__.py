"""The tuning stages.

- `analytic`: Stage 0 (`analytic_start`, moves nothing); `identification`: Stage 1 (`identify_servo`, the joint
  model from a chirp and identification tapes); `sweep`: Stage 2 (ringing sweep, deploy ceiling); `refine`:
  Stage 3 (coordinate passes, gates, cost; twin screening); `verify`: Stage 4 on held-out tapes.
"""
