"""The residual's shortcut for a SignalTransform with nothing to do gives the library's numbers exactly."""

from __future__ import annotations

import numpy as np
from mujoco import sysid

from sysid_ros.core.identify.residual import ScaledResidual, _plain
from sysid_ros.core.sim import load_spec


def series(seed: int):
    rng = np.random.default_rng(seed)
    mapping = {"hinge_qpos": (sysid.SignalType.MjStateQPos, np.array([0])),
               "hinge_qvel": (sysid.SignalType.MjStateQVel, np.array([1]))}
    grid = 0.002 * np.arange(1, 126)  # the prediction: simulation steps after the start
    predicted = sysid.TimeSeries(grid, rng.normal(size=(len(grid), 2)), mapping)
    # measured: jittered stamps, some before the first prediction and after the last, one exactly on the grid
    stamps = np.sort(np.concatenate([[0.0, 0.0015, 0.004], 0.002 * np.arange(3, 130) + rng.uniform(-4e-4, 4e-4, 127)]))
    measured = sysid.TimeSeries(stamps, rng.normal(size=(len(stamps), 2)), mapping)
    return predicted, measured


def test_plain_shortcut_equals_the_library_transform():
    model = load_spec("pendulum").compile()
    transform = sysid.SignalTransform(normalize=False)
    for seed in range(5):
        predicted, measured = series(seed)
        res, pred, meas = _plain(predicted, measured)
        ref, ref_pred, ref_meas = transform.apply(sysid.ParameterDict(), predicted, measured, model, True)
        np.testing.assert_array_equal(res, ref)
        np.testing.assert_array_equal(pred.data, ref_pred.data)
        np.testing.assert_array_equal(meas.times, ref_meas.times)
        np.testing.assert_array_equal(meas.data, ref_meas.data)
        assert meas.times[0] >= predicted.times[0] and meas.times[-1] <= predicted.times[-1]


def test_shortcut_only_without_transform_work():
    params = sysid.ParameterDict()
    params.add(sysid.Parameter("delay", 0.001, 0.0, 0.01))
    plain = sysid.SignalTransform(normalize=False)
    assert ScaledResidual(plain, 1e-3, 1e-2).plain
    delayed = sysid.SignalTransform(normalize=False)
    delayed.delay("hinge_qpos", params["delay"])
    assert not ScaledResidual(delayed, 1e-3, 1e-2).plain
    assert not ScaledResidual(sysid.SignalTransform(), 1e-3, 1e-2).plain  # the library's normalisation
