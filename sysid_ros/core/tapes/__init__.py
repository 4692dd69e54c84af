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
- `plan`: what a position tape will tell a whole arm's identification (`ExcitationPlan`), before anything moves.
- `ease`: a tape stretched or shrunk for a joint that cannot follow it.
- `envelope`: a joint's safety `Envelope`; `check_tape` (before anything moves) and `check_sample` (live).
- `playback`: `Playback`, the command due now and the guard on live feedback, as the recorder plays a tape.
"""

from .ease import shrunk, stretched
from .envelope import Envelope, check_sample, check_tape
from .kinds import (BUILDERS, LEAD_S, PLATEAU_FRACTIONS, build, chirp, chirp_top_hz, cycle, dither, fast_moves, jog,
    multisine, pickplace, plateau_speeds_rad_s, plateaus, steps, sweep)
from .moves import ACCEL_USE, SPEED_USE, TORQUE_USE, TRAVEL_USE, Room, min_move_time_s, room
from .optimal import Design, optimal
from .plan import ExcitationPlan, plan
from .playback import Playback, SafetyMargins, envelopes_from_parameters
from .sets import evaluation, identification, plan_seconds
from .tape import (KINDS, MODEL_KINDS, ChirpCurve, Curve, FourierCurve, KnotCurve, SineCurve, Tape, TapeSample, duration_s,
                   probe_times, sample, to_commands)

__all__ = [
    "ACCEL_USE", "BUILDERS", "KINDS", "LEAD_S", "MODEL_KINDS", "PLATEAU_FRACTIONS", "SPEED_USE", "TORQUE_USE", "TRAVEL_USE",
    "ChirpCurve", "Curve", "Design", "Envelope", "ExcitationPlan", "FourierCurve", "KnotCurve", "Playback", "Room",
    "SafetyMargins", "SineCurve", "Tape", "TapeSample", "build", "check_sample", "check_tape", "chirp", "chirp_top_hz", "cycle", "dither", "duration_s",
    "envelopes_from_parameters", "evaluation", "fast_moves", "identification", "jog", "min_move_time_s", "multisine",
    "optimal", "pickplace", "plan", "plan_seconds", "plateau_speeds_rad_s", "plateaus", "probe_times", "room",
    "sample", "shrunk", "steps", "stretched", "sweep", "to_commands",
]
