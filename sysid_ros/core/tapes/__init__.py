"""Excitation and evaluation tapes: designed joint motion that stays inside each joint's envelope, and its playback.

A `Tape` is named, seeded and serialisable (`to_dict` / `Tape.from_dict`, YAML-safe). `sample` gives
position, velocity and acceleration (or torque) with analytic derivatives; `duration_s` its length;
`to_commands` the command stream at the tape's rate. Builders per kind (`build` dispatches) take
per-joint envelopes and a command rate, scale the motion to the envelope and verify it with
`check_tape`. Tape sets for a servo: `identification`, `steps`, `evaluation`; `plan_seconds`
says how long the robot will move. `stretched` and `shrunk` ease a tape a joint cannot follow.

- `tape`: the `Tape` and its curves (sine, chirp, knots), sampling and the command stream.
- `kinds`: a builder per kind of tape (chirp, multisine, steps, sweep, plateaus, pick-and-place, ...).
- `moves`: the room a joint has to move in, and `KnotPath`, synchronised knot curves for several joints.
- `sets`: the tape sets a servo is identified, swept and evaluated on; `plan_seconds`.
- `optimal`: the `optimal` kind: a periodic Fourier-series motion designed for a model's base regressor.
- `joint_design`: the same idea for one servo joint (`joint_optimal`): a short Fourier tape for its five-term regressor.
- `plan`: what a position tape will tell a whole arm's identification (`ExcitationPlan`), before anything moves;
  the periods a recorder stores with a periodic tape (`periodic_metadata`) and reads back (`recorded_periods`).
- `ease`: a tape stretched or shrunk for a joint that cannot follow it.
- `envelope`: a joint's safety `Envelope`; `check_tape` (before anything moves) and `check_sample` (live).
- `playback`: `Playback`, the command due now and the guard on live feedback, as the recorder plays a tape.
"""

from .. import front_door
from .optimal import optimal as optimal  # a submodule's name: imported now
from .plan import plan as plan  # a submodule's name: imported now

EXPORTS = {
    "ACCEL_USE": ".moves",
    "BUILDERS": ".kinds",
    "ChirpCurve": ".tape",
    "Curve": ".tape",
    "Design": ".optimal",
    "Envelope": ".envelope",
    "ExcitationPlan": ".plan",
    "FourierCurve": ".tape",
    "JointDesign": ".joint_design",
    "KINDS": ".tape",
    "KnotCurve": ".tape",
    "KnotPath": ".moves",
    "LEAD_S": ".kinds",
    "MODEL_KINDS": ".tape",
    "PLATEAU_FRACTIONS": ".kinds",
    "Playback": ".playback",
    "Room": ".moves",
    "SPEED_USE": ".moves",
    "SafetyMargins": ".playback",
    "SineCurve": ".tape",
    "TORQUE_USE": ".moves",
    "TRAVEL_USE": ".moves",
    "Tape": ".tape",
    "TapeSample": ".tape",
    "build": ".kinds",
    "check_sample": ".envelope",
    "check_tape": ".envelope",
    "chirp": ".kinds",
    "chirp_top_hz": ".kinds",
    "cycle": ".kinds",
    "dither": ".kinds",
    "duration_s": ".tape",
    "envelopes_from_parameters": ".playback",
    "evaluation": ".sets",
    "fast_moves": ".kinds",
    "identification": ".sets",
    "jog": ".kinds",
    "joint_optimal": ".joint_design",
    "min_move_time_s": ".moves",
    "multisine": ".kinds",
    "outside_room": ".moves",
    "periodic_metadata": ".plan",
    "periods_of": ".plan",
    "pickplace": ".kinds",
    "plan_seconds": ".sets",
    "plateau_speeds_rad_s": ".kinds",
    "plateaus": ".kinds",
    "probe_times": ".tape",
    "recorded_periods": ".plan",
    "room": ".moves",
    "sample": ".tape",
    "self_collisions": ".plan",
    "shrunk": ".ease",
    "steps": ".kinds",
    "stretched": ".ease",
    "sweep": ".kinds",
    "to_commands": ".tape",
}
"""Name -> the module that defines it, imported on first use (callers pay only for what they use)."""

__getattr__, __dir__, __all__ = front_door(
    __name__,
    EXPORTS,
    eager=(
        "optimal",
        "plan",
    ),
)
