"""A controller's PID gains over its ROS 2 parameter services: read, change all-or-nothing, undo exactly.

Names are ours (`gains.<joint>.p|i|d|i_clamp|ff_velocity_scale`) in the journal and the API; the style
(`auto`: detected from the controller's own parameter list, see `core.gains.controller_styles`) translates them
to the controller's own. Every change is written to the gains journal (synced) before anything is sent,
trial gains too; values outside the guard or not finite are never sent; a controller that is missing,
times out or refuses a value is left with its previous gains (checked by reading them back) and the caller
gets a `GainsError` saying which. A roll-back first checks that the controller still holds what the journal
says was sent: gains changed under us (the controller was reloaded) are reported, never overwritten with
stale values.
"""

from __future__ import annotations

import uuid
from typing import Any

from ..core.errors import GainsError
from ..core.gains import (
    FINAL,
    ControllerStyle,
    GainChange,
    GainGuard,
    GainsJournal,
    detect_style,
    from_controller,
    get_style,
    integral_switches,
    is_switch,
    split_parameter_name,
    switch_refusal,
    switched_on,
    to_controller,
)
from .client import RosClient


class GainsOverridden(GainsError):
    """The controller's gains are neither what we sent nor what we found: it was reloaded or changed by someone."""


class ControllerGains:
    """The gains of one controller node, changed only through the journal.

    `controller` resolves in the client's namespace (`sim_robot` is `/r1/sim_robot` for a client in `/r1`); the
    journal keys every change by that fully qualified name, so robots sharing a journal never touch each
    other's changes (an entry without a namespace, from before, is the root namespace's).
    """

    def __init__(
        self,
        client: RosClient,
        controller: str,
        journal: GainsJournal,
        guard: GainGuard = GainGuard(),
        timeout_s: float = 5.0,
        style: str = "auto",
    ) -> None:
        self.client, self.journal, self.guard = client, journal, guard
        self.controller = client.resolve(controller)
        self.timeout_s = timeout_s
        # an unknown style name fails here, before anything is read or sent; "auto" is detected at first use
        self._style: ControllerStyle | None = None if style == "auto" else get_style(style)

    @property
    def style(self) -> ControllerStyle:
        """The controller's naming: as configured, else detected from its own parameter list (once)."""
        if self._style is None:
            self._style = detect_style({n: kind for n, (kind, _) in self._parameter_types().items()})
        return self._style

    def _parameter_types(self) -> dict[str, tuple[str, bool]]:
        try:
            return self.client.parameter_types(self.controller, ["gains"], self.timeout_s)
        except TimeoutError as exc:
            raise GainsError(f"parameter service missing or not answering: {exc}", controller=self.controller) from exc

    def read(self, names: list[str]) -> dict[str, Any]:
        """The controller's current values of `names` (our `gains.<joint>.<gain>` names, whatever its style)."""
        theirs = list(to_controller({n: 0.0 for n in names}, self.style))
        return from_controller(names, self._read(theirs), self.style)

    def _read(self, names: list[str]) -> dict[str, Any]:
        try:
            values = self.client.get_parameters(self.controller, names, self.timeout_s)
        except TimeoutError as exc:
            raise GainsError(f"parameter service missing or not answering: {exc}", controller=self.controller) from exc
        if len(values) != len(names):  # rclpy answers nothing at all when any name is undeclared
            raise GainsError(f"the controller does not have all of the parameters {names}", controller=self.controller)
        missing = [n for n, v in zip(names, values) if v is None]
        if missing:
            raise GainsError(f"the controller has no parameters {missing}", controller=self.controller)
        return {n: v if isinstance(v, (bool, str)) else float(v) for n, v in zip(names, values)}

    def _check(self, values: dict[str, Any]) -> None:
        for name, value in values.items():
            split = split_parameter_name(name)
            reason = (
                switch_refusal(name, value)
                if is_switch(name)
                else f"{name} is not a gain parameter (gains.<joint>.<gain>)"
                if split is None
                else self.guard.reason_to_refuse(split[1], value)
            )
            if reason:
                raise GainsError(f"not sent: {reason}", controller=self.controller, parameter=name)

    def _set(self, values: dict[str, float]) -> str:
        """Set all of `values` at once; '' on success, else why not."""
        try:
            result = self.client.set_parameters_atomically(
                self.controller, to_controller(values, self.style), self.timeout_s
            )
        except TimeoutError as exc:
            return f"parameter service missing or not answering: {exc}"
        return "" if result.successful else f"refused: {result.reason}"

    def with_integral_switch(self, new: dict[str, Any]) -> dict[str, Any]:
        """`new`, plus the controller's anti-windup switch turned on for joints that get integral action while it
        is off (left as found otherwise, and when the controller declares it read-only)."""
        names = [n for n in integral_switches(self.style, new) if n not in new]
        if not names:
            return dict(new)
        read_only = {n for n, (_, fixed) in self._parameter_types().items() if fixed}
        return {**new, **switched_on(self.style, self.read(names), read_only)}

    def apply(self, new: dict[str, Any], reason: str = "") -> GainChange:
        """Journal, then set `new` all or nothing; on any failure the previous values stay (verified)."""
        self._check(new)
        new = self.with_integral_switch(new)
        previous = self.read(list(new))
        change = self.journal.record(
            GainChange(uuid.uuid4().hex, self.controller, previous, dict(new), "pending", reason)
        )
        why = self._set(new)
        if why:
            now = self.read(list(new))
            self.journal.advance(change, "failed", why)
            if now != previous:
                raise GainsError(
                    f"{why}; and the gains now differ from before: {now} (was {previous})", controller=self.controller
                )
            raise GainsError(f"no gain changed: {why}", controller=self.controller)
        return self.journal.advance(change, "applied")

    def begin_trials(self, names: list[str], reason: str) -> GainChange:
        """Journal the current values of `names` before trial gains go out (a tuning session); `end_trials`,
        or `recover` after a crash, restores them exactly (and the anti-windup switches trials may turn on)."""
        switches = integral_switches(self.style, {n: 1.0 for n in names if n.endswith(".i")})
        previous = self.read(list(dict.fromkeys(names + switches)))
        return self.journal.record(
            GainChange(uuid.uuid4().hex, self.controller, previous, dict(previous), "pending", reason)
        )

    def try_gains(self, session: GainChange, values: dict[str, float]) -> None:
        """Send trial gains inside `session` (guarded, all or nothing); GainsError when refused."""
        unknown = sorted(set(values) - set(session.previous))
        if unknown:
            raise GainsError(
                f"trial gains {unknown} are outside the session's journaled parameters", controller=self.controller
            )
        self._check(values)
        values = self.with_integral_switch(values)
        latest = self.journal.changes().get(session.change_id, session)
        self.journal.record(
            GainChange(
                session.change_id,
                self.controller,
                session.previous,
                {**latest.new, **values},
                "applied",
                session.reason,
            )
        )
        why = self._set(values)
        if why:
            self.journal.record(latest)  # the controller kept the gains it had
            raise GainsError(f"trial gains not set: {why}", controller=self.controller)

    def end_trials(self, session: GainChange, reason: str = "tuning session over") -> GainChange:
        return self.rollback(session, reason)

    def keep(self, change: GainChange, reason: str = "") -> GainChange:
        return self.journal.advance(change, "kept", reason)

    def rollback(self, change: GainChange, reason: str = "") -> GainChange:
        """Restore the exact previous values of `change` (all at once) and verify them.

        When the controller holds neither what the journal says was last sent nor the previous values (it was
        reloaded, or someone set its gains), nothing is sent: the change is journaled `overridden` and
        `GainsOverridden` says what was found.
        """
        sent = self.journal.changes().get(change.change_id, change).new
        found = self.read(list(change.previous))
        if found not in (sent, change.previous):
            differ = {n: found[n] for n in found if found[n] != sent[n]}
            why = (
                f"the controller's gains changed under us (reloaded?): {differ}, where the journal has "
                f"{ {n: sent[n] for n in differ} }; not rolled back to the stale {change.previous}"
            )
            self.journal.advance(change, "overridden", why)
            raise GainsOverridden(why, controller=self.controller)
        why = self._set(change.previous)
        now = self.read(list(change.previous))
        if why or now != change.previous:
            raise GainsError(
                f"roll-back not confirmed ({why or 'values differ'}): now {now}, wanted {change.previous}",
                controller=self.controller,
            )
        return self.journal.advance(change, "rolled_back", reason)

    def changes(self) -> list[GainChange]:
        """This controller's changes in the journal (their latest states, in the order they began)."""
        return [c for c in self.journal.changes().values() if "/" + c.controller.lstrip("/") == self.controller]

    def lost(self) -> GainChange | None:
        """The last kept change when the controller no longer holds its gains (reloaded from its parameter file
        without them: persist them with `apply --persist`), journaled `overridden`; else None."""
        kept = [c for c in self.changes() if c.state == "kept"]
        if not kept:
            return None
        now = self.read(list(kept[-1].new))
        if now == kept[-1].new:
            return None
        differ = {n: now[n] for n in now if now[n] != kept[-1].new[n]}
        return self.journal.advance(
            kept[-1], "overridden", f"the kept gains are gone from the controller (reloaded?): now {differ}"
        )

    def recover(self) -> list[GainChange]:
        """Roll back every change of this controller that a crash left unfinished; returns them (state
        `rolled_back`, or `overridden` when the controller was reloaded meanwhile and was left as it is)."""
        out = []
        for change in [c for c in self.changes() if c.state not in FINAL]:
            try:
                out.append(self.rollback(change, "unfinished at start-up (crash or kill): rolled back"))
            except GainsOverridden:
                out.append(self.journal.changes()[change.change_id])
        return out
