"""Excitation and evaluation tapes: designed joint motion that stays inside each joint's envelope.

A `Tape` is named, seeded and serialisable (`to_dict` / `Tape.from_dict`, YAML-safe). `sample` gives
position, velocity and acceleration (or torque) with analytic derivatives; `duration_s` its length;
`to_commands` the command stream at the tape's rate. Builders per kind (`build` dispatches) take
per-joint envelopes and a command rate, scale the motion to the envelope and verify it with
`envelope.check_tape`. Tape sets for a servo: `identification`, `steps`, `evaluation`; `plan_seconds`
says how long the robot will move. `stretched` and `shrunk` ease a tape a joint cannot follow.
"""

from .ease import shrunk, stretched
from .kinds import (BUILDERS, LEAD_S, PLATEAU_FRACTIONS, build, chirp, chirp_top_hz, cycle, dither, fast_moves,
                    jog, multisine, pickplace, plateau_speeds_rad_s, plateaus, steps, sweep)
from .model import (KINDS, ChirpCurve, Curve, KnotCurve, SineCurve, Tape, TapeSample, duration_s, probe_times,
                    sample, to_commands)
from .moves import ACCEL_USE, SPEED_USE, TORQUE_USE, TRAVEL_USE, Room, min_move_time_s, room
from .sets import evaluation, identification, plan_seconds

__all__ = [
    "ACCEL_USE", "BUILDERS", "KINDS", "LEAD_S", "PLATEAU_FRACTIONS", "SPEED_USE", "TORQUE_USE", "TRAVEL_USE",
    "ChirpCurve", "Curve", "KnotCurve", "Room", "SineCurve", "Tape", "TapeSample",
    "build", "chirp", "chirp_top_hz", "cycle", "dither", "duration_s", "evaluation", "fast_moves",
    "identification", "jog", "min_move_time_s", "multisine", "pickplace", "plan_seconds", "plateau_speeds_rad_s",
    "plateaus", "probe_times", "room", "sample", "shrunk", "steps", "stretched", "sweep", "to_commands",
]
