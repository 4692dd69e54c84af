"""The window's standard errors calibrated against the record's own scatter.

A window's standard errors (HAC, from its residuals) see noise; they do not see a model that is a little wrong
(an identified arm's link masses off by a few percent, a friction whose shape the model cannot hold), which
moves the window values with the motion. On a UR10e-like log the payload's first moments scattered 1.7x the
standard errors the windows reported, enough for two windows in a row to sit "5 standard errors" from the blend
and raise a change on a constant payload. The record says how much to trust the windows: two windows that share
no sample and fit the same parameter should differ by z = (x_k - x_j) / sqrt(s_k^2 + s_j^2) ~ N(0, 1); the
robust scale of the recent z (1.4826 x their median |z|; a change in between makes a few outliers, not the
median) is the factor by which the standard errors are too small. It is applied (never below 1) to every
window's standard error before the confidence and change rules use it.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .reports import WindowFit

MIN_PAIRS = 8  # pairs of windows before the factor is used
HISTORY = 240  # windows remembered (a minute at the default hop)
PAIRS = 120  # z values per parameter the median runs over


class ScatterCalibration:
    """The inflation of each parameter's standard error from the record's scatter (module docstring)."""

    def __init__(self, horizon_s: float, p: int) -> None:
        self._window_ns = int(round(horizon_s * 1e9))
        self._windows: deque[tuple[int, np.ndarray, np.ndarray]] = deque(maxlen=HISTORY)
        self._z: deque[tuple[int, int, np.ndarray]] = deque(maxlen=PAIRS)  # (earlier, later window's time, z)
        self.inflation = np.ones(p)

    def restart(self, change_ns: int) -> None:
        """A change at `change_ns`: pairs of windows across it measure the change, not the scatter. They are
        forgotten, and windows before it are never paired again (a payload attached made a third of the recent
        pairs huge, the factor with them, and every later window looked unsure: a wrong settle, a false alarm)."""
        self._windows.clear()
        kept = [z for z in self._z if not z[0] < change_ns <= z[1]]
        self._z.clear()
        self._z.extend(kept)
        self._update()

    def add(self, win: WindowFit) -> None:
        """Record a window that fitted (finite values and standard errors) and update the factor."""
        if not (np.all(np.isfinite(win.values)) and np.all(np.isfinite(win.std))):
            return
        earlier = [w for w in self._windows if w[0] <= win.time_ns - self._window_ns]
        if earlier:
            t, x, s = earlier[-1]  # the latest window that shares no sample with this one
            self._z.append((t, int(win.time_ns), (win.values - x) / np.sqrt(win.std**2 + s**2 + 1e-300)))
        self._windows.append((int(win.time_ns), win.values.copy(), win.std.copy()))
        self._update()

    def _update(self) -> None:
        if len(self._z) >= MIN_PAIRS:
            z = np.array([z for _, _, z in self._z])
            self.inflation = np.maximum(1.0, 1.4826 * np.median(np.abs(z), axis=0))

    def apply(self, win: WindowFit) -> WindowFit:
        """The window with its standard errors times the factor and its confidence recomputed from them
        (w = 1 / (1 + (s / ref)^2), so w' = 1 / (1 + k^2 (1 / w - 1)))."""
        k = self.inflation
        if np.all(k == 1.0):
            return win
        w = np.asarray(win.confidence, dtype=float)
        with np.errstate(divide="ignore"):
            conf = np.where(w > 0, 1.0 / (1.0 + k**2 * (1.0 / np.where(w > 0, w, 1.0) - 1.0)), 0.0)
        return WindowFit(
            win.time_ns,
            win.values,
            win.std * k,
            conf,
            win.rows_used,
            win.decisions,
            win.note,
            residual_scale=win.residual_scale,
        )
