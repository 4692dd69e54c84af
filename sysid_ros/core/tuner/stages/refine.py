"""Stage 3: three coordinate passes on the evaluation tapes, every gate against the as-found run, the cost.

1. Feed-forward at the as-found gains: feedback only, and the model's feed-forward with Coulomb at
   0, 0.25, 0.5, 0.75, 1x, cut to the terms the plant can send; the seed and its gains under each join.
2. Gains at the best feed-forward: wn in {as found, 0.6, 0.8, 1.0 x wn_max, the seed's} x zeta in
   {0.65, 0.8, 1.0}, at or under the ceiling and inside the guard.
3. Feed-forward again at the best gains.
Feedback alone is kept unless a feed-forward beats it by 10 %; the pick must beat as found by 10 %.
With a twin, each pass is screened on the twin first and the plant plays only what it cannot rule out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ...linear import JointModel
from ...tapes import Tape
from ..plants.joint import Plant
from ..scoring import Score, SweepLimits, cost, gate_failures, score
from ..servo import Controller, DriveGains, Goal, Servo, feedforward_from, gains_for, loop_of

COULOMB_SCALES = (0.0, 0.25, 0.5, 0.75, 1.0)
WN_FRACTIONS = (0.6, 0.8, 1.0)
ZETAS = (0.65, 0.8, 1.0)
FF_MARGIN = 0.9  # a feed-forward must cost <= 0.9 x feedback alone
PICK_MARGIN = 0.9  # the pick must cost <= 0.9 x as found (2.0)
TWIN_RULE_OUT = 1.1  # the twin rules out what costs more than 1.1 x its best in the pass
TWIN_MAX_PLAYS = 3  # and the plant plays at most this many of each pass, in the twin's order


@dataclass(frozen=True)
class Candidate:
    """One controller tried: where, its loop, score, cost, and the gates it failed (on the plant or the twin)."""

    controller: Controller
    stage: str
    wn_rad_s: float
    zeta: float
    score: Score | None
    cost: float
    failures: tuple[str, ...]
    twin_cost: float | None = None
    played_on_plant: bool = True

    @property
    def admissible(self) -> bool:
        return self.played_on_plant and not self.failures and math.isfinite(self.cost)

    def as_dict(self) -> dict[str, object]:
        ff = self.controller.feedforward
        return {
            "label": self.controller.label,
            "stage": self.stage,
            "kp": self.controller.gains.kp,
            "kd": self.controller.gains.kd,
            "wn_rad_s": self.wn_rad_s,
            "zeta": self.zeta,
            "feedforward_coulomb_nm": None if ff is None else ff.coulomb_nm,
            "cost": self.cost if math.isfinite(self.cost) else None,
            "failures": list(self.failures),
            "twin_cost": self.twin_cost,
            "played_on_plant": self.played_on_plant,
        }


def ceiling_gate_wn(gains: DriveGains, as_found: DriveGains | None, model: JointModel) -> float | None:
    """The wn the deploy-ceiling gate checks, or None for the as-found gains: their loop is the one already
    running (a host feed-forward does not change it), and as found is what stays when nothing passes, so
    the ceiling, which bounds the gains the tuner sets, cannot make them worse than keeping as found."""
    return None if as_found is not None and gains == as_found else loop_of(gains, model).wn_rad_s


def evaluate(plant: Plant, controller: Controller, tapes_: Sequence[Tape], repeats: int = 1) -> Score:
    """Play every tape `repeats` times under `controller` and score the plays pooled."""
    return score([plant.play(tape, controller) for _ in range(repeats) for tape in tapes_])


@dataclass(kw_only=True)
class Judge:
    """Scores candidates on a plant against its as-found score; optionally screens on a twin first."""

    plant: Plant
    tapes: Sequence[Tape]
    model: JointModel
    limits: SweepLimits
    as_found: Score
    wn_max_rad_s: float
    goal: Goal
    twin: Plant | None = None
    twin_as_found: Score | None = None
    as_found_gains: DriveGains | None = None  # exempt from the ceiling gate (see `ceiling_gate_wn`)

    def __post_init__(self) -> None:
        self._seen: dict[tuple[str, DriveGains, JointModel | None], Candidate] = {}

    def judge(self, controller: Controller, stage: str, on: str = "plant") -> Candidate:
        """One controller's candidate; a controller already judged on the same plant is not played again."""
        key = (on, controller.gains, controller.feedforward)
        if key in self._seen:
            return replace(self._seen[key], controller=controller, stage=stage)
        self._seen[key] = got = self._judge(controller, stage, on)
        return got

    def _judge(self, controller: Controller, stage: str, on: str) -> Candidate:
        loop = loop_of(controller.gains, self.model)
        plant, base = (self.plant, self.as_found) if on == "plant" else (self.twin, self.twin_as_found)
        assert plant is not None and base is not None
        got = evaluate(plant, controller, self.tapes, self.goal.repeats)
        fails = gate_failures(
            got,
            base,
            self.limits,
            ceiling_gate_wn(controller.gains, self.as_found_gains, self.model),
            self.wn_max_rad_s,
        )
        value = cost(got, base, self.limits.stop_allocation_mrad)
        if on == "twin":
            return Candidate(controller, stage, loop.wn_rad_s, loop.zeta, None, math.inf, fails, value, False)
        return Candidate(controller, stage, loop.wn_rad_s, loop.zeta, got, value, fails)

    def judge_all(self, controllers: Sequence[Controller], stage: str) -> list[Candidate]:
        """Every controller on the plant, or with a twin: those the twin cannot rule out."""
        if self.twin is None:
            return [self.judge(c, stage) for c in controllers]
        screened = [self.judge(c, stage, on="twin") for c in controllers]
        ok = [s for s in screened if not s.failures]
        best = min((s.twin_cost for s in ok), default=math.inf)
        ranked = sorted((s for s in ok if s.twin_cost <= TWIN_RULE_OUT * best), key=lambda s: s.twin_cost)
        played: dict[int, Candidate] = {}
        for s in ranked[:TWIN_MAX_PLAYS]:  # play in the twin's order until enough pass on the plant
            got = self.judge(s.controller, stage)
            played[id(s)] = replace(got, twin_cost=s.twin_cost)
            if sum(c.admissible for c in played.values()) >= self.goal.twin_keep_per_pass:
                break
        out = []
        for s in screened:
            if id(s) in played:
                out.append(played[id(s)])
            else:
                why = s.failures or (
                    f"twin cost {s.twin_cost:.3g} > {TWIN_RULE_OUT} x best {best:.3g}"
                    if s.twin_cost > TWIN_RULE_OUT * best
                    else "ranked below the twin's kept",
                )
                out.append(replace(s, failures=tuple(f"twin: {w}" for w in why)))
        return out


