"""The training residual per observed signal: its size against the declared noise (a chi-square test with
an effective sample count from the residual's autocorrelation), and a block sandwich covariance for
residuals that are not white.

The residual handed to mujoco.sysid is already divided by each signal's declared noise (`ScaledResidual`),
so under a right model every value is a unit-variance draw, plus each window's measured start-state error
when segments start from measured states (its per-row variance is passed in as `extra_variance`).
Neighbouring values of a misfit are strongly correlated, so the chi-square degrees of freedom are the
effective sample count n / tau, tau the integrated autocorrelation time (Sokal's window: the sum of the
autocorrelation up to the first lag M >= 5 tau(M)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import chdtri  # scipy.special, not scipy.stats: a node imports this (stats costs seconds)

RESIDUAL_P_VALUE = 1e-3
"""Chi-square tail probability below which a signal's residual is too large for its expected noise."""
RESIDUAL_RMS_RATIO = 1.5
"""...and the residual RMS must also exceed the expected RMS by this factor (a noise declared roughly)."""


@dataclass(frozen=True)
class SignalFit:
    """One observed signal's training residual: RMS in the signal's unit against the RMS its noise explains.

    `ratio` is RMS / expected RMS; with several segments the median over segments of that ratio, so that
    one badly started window (the record's first, say) does not speak for the fit, while a misfit raises all.
    """

    signal: str  # e.g. "hinge_qpos"
    rms: float
    expected_rms: float
    ratio: float
    segments: int
    samples: int
    effective_samples: float
    allowed_ratio: float  # the RMS ratio the chi-square test (and RESIDUAL_RMS_RATIO) allows

    @property
    def too_large(self) -> bool:
        return not self.ratio <= self.allowed_ratio  # NaN counts as too large


def autocorrelation_time(series: Sequence[np.ndarray], window_c: float = 5.0) -> float:
    """Integrated autocorrelation time of one signal pooled over segments (1 for white noise)."""
    series = [np.asarray(s, dtype=float) for s in series if len(s) > 2]
    if not series:
        return 1.0
    longest = max(len(s) for s in series)
    acov = np.zeros(longest)
    for s in series:
        x = s - s.mean()
        size = 1 << int(2 * len(x) - 1).bit_length()
        f = np.fft.rfft(x, size)
        acov[: len(x)] += np.fft.irfft(f * np.conj(f), size)[: len(x)]
    if acov[0] <= 0:
        return 1.0
    rho = acov / acov[0]
    tau = 1.0
    for lag in range(1, longest):
        tau += 2.0 * rho[lag]
        if lag >= window_c * tau:
            break
    return float(min(max(tau, 1.0), sum(len(s) for s in series)))


def signal_fits(
    residuals: Sequence[np.ndarray],
    group_sizes: Sequence[int],
    signals: Sequence[str],
    scales: Sequence[float],
    extra_variance: np.ndarray | None = None,
) -> list[SignalFit]:
    """Per signal: RMS and its chi-square allowance. `residuals` are the per-group residual vectors of a
    `batched_residual_fn` (segment-major, time, signal-minor), `signals` the column names, `scales` their noise."""
    m = len(signals)
    per_signal: list[list[np.ndarray]] = [[] for _ in range(m)]
    per_segment: list[list[float]] = [[] for _ in range(m)]  # sum of squares / its expected value
    expected = np.zeros(m)
    count = np.zeros(m, dtype=int)
    row = 0
    for res, segments in zip(residuals, group_sizes):
        res = np.asarray(res, dtype=float)
        block = res.reshape(segments, -1, m)
        extra = (
            np.zeros_like(block)
            if extra_variance is None
            else np.asarray(extra_variance[row : row + res.size], dtype=float).reshape(block.shape)
        )
        row += res.size
        for k in range(m):
            per_signal[k] += [block[i, :, k] for i in range(segments)]
            want = np.sum(1.0 + extra[:, :, k], axis=1)
            per_segment[k] += list(np.sum(block[:, :, k] ** 2, axis=1) / want)
            expected[k] += float(np.sum(want))
            count[k] += block.shape[0] * block.shape[1]
    out = []
    for k, name in enumerate(signals):
        sq = float(sum(np.sum(s**2) for s in per_signal[k]))
        n = int(count[k])
        n_eff = n / autocorrelation_time(per_signal[k]) if n else 0.0
        allowed = max(math.sqrt(chdtri(n_eff, RESIDUAL_P_VALUE) / n_eff) if n_eff > 0 else math.inf, RESIDUAL_RMS_RATIO)
        ratio = math.sqrt(sq / expected[k]) if len(per_segment[k]) == 1 else math.sqrt(np.median(per_segment[k]))
        out.append(
            SignalFit(
                name,
                scales[k] * math.sqrt(sq / n) if n else math.nan,
                scales[k] * math.sqrt(expected[k] / n) if n else math.nan,
                ratio,
                len(per_segment[k]),
                n,
                n_eff,
                allowed,
            )
        )
    return out


def block_sandwich(jac: np.ndarray, residual: np.ndarray, blocks: np.ndarray) -> tuple[np.ndarray, int]:
    """Covariance (J'J)^-1 [sum_b J_b' r_b r_b' J_b] (J'J)^-1 over blocks of rows, and the number of blocks.

    Valid when residuals of different blocks are nearly independent, whatever the correlation inside one.
    """
    jac = np.asarray(jac, dtype=float)
    residual = np.asarray(residual, dtype=float)
    labels, index = np.unique(blocks, return_inverse=True)
    scores = np.zeros((len(labels), jac.shape[1]))
    np.add.at(scores, index, jac * residual[:, None])
    bread = np.linalg.pinv(jac.T @ jac)
    return bread @ (scores.T @ scores) @ bread, len(labels)


def time_blocks(
    residuals: Sequence[np.ndarray], group_sizes: Sequence[int], signals: int, block_samples: int
) -> np.ndarray:
    """A block label for every residual row: (segment, time // block_samples), in the stacked row order."""
    labels, segment = [], 0
    for res, segments in zip(residuals, group_sizes):
        length = np.asarray(res).size // (segments * signals)
        t = np.repeat(np.arange(length) // max(block_samples, 1), signals)
        for _ in range(segments):
            labels.append(segment * (length + 1) + t)
            segment += 1
    return np.concatenate(labels) if labels else np.zeros(0, dtype=int)
