"""The streaming estimator: a bounded buffer, a fit every hop, accept / replace / discard, and
(optionally) the residual change detector every `detect_hop_s`. Model-agnostic: one joint or a whole arm."""

from __future__ import annotations

import math
from collections import deque
from functools import lru_cache

import numpy as np
from threadpoolctl import ThreadpoolController

from ..errors import DataError
from ..signals import MAX_ABS_POSITION, MAX_ABS_RATE, JointSamples
from .calibration import ScatterCalibration
from .config import NS, OnlineConfig
from .detector import Step, scan
from .guard import InputGuard
from .reports import (
    ACCEPTED,
    DISCARDED,
    PENDING,
    REPLACED,
    SETTLING,
    ChangeDetected,
    Estimate,
    Event,
    ExcitationRecovered,
    ExcitationRequest,
    InputPaused,
    InputResumed,
    ParameterChange,
    WindowFit,
)
from .window import discarded, fit_window, prepare

NOISE_WINDOWS = 8  # the detector measures residuals against the largest noise of this many accepted windows


class OnlineEstimator:
    """Feed it the model's joints' samples in chunks of any size; it fits every `hop_s` and returns events."""

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
        self._provisional = np.full(p, np.nan)  # before a parameter's first confident window (see `estimate`)
        self._provisional_weight = np.zeros(p)
        self._calibration = ScatterCalibration(config.horizon_s, p)
        self._before, self._before_weight = self._values.copy(), self._weight.copy()
        self._requested: tuple[str, ...] = ()
        self._t = np.zeros(0, dtype=np.int64)
        self._q = np.zeros((0, len(config.joints)))
        self._tau = np.zeros((0, len(config.joints)))
        self._next_fit_ns: int | None = None
        self._next_detect_ns: int | None = None
        self._noise: deque[np.ndarray] = deque(maxlen=NOISE_WINDOWS)  # residual noise of recent accepted windows
        self._restart_ns: int | None = None  # the window starts here after a detected change
        self._detect_count = 0
        self._time_ns = 0
        self.last_window: WindowFit | None = None
        self.last_step: Step | None = None  # the detector's latest check (None while it sleeps)
        self.windows_fitted = 0
        self.garbage_rows = 0  # rows with a non-finite or absurd position or effort (blanked, see `update`)
        self._guard = InputGuard(config.joints, config.stale_effort_s, config.max_jump_speed_rad_s)
        self._break_ns: int | None = None  # the newest faulty row (guard.py): no window reaches across it
        self.paused: InputPaused | None = None  # the fault that paused estimation, until a full window follows
        self.faults = 0  # faults the guard found (rows that moved the break)

    @property
    def estimate(self) -> Estimate:
        """The current values (physically consistent if the model says how: `model.physical`), each with
        the standard error of the latest window that entered it. A parameter no window has pinned to
        `confidence_threshold` yet reports the confidence-weighted mean of its windows above
        `detect_confidence` (its weight says how little is behind it), NaN before any."""
        values = self._physical(self._current())
        return Estimate(
            self._time_ns,
            self.config.joint,
            self.config.model.names,
            tuple(float(v) for v in values),
            tuple(float(c) for c in self._confidence),
            tuple(float(w) for w in np.where(np.isfinite(self._values), self._weight, self._provisional_weight)),
            bool(self._requested),
            tuple(float(v) for v in self._std),
        )

    def _physical(self, values: np.ndarray, names: tuple[str, ...] | None = None) -> np.ndarray:
        """`values` (of `names`, default all) as published: projected onto physical ones if the model says how
        (`model.physical`)."""
        physical = getattr(self.config.model, "physical", None)
        if physical is None:
            return values
        return physical(values) if names is None else physical(values, names)

    def _scale(self, values: np.ndarray) -> np.ndarray:
        """Per parameter, the scale a change is judged against: the model's (`change_scale`: a payload's first
        moments and inertia scale with its mass) or max(|value|, floor)."""
        scale = getattr(self.config.model, "change_scale", None)
        if scale is not None:
            return scale(values)
        return np.maximum(np.abs(np.nan_to_num(values)), self.config.model.floors())

    def _matters(
        self,
        i: np.ndarray | int,
        delta: np.ndarray | float,
        values: np.ndarray,
        step_std: np.ndarray | float,
        sigma: float,
    ) -> np.ndarray | bool:
        """A change of `delta` in parameter(s) `i` matters: beyond eps1 of the scale (`_scale`), beyond
        `change_floor`, and beyond `sigma` standard errors of the step and of the estimate it moves from."""
        cfg = self.config
        est_std = np.nan_to_num(self._std[i], nan=0.0, posinf=0.0)
        size = np.abs(delta)
        return (
            (size > cfg.per_parameter("change_threshold")[i] * self._scale(values)[i])
            & (size > cfg.per_parameter("change_floor")[i])
            & (size > sigma * np.sqrt(np.square(step_std) + np.square(est_std)))
        )

    def _alarmable(self, moved: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """The moved parameters that may raise a change (the model's rule, `alarmable`, if it has one)."""
        rule = getattr(self.config.model, "alarmable", None)
        return moved if rule is None else rule(moved, before, after)

    def _current(self) -> np.ndarray:
        """The blended values, the provisional ones where no confident window has set a value yet."""
        return np.where(np.isfinite(self._values), self._values, self._provisional)

    @property
    def provisional(self) -> tuple[str, ...]:
        """The parameters no confident window has set yet (their values, if any, are provisional)."""
        return tuple(n for n, v in zip(self.config.model.names, self._values) if not math.isfinite(v))

    @property
    def inflation(self) -> np.ndarray:
        """Per parameter, the factor the record's scatter puts on the windows' standard errors (>= 1)."""
        return self._calibration.inflation.copy()

    @property
    def settling(self) -> bool:
        """A change was detected and the new values are still settling (not yet a `ParameterChange`)."""
        return self._settle_until_ns is not None

    def update(self, samples: JointSamples) -> list[Event]:
        """Take new samples (positions and measured effort of `config.joints`); fit each window that fell due
        and run the detector at each of its checks. A row whose position or effort is non-finite or beyond
        `MAX_ABS_POSITION` / `MAX_ABS_RATE` is blanked (counted in `garbage_rows`); the windows step around it.

        BLAS runs on one thread meanwhile (as in `identify`): a window's matrices are small, and on busy
        shared cores extra BLAS threads spin; the iiwa's payload estimator took 3.1 s of CPU for 30 s of data
        on one thread, 8.3-8.8 s with OpenBLAS's default threads on 2 loaded cores."""
        with _blas_controller().limit(limits=1, user_api="blas"):
            return self._update(samples)

    def _update(self, samples: JointSamples) -> list[Event]:
        cfg, joint = self.config, self.config.joint
        if len(samples) == 0:
            return []
        q = np.column_stack([samples.column("position", j) for j in cfg.joints])
        tau = np.column_stack([samples.column("effort", j) for j in cfg.joints])
        garbage = ~(np.abs(q) <= MAX_ABS_POSITION).all(axis=1) | ~(np.abs(tau) <= MAX_ABS_RATE).all(axis=1)
        if garbage.any():  # a corrupted row: its values become NaN (the filter steps around it), time kept
            self.garbage_rows += int(garbage.sum())
            q, tau = np.where(garbage[:, None], np.nan, q), np.where(garbage[:, None], np.nan, tau)
        t = samples.time_ns
        if np.any(np.diff(t) <= 0) or (len(self._t) and t[0] <= self._t[-1]):
            previous = np.concatenate([self._t[-1:], t[:-1]]) if len(self._t) else np.concatenate([t[:1] - 1, t[:-1]])
            bad = int(np.argmax(t <= previous))
            raise DataError("sample times must increase", joint=joint, time_s=round(float(t[bad]) * 1e-9, 6))
        events: list[Event] = []
        start = 0
        hop_ns = int(round(cfg.hop_s * NS))
        detect_ns = int(round(cfg.detect_hop_s * NS)) if cfg.detect_window_s > 0 else 0
        while start < len(t):
            if self._next_fit_ns is None:
                self._next_fit_ns = int(t[start]) + int(round(cfg.horizon_s * NS))
                self._next_detect_ns = int(t[start]) + int(round(cfg.detect_window_s * NS))
            due = min(self._next_fit_ns, self._next_detect_ns) if detect_ns else self._next_fit_ns
            stop = int(np.searchsorted(t, due, side="right"))  # samples up to the next fit or check
            if stop > start:
                events += self._guarded(t[start:stop], q[start:stop], tau[start:stop], garbage[start:stop])
                self._append(t[start:stop], q[start:stop], tau[start:stop])
                start = stop
            if start < len(t) or self._t[-1] >= due:  # the hop is complete: check and fit
                if detect_ns and due == self._next_detect_ns:
                    events += self._detect()
                    self._next_detect_ns = _next_after(self._next_detect_ns, detect_ns, t, start)
                if due == self._next_fit_ns:
                    events += self._fit_and_decide()
                    self._next_fit_ns = _next_after(self._next_fit_ns, hop_ns, t, start)
        self._time_ns = int(t[-1])
        return events

    # --- internals ---------------------------------------------------------------------------------------
    def _guarded(self, t: np.ndarray, q: np.ndarray, tau: np.ndarray, garbage: np.ndarray) -> list[Event]:
        """The input guard over new rows: a fault moves the break to its row, stops a change in the making and
        pauses estimation (one `InputPaused` until a full window of good input has followed)."""
        faults = self._guard.check(t, q, tau, garbage)
        if not faults:
            return []
        self.faults += len(faults)
        self._break_ns = max(f.time_ns for f in faults)
        self._detect_count, self._pending[:] = 0, 0
        if self.paused is not None:
            return []
        first = faults[0]
        self.paused = InputPaused(
            first.time_ns, self.config.joint, first.kind, first.reason + "; estimation paused, estimates held"
        )
        return [self.paused]

    def _append(self, t: np.ndarray, q: np.ndarray, tau: np.ndarray) -> None:
        """Add samples and drop those older than one window (bounded memory)."""
        self._t = np.concatenate([self._t, t])
        self._q = np.concatenate([self._q, q])
        self._tau = np.concatenate([self._tau, tau])
        if len(self._t):
            keep = self._t > self._t[-1] - int(round(self.config.horizon_s * NS))
            self._t, self._q, self._tau = self._t[keep], self._q[keep], self._tau[keep]

    def _window(self, span_s: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The buffered samples after the last gap (a step over 1.5x the 90th percentile period) and after the restart
        at a detected change; the newest `span_s` only if given."""
        first = 0
        steps = np.diff(self._t)
        if len(steps) > 2:
            gaps = np.flatnonzero(steps > 1.5 * np.percentile(steps, 90))  # a jittered log's long steps are no gap
            if len(gaps):
                first = int(gaps[-1]) + 1
        if self._restart_ns is not None:
            first = max(first, int(np.searchsorted(self._t, self._restart_ns)))
        if self._break_ns is not None:
            first = max(first, int(np.searchsorted(self._t, self._break_ns, side="right")))
        if span_s is not None and len(self._t):
            first = max(first, int(np.searchsorted(self._t, self._t[-1] - int(round(span_s * NS)), side="right")))
        return self._t[first:], self._q[first:], self._tau[first:]

    def _fit_and_decide(self) -> list[Event]:
        cfg = self.config
        t, q, tau = self._window()
        p = len(cfg.model.names)
        after_change = self._restart_ns is not None and len(t) and t[0] >= self._restart_ns
        needed_s = cfg.min_window_s if after_change else 0.9 * cfg.horizon_s
        events: list[Event] = []
        if len(t) < 2 or t[-1] - t[0] < needed_s * NS:
            win = discarded(int(self._t[-1]), p, "not enough contiguous samples in the window")
        else:
            if self.paused is not None:  # a full window of good input since the last fault
                events.append(InputResumed(int(t[-1]), cfg.joint, round((int(t[-1]) - self.paused.time_ns) / NS, 6)))
                self.paused = None
                self._low[:] = 0  # the pause is no lack of excitation
            win = fit_window(cfg, t, q, tau, self._current())
            if cfg.calibrate_scatter:
                self._calibration.add(win)
                win = self._calibration.apply(win)
        self.windows_fitted += 1
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
                if not math.isfinite(self._values[i]) and w >= cfg.detect_confidence and math.isfinite(x):
                    wp = self._provisional_weight[i]  # no confident window yet: a provisional mean
                    self._provisional[i] = x if wp == 0 else (wp * self._provisional[i] + w * x) / (wp + w)
                    self._provisional_weight[i], self._std[i] = min(wp, cfg.blend_memory_windows) + w, std
                    continue
                if settling and w >= cfg.detect_confidence:  # fresher than the value it replaced
                    decisions[i] = self._decide(i, x, std, w, settling)
                    continue
                detectable = w >= cfg.detect_confidence and not settling and math.isfinite(self._values[i])
                decisions[i] = self._change(i, x, std, w) if detectable else DISCARDED
                if decisions[i] == DISCARDED:
                    self._pending[i] = 0
            if (
                decisions[i] == REPLACED
                and self._pre_change is None
                and math.isfinite(self._before[i])
                and cfg.model.names[i] in (cfg.detect_for or cfg.model.names)
            ):
                triggered.append(i)  # (a parameter outside detect_for is replaced without an alarm)
        if triggered:  # (first moments moving on their own under a massless payload are no change)
            mask = self._alarmable(np.isin(np.arange(p), triggered), self._before, self._values)
            triggered = [i for i in triggered if mask[i]]
        first = [i for i in range(p) if decisions[i] == REPLACED and not math.isfinite(self._before[i])]
        if (
            first
            and cfg.detect_window_s > 0
            and not triggered
            and self._settle_until_ns is None
            and not np.isfinite(self._before).any()
        ):
            # warm-up (with the detector): the very first values come from windows that may hold the start of
            # the motion; they settle for one window length like a change (replaced by each fresh window), and
            # no change is reported. Without the detector (the pendulum's default) the first window just sets them.
            self._pre_change, self._pre_weight = self._before.copy(), self._before_weight.copy()
            self._settle_until_ns = win.time_ns + int(round(cfg.horizon_s * NS))
        if triggered:  # the window still holds data from before the change: replace until it has passed
            names = cfg.model.names
            self._pre_change, self._pre_weight = self._before.copy(), self._before_weight.copy()
            self._settle_until_ns = win.time_ns + int(round(cfg.horizon_s * NS))
            self._pending[:] = 0
            before, after = self._physical(self._before), self._physical(self._values)
            events.append(
                ChangeDetected(
                    win.time_ns,
                    cfg.joint,
                    tuple(names[i] for i in triggered),
                    tuple(float(before[i]) for i in triggered),
                    tuple(float(after[i]) for i in triggered),
                )
            )
        if settled:
            events += self._settled_changes(win)
        if (
            win.residual_scale is not None
            and ACCEPTED in decisions
            and not ({REPLACED, PENDING, SETTLING} & set(decisions))
        ):
            self._noise.append(np.asarray(win.residual_scale, dtype=float))  # the detector's noise reference
        self._before, self._before_weight = self._values.copy(), self._weight.copy()
        self._confidence = win.confidence.copy()
        self.last_window = WindowFit(
            win.time_ns, win.values, win.std, win.confidence, win.rows_used, tuple(decisions), win.note
        )
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
        self._std[i] = std
        return ACCEPTED

    def _change(self, i: int, x: float, std: float, confidence: float) -> str:
        """Far from the estimate (eps1 and `change_sigma` standard errors): PENDING until `confirm_windows`
        in a row, then REPLACED; else DISCARDED (no change seen)."""
        cfg = self.config
        old = float(self._values[i])
        delta = x - old
        if not self._matters(i, delta, self._values, std, cfg.change_sigma):
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
        self._restart_ns = None
        out: list[tuple[int, str]] = []
        finite_pre = np.where(np.isfinite(pre), pre, self._values)
        for i, name in enumerate(cfg.model.names):
            if not math.isfinite(pre[i]):
                continue
            if self._matters(i, float(self._values[i] - pre[i]), finite_pre, 0.0, cfg.change_sigma):
                out.append((i, name))
            else:
                self._values[i], self._weight[i] = pre[i], pre_weight[i]
        before, after = self._physical(finite_pre), self._physical(self._values)  # as published: physical
        return [
            ParameterChange(win.time_ns, cfg.joint, name, float(before[i]), float(after[i]), float(self._weight[i]))
            for i, name in out
        ]

    def _detect(self) -> list[Event]:
        """The residual detector's check on the newest `detect_window_s`: a confirmed step raises the change
        now, restarts the window at the estimated change time and starts settling (see detector.py)."""
        cfg = self.config
        now = int(self._t[-1])
        values = self._current()
        watched = np.isin(cfg.model.names, cfg.detect_for or cfg.model.names)
        if (
            not self._noise
            or self._settle_until_ns is not None
            or not np.all(np.isfinite(values))
            or not np.all(np.isfinite(self._values[watched]))
        ):  # a provisional value is no baseline for a step
            self._detect_count, self.last_step = 0, None
            return []
        t, q, tau = self._window(cfg.detect_window_s)
        prep = prepare(cfg, t, q, tau, 2) if len(t) >= 2 and t[-1] - t[0] >= 0.9 * cfg.detect_window_s * NS else None
        noise = np.max(self._noise, axis=0)  # the motion's model errors vary: the worst recent window's noise
        step = None if prep is None or isinstance(prep, WindowFit) else scan(prep, values, noise)
        self.last_step = step
        everything = np.arange(len(values))
        moved = (
            self._matters(everything, step.delta, values, step.std, cfg.detect_sigma)
            if step is not None
            else np.zeros(len(values), dtype=bool)
        )
        moved &= watched
        if step is not None:
            moved = self._alarmable(moved, values, values + step.delta)
        self._detect_count = self._detect_count + 1 if moved.any() else 0
        if self._detect_count < cfg.detect_confirm:
            return []
        idx = np.flatnonzero(moved)
        names = cfg.model.names
        self._pre_change, self._pre_weight = self._values.copy(), self._weight.copy()
        self._values = values.copy()
        self._values[idx] = self._values[idx] + step.delta[idx]
        self._weight[idx] = cfg.detect_confidence
        self._std[idx] = step.std[idx]
        self._settle_until_ns = now + int(round(cfg.horizon_s * NS))
        self._restart_ns = step.change_ns + int(round(0.5 * cfg.derivative_window_s * NS))
        self._calibration.restart(step.change_ns)
        self._pending[:] = 0
        self._detect_count = 0
        self._before, self._before_weight = self._values.copy(), self._weight.copy()
        moved_names = tuple(names[i] for i in idx)  # the step's rough values, clipped (mass >= 0): the rest of the
        before = self._physical(self._pre_change[idx], moved_names)  # vector has not moved yet, so no projection
        after = self._physical(self._values[idx], moved_names)  # of the whole
        return [
            ChangeDetected(now, cfg.joint, moved_names, tuple(float(v) for v in before), tuple(float(v) for v in after))
        ]

    def _excitation_events(self, time_ns: int) -> list[Event]:
        cfg = self.config
        if self.paused is not None:  # faulty input is no reason to excite the robot
            return []
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


@lru_cache(maxsize=1)
def _blas_controller():
    """threadpoolctl's view of the loaded BLAS, built once (13 us a limit after that, 0.6 ms each without)."""
    return ThreadpoolController()


def _next_after(due_ns: int, hop_ns: int, t: np.ndarray, start: int) -> int:
    """The next due time one hop on; hops lost in a gap (the next sample later than that) are skipped."""
    due_ns += hop_ns
    if start < len(t) and t[start] > due_ns:
        due_ns += -(-(int(t[start]) - due_ns) // hop_ns) * hop_ns
    return due_ns
