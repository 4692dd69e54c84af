"""Where measured start states come from, decided from the data: the measured velocity, or the derivative
of smoothed positions.

An exact recorded velocity (a simulator's, an encoder's state estimate) is the best start velocity there
is; replacing it by a derivative of noisy positions only adds noise. Noisy start positions are smoothed
over 7 samples either way (raw 0.2 mrad positions raised the iiwa's held-out RMS from 0.27 to 0.40 mrad);
noise-free ones (under 1 µrad) are taken as they are (a fit's edge bias moved a pendulum's mass 0.07 %). A velocity
that is a
noisy difference of positions is worse than a local quadratic fit's derivative. Which one a bag holds is
measured: the white noise of each signal (`estimate_position_noise`, residual of short cubic fits) and
the noise the fitted derivative would have (sigma_q |h| / dt, h the 7-sample Savitzky-Golay derivative
weights). The measured velocity is used when it is no noisier than that derivative and agrees with it
(the RMS of their difference, at the best shift of up to one sample, within 1.5x what both noises explain
plus 2 % of the velocity's RMS for the fit's bias; a filtered or delayed velocity is further off).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.signal import savgol_coeffs, savgol_filter

from ...errors import DataError
from ...signals import JointSamples, estimate_position_noise

WINDOW = 7  # samples of the local quadratic fit when positions are smoothed
QUIET_RAD = 1e-6  # position noise below this (a microradian) is not smoothed


@dataclass(frozen=True)
class StartStateChoice:
    """`velocity`: `measured` or `positions`; `smoothing_samples` of the start positions; why."""

    velocity: str
    smoothing_samples: int
    reason: str
    velocity_noise: dict[str, float]
    derivative_noise: dict[str, float]
    disagreement: dict[str, float]


def _disagreement(q: np.ndarray, v: np.ndarray, dt_s: float) -> float:
    """RMS of the measured velocity minus the positions' derivative, at the best of the shifts up to one sample
    either way (sampling conventions: MuJoCo's semi-implicit Euler step makes q[k+1] - q[k] = h v[k+1])."""
    deriv = savgol_filter(q, WINDOW, 2, deriv=1, delta=dt_s)
    half = 0.5 * (deriv[1:] + deriv[:-1])  # the derivative half a sample later
    inner = slice(WINDOW + 1, len(q) - WINDOW - 1)
    shifted = [
        deriv[inner],
        np.roll(deriv, 1)[inner],
        np.roll(deriv, -1)[inner],
        np.append(half, 0.0)[inner],
        np.roll(np.append(half, 0.0), 1)[inner],
    ]
    return min(float(np.sqrt(np.mean((v[inner] - d) ** 2))) for d in shifted)


def choose_start_states(parts: Sequence[JointSamples], joints: Sequence[str]) -> StartStateChoice:
    """Compare each joint's measured velocity with its positions' derivative over all sample sets."""
    usable = [s for s in parts if len(s) >= 8 * WINDOW]
    if not usable or any(s.velocity is None for s in usable):
        return StartStateChoice(
            "positions",
            WINDOW,
            f"no measured velocity: positions smoothed over {WINDOW} samples give the start velocity",
            {},
            {},
            {},
        )
    longest = max(usable, key=len)
    dt_s = float(np.median(np.diff(longest.time_ns))) * 1e-9
    gain = float(np.linalg.norm(savgol_coeffs(WINDOW, 2, deriv=1))) / dt_s
    sigma_v, sigma_d, disagree, sigma_q = {}, {}, {}, {}
    for joint in joints:
        q, v = longest.column("position", joint), longest.column("velocity", joint)
        if not np.all(np.isfinite(q)):  # refused with its time and joint when the segments are built
            return StartStateChoice("positions", WINDOW, f"the positions of {joint} are not all finite", {}, {}, {})
        if not np.all(np.isfinite(v)):
            return StartStateChoice(
                "positions",
                WINDOW,
                f"the measured velocity of {joint} has gaps (NaN): "
                f"positions smoothed over {WINDOW} samples give the start velocity",
                {},
                {},
                {},
            )
        try:
            sigma_v[joint] = float(estimate_position_noise(v))
            sigma_q[joint] = float(estimate_position_noise(q))
            sigma_d[joint] = sigma_q[joint] * gain
        except DataError:
            return StartStateChoice("positions", WINDOW, "too few samples to judge the measured velocity", {}, {}, {})
        disagree[joint] = _disagreement(q, v, dt_s)
    noisier = [j for j in joints if sigma_v[j] > max(sigma_d[j], 1e-6)]  # both ~0: noise-free data
    # the quadratic fit's own bias (noise-free data: 3e-4 rad/s on a swinging pendulum) is allowed as 2 % of
    # the velocity's RMS; a velocity 20 ms late at 1-3 Hz is off by 10-40 % of it
    floor = {j: 0.02 * float(np.sqrt(np.mean(longest.column("velocity", j) ** 2))) for j in joints}
    inconsistent = [j for j in joints if disagree[j] > 1.5 * np.hypot(sigma_v[j], sigma_d[j]) + floor[j]]
    worst = max(joints, key=lambda j: sigma_v[j] / max(sigma_d[j], 1e-300))
    numbers = (
        f"{worst}: measured velocity noise {sigma_v[worst]:.2g} rad/s, the {WINDOW}-sample derivative's "
        f"{sigma_d[worst]:.2g} rad/s, RMS difference {disagree[worst]:.2g} rad/s"
    )
    if noisier:
        return StartStateChoice(
            "positions",
            WINDOW,
            f"the measured velocity is noisier than the positions' "
            f"derivative ({numbers}): start states from positions smoothed over {WINDOW} "
            "samples",
            sigma_v,
            sigma_d,
            disagree,
        )
    if inconsistent:
        j = inconsistent[0]
        return StartStateChoice(
            "positions",
            WINDOW,
            f"the measured velocity of {j} differs from the positions' "
            f"derivative by {disagree[j]:.2g} rad/s RMS, more than their noise explains "
            f"(filtered or late?): start states from positions smoothed over {WINDOW} samples",
            sigma_v,
            sigma_d,
            disagree,
        )
    if max(sigma_q.values()) <= QUIET_RAD:  # noise-free positions: a fit would only add its bias
        return StartStateChoice(
            "measured",
            0,
            f"the measured velocity agrees with the positions' derivative "
            f"({numbers}) and the positions are noise-free: start states as measured",
            sigma_v,
            sigma_d,
            disagree,
        )
    return StartStateChoice(
        "measured",
        WINDOW,
        f"the measured velocity agrees with the positions' derivative and "
        f"is less noisy ({numbers}): start velocities as measured, positions smoothed over "
        f"{WINDOW} samples",
        sigma_v,
        sigma_d,
        disagree,
    )
