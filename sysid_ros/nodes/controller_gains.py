"""A controller's PID gains over its ROS 2 parameter services: read, change all-or-nothing, undo exactly.

Names are ours (`gains.<joint>.p|i|d|i_clamp|ff_velocity_scale`) in the journal and the API; `style`
translates them to the controller's own (see `core.gains.PARAMETER_STYLES`). Every change is written to
the gains journal (synced) before anything is sent; values outside the guard or
not finite are never sent; a controller that is missing, times out or refuses a value is left with its
previous gains (checked by reading them back) and the caller gets a `GainsError` saying which.
"""

from __future__ import annotations

import uuid

from ..core.errors import GainsError
from ..core.gains import (GainGuard, controller_parameters, from_controller_parameters, split_parameter_name,
                          style_map)
from ..core.journal import GainChange, GainsJournal
from .client import RosClient


class ControllerGains:
    """The gains of one controller node (`/<controller>`), changed only through the journal."""

    def __init__(self, client: RosClient, controller: str, journal: GainsJournal, guard: GainGuard = GainGuard(),
                 timeout_s: float = 5.0, style: str = "gains") -> None:
        self.client, self.controller, self.journal, self.guard = client, controller, journal, guard
        self.timeout_s, self.style = timeout_s, style
        style_map(style)  # an unknown style fails here, before anything is read or sent

    def read(self, names: list[str]) -> dict[str, float]:
        """The controller's current values of `names` (our `gains.<joint>.<gain>` names, whatever its style)."""
        theirs = list(controller_parameters({n: 0.0 for n in names}, self.style))
        return from_controller_parameters(names, self._read(theirs), self.style)

    def _read(self, names: list[str]) -> dict[str, float]:
        try:
            values = self.client.get_parameters(self.controller, names, self.timeout_s)
        except TimeoutError as exc:
            raise GainsError(f"parameter service missing or not answering: {exc}", controller=self.controller) from exc
        if len(values) != len(names):  # rclpy answers nothing at all when any name is undeclared
            raise GainsError(f"the controller does not have all of the parameters {names}", controller=self.controller)
        missing = [n for n, v in zip(names, values) if v is None]
        if missing:
            raise GainsError(f"the controller has no parameters {missing}", controller=self.controller)
        return {n: float(v) for n, v in zip(names, values)}

    def _check(self, values: dict[str, float]) -> None:
        for name, value in values.items():
            split = split_parameter_name(name)
            reason = (f"{name} is not a gain parameter (gains.<joint>.<gain>)" if split is None
                      else self.guard.reason_to_refuse(split[1], value))
            if reason:
                raise GainsError(f"not sent: {reason}", controller=self.controller, parameter=name)

    def _set(self, values: dict[str, float]) -> str:
        """Set all of `values` at once; '' on success, else why not."""
        try:
            result = self.client.set_parameters_atomically(self.controller, controller_parameters(values, self.style),
                                                           self.timeout_s)
        except TimeoutError as exc:
            return f"parameter service missing or not answering: {exc}"
        return "" if result.successful else f"refused: {result.reason}"

    def apply(self, new: dict[str, float], reason: str = "") -> GainChange:
        """Journal, then set `new` all or nothing; on any failure the previous values stay (verified)."""
        self._check(new)
        previous = self.read(list(new))
        change = self.journal.record(GainChange(uuid.uuid4().hex, self.controller, previous, dict(new), "pending",
                                                reason))
        why = self._set(new)
        if why:
            now = self.read(list(new))
            self.journal.advance(change, "failed", why)
            if now != previous:
                raise GainsError(f"{why}; and the gains now differ from before: {now} (was {previous})",
                                 controller=self.controller)
            raise GainsError(f"no gain changed: {why}", controller=self.controller)
        return self.journal.advance(change, "applied")

    def begin_trials(self, names: list[str], reason: str) -> GainChange:
        """Journal the current values of `names` before trial gains go out (a tuning session); `end_trials`,
        or `recover` after a crash, restores them exactly."""
        previous = self.read(names)
        return self.journal.record(GainChange(uuid.uuid4().hex, self.controller, previous, dict(previous), "pending",
                                              reason))

    def try_gains(self, session: GainChange, values: dict[str, float]) -> None:
        """Send trial gains inside `session` (guarded, all or nothing); GainsError when refused."""
        unknown = sorted(set(values) - set(session.previous))
        if unknown:
            raise GainsError(f"trial gains {unknown} are outside the session's journaled parameters",
                             controller=self.controller)
        self._check(values)
        why = self._set(values)
        if why:
            raise GainsError(f"trial gains not set: {why}", controller=self.controller)

    def end_trials(self, session: GainChange, reason: str = "tuning session over") -> GainChange:
        return self.rollback(session, reason)

    def keep(self, change: GainChange, reason: str = "") -> GainChange:
        return self.journal.advance(change, "kept", reason)

    def rollback(self, change: GainChange, reason: str = "") -> GainChange:
        """Restore the exact previous values of `change` (all at once) and verify them."""
        why = self._set(change.previous)
        now = self.read(list(change.previous))
        if why or now != change.previous:
            raise GainsError(f"roll-back not confirmed ({why or 'values differ'}): now {now}, wanted {change.previous}",
                             controller=self.controller)
        return self.journal.advance(change, "rolled_back", reason)

    def recover(self) -> list[GainChange]:
        """Roll back every change of this controller that a crash left unfinished; returns them."""
        unfinished = [c for c in self.journal.unfinished() if c.controller == self.controller]
        return [self.rollback(c, "unfinished at start-up (crash or kill): rolled back") for c in unfinished]
