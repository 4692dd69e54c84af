"""The streaming estimator: a bounded buffer, a fit every hop, and seed 002's accept / replace / discard."""

from __future__ import annotations

import math

import numpy as np

from ..errors import DataError
from ..signals import JointSamples
from .config import NS, OnlineConfig
from .reports import (ACCEPTED, DISCARDED, PENDING, REPLACED, SETTLING, ChangeDetected, Estimate, Event,
                      ExcitationRecovered, ExcitationRequest, ParameterChange, WindowFit)
from .window import discarded, fit_window


class OnlineEstimator:
    """Feed it one joint's samples in chunks of any size; it fits every `hop_s` and returns events."""

    def __init__(self, config: OnlineConfig) -> None:
        self.config = config
        p = len(config.model.names)
        init = dict(config.initial or {})
        self._values = np.array([float(init.get(n, np.nan)) for n in config.model.names])
        self._weight = np.where(np.isfinite(self._values), 1.0, 0.0)
        self._confidence = np.zeros(p)
        self._low = np.zeros(p, dtype=int)
        self._pending = np.zeros(p, dtype=int)
        self._pending_sign = np.zeros(p)
        self._settle_until_ns: int | None = None
        self._pre_change: np.ndarray | None = None
        self._pre_weight: np.ndarray | None = None
        self._std = np.full(p, np.nan)
        self._before, self._before_weight = self._values.copy(), self._weight.copy()
        self._requested: tuple[str, ...] = ()
        self._t = np.zeros(0, dtype=np.int64)
        self._q = np.zeros(0)
        self._tau = np.zeros(0)
        self._next_fit_ns: int | None = None
        self._time_ns = 0
        self.last_window: WindowFit | None = None
        self.windows_fitted = 0

    @property
    def estimate(self) -> Estimate:
        return Estimate(self._time_ns, self.config.joint, self.config.model.names,
                        tuple(float(v) for v in self._values), tuple(float(c) for c in self._confidence),
                        tuple(float(w) for w in self._weight), bool(self._requested))

    def update(self, samples: JointSamples) -> list[Event]:
        """Take new samples (positions and measured effort of `config.joint`); fit each window that fell due."""
        joint = self.config.joint
        if len(samples) == 0:
            return []
        q = samples.column("position", joint)
        tau = samples.column("effort", joint)
        t = samples.time_ns
        if np.any(np.diff(t) <= 0) or (len(self._t) and t[0] <= self._t[-1]):
            previous = np.concatenate([self._t[-1:], t[:-1]]) if len(self._t) else np.concatenate([t[:1] - 1, t[:-1]])
            bad = int(np.argmax(t <= previous))
            raise DataError("sample times must increase", joint=joint, time_s=round(float(t[bad]) * 1e-9, 6))
        events: list[Event] = []
        start = 0
        hop_ns = int(round(self.config.hop_s * NS))
        while start < len(t):
            if self._next_fit_ns is None:
                self._next_fit_ns = int(t[start]) + int(round(self.config.window_s * NS))
            stop = int(np.searchsorted(t, self._next_fit_ns, side="right"))  # samples up to the fit time
            if stop > start:
                self._append(t[start:stop], q[start:stop], tau[start:stop])
                start = stop
            if start < len(t) or self._t[-1] >= self._next_fit_ns:  # the hop is complete: fit it
                events += self._fit_and_decide()
                self._next_fit_ns += hop_ns
                if start < len(t) and t[start] > self._next_fit_ns:  # hops lost in a gap are skipped
                    self._next_fit_ns += -(-(int(t[start]) - self._next_fit_ns) // hop_ns) * hop_ns
        self._time_ns = int(t[-1])
        return events

    # --- internals ---------------------------------------------------------------------------------------
    def _append(self, t: np.ndarray, q: np.ndarray, tau: np.ndarray) -> None:
        """Add samples and drop those older than one window (bounded memory)."""
        self._t = np.concatenate([self._t, t])
        self._q = np.concatenate([self._q, q])
        self._tau = np.concatenate([self._tau, tau])
        if len(self._t):
            keep = self._t > self._t[-1] - int(round(self.config.window_s * NS))
            self._t, self._q, self._tau = self._t[keep], self._q[keep], self._tau[keep]

    def _window(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The buffered samples after the last gap (a step over 1.5x the median period)."""
        steps = np.diff(self._t)
        if len(steps) > 2:
            gaps = np.flatnonzero(steps > 1.5 * np.median(steps))
            if len(gaps):
                first = int(gaps[-1]) + 1
                return self._t[first:], self._q[first:], self._tau[first:]
        return self._t, self._q, self._tau

    def _fit_and_decide(self) -> list[Event]:
        cfg = self.config
        t, q, tau = self._window()
        p = len(cfg.model.names)
        if len(t) < 2 or t[-1] - t[0] < 0.9 * cfg.window_s * NS:
            win = discarded(int(self._t[-1]), p, "not enough contiguous samples in the window")
        else:
            win = fit_window(cfg, t, q, tau, self._values)
        self.windows_fitted += 1
        events: list[Event] = []
        decisions = [DISCARDED] * p
        confident = win.confidence >= cfg.confidence_threshold
        settling = self._settle_until_ns is not None and win.time_ns <= self._settle_until_ns
        settled = self._settle_until_ns is not None and not settling
        triggered: list[int] = []
        for i in range(p):
            x, std, w = float(win.values[i]), float(win.std[i]), float(win.confidence[i])
            if confident[i]:
                self._low[i] = 0
                decisions[i] = self._decide(i, x, std, w, settling)
            else:
                self._low[i] += 1
                if settling and w >= cfg.detect_confidence:  # fresher than the value it replaced
                    decisions[i] = self._decide(i, x, std, w, settling)
                    continue
                detectable = w >= cfg.detect_confidence and not settling and math.isfinite(self._values[i])
                decisions[i] = self._change(i, x, std, w) if detectable else DISCARDED
                if decisions[i] == DISCARDED:
                    self._pending[i] = 0
            if decisions[i] == REPLACED and self._pre_change is None and math.isfinite(self._before[i]):
                triggered.append(i)
        if triggered:  # the window still holds data from before the change: replace until it has passed
            names = cfg.model.names
            self._pre_change, self._pre_weight = self._before.copy(), self._before_weight.copy()
            self._settle_until_ns = win.time_ns + int(round(cfg.window_s * NS))
            self._pending[:] = 0
            events.append(ChangeDetected(win.time_ns, cfg.joint, tuple(names[i] for i in triggered),
                                         tuple(float(self._before[i]) for i in triggered),
                                         tuple(float(self._values[i]) for i in triggered)))
        if settled:
            events += self._settled_changes(win)
        self._before, self._before_weight = self._values.copy(), self._weight.copy()
        self._confidence = win.confidence.copy()
        self.last_window = WindowFit(win.time_ns, win.values, win.std, win.confidence, win.rows_used,
                                     tuple(decisions), win.note)
        self._time_ns = win.time_ns
        return events + self._excitation_events(win.time_ns)

    def _decide(self, i: int, x: float, std: float, confidence: float, settling: bool) -> str:
        """Seed 002's rule for one confident parameter: replace, blend, or hold pending confirmation."""
        cfg = self.config
        old = float(self._values[i])
        if not math.isfinite(old) or settling:
            self._values[i], self._weight[i], self._std[i] = x, confidence, std
            return SETTLING if settling else REPLACED
        decision = self._change(i, x, std, confidence)
        if decision != DISCARDED:
            return decision
        self._pending[i] = 0
        w_old = min(float(self._weight[i]), cfg.blend_memory_windows)
        self._values[i] = (w_old * old + confidence * x) / (w_old + confidence)
        self._weight[i] = w_old + confidence
        return ACCEPTED

    def _change(self, i: int, x: float, std: float, confidence: float) -> str:
        """Far from the estimate (eps1 and `change_sigma` standard errors): PENDING until `confirm_windows`
        in a row, then REPLACED; else DISCARDED (no change seen)."""
        cfg = self.config
        old = float(self._values[i])
        delta = x - old
        scale = max(abs(old), float(cfg.model.floors()[i]))
        if not (abs(delta) > float(cfg.per_parameter("change_threshold")[i]) * scale
                and abs(delta) > cfg.change_sigma * std):
            return DISCARDED
        same_way = self._pending[i] == 0 or np.sign(delta) == self._pending_sign[i]
        self._pending[i] = self._pending[i] + 1 if same_way else 1
        self._pending_sign[i] = np.sign(delta)
        if self._pending[i] < cfg.confirm_windows:
            return PENDING
        self._values[i], self._weight[i], self._std[i] = x, confidence, std
        self._pending[i] = 0
        return REPLACED

    def _settled_changes(self, win: WindowFit) -> list[Event]:
        """At the end of settling: a ParameterChange for each parameter that now differs from before by more
        than eps1 and `change_sigma` standard errors; the others go back to their pre-change estimate."""
        cfg = self.config
        pre = self._pre_change if self._pre_change is not None else self._values.copy()
        pre_weight = self._pre_weight if self._pre_weight is not None else self._weight.copy()
        self._settle_until_ns, self._pre_change, self._pre_weight = None, None, None
        out: list[Event] = []
        thresholds, floors = cfg.per_parameter("change_threshold"), cfg.model.floors()
        for i, name in enumerate(cfg.model.names):
            old, new = float(pre[i]), float(self._values[i])
            if not math.isfinite(old):
                continue
            delta = abs(new - old)
            std = float(self._std[i]) if math.isfinite(self._std[i]) else 0.0
            if delta > thresholds[i] * max(abs(old), floors[i]) and delta > cfg.change_sigma * std:
                out.append(ParameterChange(win.time_ns, cfg.joint, name, old, new, float(self._weight[i])))
            else:
                self._values[i], self._weight[i] = old, pre_weight[i]
        return out

    def _excitation_events(self, time_ns: int) -> list[Event]:
        cfg = self.config
        names = cfg.model.names
        watched = [names.index(n) for n in (cfg.request_for or names)]
        n_req = cfg.request_after_windows
        if not self._requested:
            low = tuple(names[i] for i in watched if self._low[i] >= n_req)
            if low:
                self._requested = low
                worst = max(int(self._low[names.index(n)]) for n in low)
                return [ExcitationRequest(time_ns, cfg.joint, low, worst * cfg.hop_s)]
            return []
        if all(self._low[names.index(n)] == 0 for n in self._requested):
            self._requested = ()
            return [ExcitationRecovered(time_ns, cfg.joint)]
        return []