def best_feedforward(cands: Sequence[Candidate]) -> Candidate | None:
    """Feedback only unless a feed-forward beats it by 10 %; None when nothing is admissible."""
    ok = [c for c in cands if c.admissible]
    if not ok:
        return None
    feedback = [c for c in ok if c.controller.feedforward is None]
    best = min(ok, key=lambda c: c.cost)
    if feedback:
        fb = min(feedback, key=lambda c: c.cost)
        if best.controller.feedforward is not None and best.cost > FF_MARGIN * fb.cost:
            return fb
    return best


def feedforwards(model: JointModel, terms: tuple[str, ...]) -> list[tuple[str, JointModel | None]]:
    """The feed-forwards to try: none, and the model's `terms` at each Coulomb scale (no terms: none only)."""
    out: list[tuple[str, JointModel | None]] = [("feedback only", None)]
    if not terms:
        return out
    out += [(f"ff coulomb x{k:g}", feedforward_from(model, k, terms)) for k in COULOMB_SCALES]
    return out


@dataclass(frozen=True)
class RefineResult:
    """Every candidate, the pick (None when as found stays) and why."""

    candidates: tuple[Candidate, ...]
    pick: Candidate | None
    notes: tuple[str, ...]


def refine(judge: Judge, servo: Servo, seed: Controller | None, terms: tuple[str, ...]) -> RefineResult:
    """Stage 3's three coordinate passes."""
    model = judge.model
    found = servo.gains
    notes: list[str] = []
    all_cands: list[Candidate] = []

    def ff_pass(gains: DriveGains, stage: str, extra: Sequence[Controller] = ()) -> Candidate | None:
        controllers = [Controller(gains, ff, f"{stage}: {label}") for label, ff in feedforwards(model, terms)]
        controllers += list(extra)
        cands = judge.judge_all(controllers, stage)
        all_cands.extend(cands)
        return best_feedforward(cands)

    extra: list[Controller] = []
    if seed is not None:
        extra.append(replace(seed, label="pass 1: seed"))
        extra += [
            Controller(seed.gains, ff, f"pass 1: seed gains, {label}") for label, ff in feedforwards(model, terms)
        ]
    best1 = ff_pass(found, "pass 1", extra)
    ff1 = best1.controller.feedforward if best1 else None
    if best1 is None:
        notes.append("pass 1: nothing admissible; pass 2 runs feedback only")
    wns = [loop_of(found, model).wn_rad_s] + [f * judge.wn_max_rad_s for f in WN_FRACTIONS]
    if seed is not None:
        wns.append(loop_of(seed.gains, model).wn_rad_s)
    controllers = []
    for wn in sorted(set(round(w, 9) for w in wns)):
        if wn > judge.wn_max_rad_s * (1 + 1e-9):
            notes.append(f"pass 2: wn {wn:.4g} above the ceiling {judge.wn_max_rad_s:.4g} left out")
            continue
        for zeta in ZETAS:
            gains, why = gains_for(wn, zeta, model, servo, found)
            controllers.append(Controller(gains, ff1, f"pass 2: wn {wn:.4g} zeta {zeta:g}"))
    cands2 = judge.judge_all(controllers, "pass 2")
    all_cands.extend(cands2)
    ok2 = [c for c in cands2 if c.admissible]
    best2 = min(ok2, key=lambda c: c.cost) if ok2 else best1
    best3 = ff_pass(best2.controller.gains, "pass 3") if best2 else None
    ok = [c for c in (best1, best2, best3) if c is not None]
    pick = min(ok, key=lambda c: c.cost) if ok else None
    if pick is not None and pick.cost > PICK_MARGIN * 2.0:
        notes.append(f"best cost {pick.cost:.3f} does not beat as found (2.0) by 10 %: as found stays")
        pick = None
    return RefineResult(tuple(all_cands), pick, tuple(notes))
