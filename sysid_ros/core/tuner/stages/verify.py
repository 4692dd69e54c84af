"""Stage 4: the as-found controller, the pick and the analytic start replay held-out tapes; every gate again.

A controller must beat as found by 10 % in cost. The analytic start is the incumbent: the search's pick
replaces it only if it is 10 % better than the start too. If nothing passes, as found stays and the
result is not an improvement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ...linear import JointModel
from ...tapes import Tape
from ..plants.joint import Plant
from ..scoring import Score, SweepLimits, cost, gate_failures
from ..servo import Controller
from .refine import ceiling_gate_wn, evaluate

MARGIN = 0.9


@dataclass(frozen=True)
class Verified:
    """One controller on the held-out tapes."""

    role: str  # "as found", "pick" or "analytic start"
    controller: Controller
    score: Score
    cost: float
    failures: tuple[str, ...]

    @property
    def passes(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict[str, object]:
        return {
            "role": self.role,
            "label": self.controller.label,
            "cost": self.cost if math.isfinite(self.cost) else None,
            "failures": list(self.failures),
            "score": self.score.as_dict(),
        }


@dataclass(frozen=True)
class VerifyResult:
    entries: tuple[Verified, ...]
    chosen: Verified
    improved: bool
    notes: tuple[str, ...]


def verify(
    plant: Plant,
    tapes_: Sequence[Tape],
    *,
    model: JointModel,
    limits: SweepLimits,
    wn_max_rad_s: float,
    as_found: Controller,
    pick: Controller | None,
    start: Controller | None,
    repeats: int = 1,
) -> VerifyResult:
    """Stage 4 on held-out `tapes_`."""
    base = evaluate(plant, as_found, tapes_, repeats)
    entries = [Verified("as found", as_found, base, cost(base, base, limits.stop_allocation_mrad), ())]
    notes: list[str] = []
    for role, controller in (("pick", pick), ("analytic start", start)):
        if controller is None:
            continue
        got = evaluate(plant, controller, tapes_, repeats)
        value = cost(got, base, limits.stop_allocation_mrad)
        wn = ceiling_gate_wn(controller.gains, as_found.gains, model)
        fails = list(gate_failures(got, base, limits, wn, wn_max_rad_s))
        if value > MARGIN * entries[0].cost:
            fails.append(f"cost {value:.3f} does not beat as found {entries[0].cost:.3f} by 10 %")
        entries.append(Verified(role, controller, got, value, tuple(fails)))
    by_role = {e.role: e for e in entries}
    p, s = by_role.get("pick"), by_role.get("analytic start")
    if s is not None and s.passes and p is not None and p.passes:
        if p.cost <= MARGIN * s.cost:
            chosen = p
        else:
            chosen = s
            notes.append(f"the pick ({p.cost:.3f}) is not 10 % better than the analytic start ({s.cost:.3f})")
    elif p is not None and p.passes:
        chosen = p
    elif s is not None and s.passes:
        chosen = s
    else:
        chosen = entries[0]
        notes.append(
            "nothing passed on the held-out tapes: as found stays"
            if len(entries) > 1
            else "no candidate to verify: as found stays"
        )
    return VerifyResult(tuple(entries), chosen, chosen.role != "as found", tuple(notes))
