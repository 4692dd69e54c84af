"""Values no joint measures: a row holding one is garbage (a logger's corrupted line), dropped and counted.

The position bound is generous on purpose: a continuous joint (a wheel, a turntable) accumulates its angle,
100 rad/s for a day is 8.6e6 rad; corrupted rows seen in real logs held 1e98-1e254 rad.
"""

MAX_ABS_POSITION = 1e7
"""rad or m: beyond this a position is corrupted, not measured."""
MAX_ABS_RATE = 1e6
"""rad/s, m/s, N m or N: beyond this a velocity or an effort is corrupted, not measured."""
