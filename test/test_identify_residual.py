"""The residual's shortcut for a SignalTransform with nothing to do gives the library's numbers exactly."""

from __future__ import annotations

import numpy as np
from mujoco import sysid

from sysid_ros.core.files import load_spec
from sysid_ros.core.identify import ScaledResidual


def test_plain_shortcut_equals_the_library_transform():
    """The whole modify_residual both ways: measured columns out of the model's order, jittered stamps."""
    model = load_spec("arm3").compile()
    residual = ScaledResidual(sysid.SignalTransform(normalize=False), 2e-4, 2e-3)
    qpos, qvel, _, _ = sysid.TimeSeries.compute_all_state_mappings(model)
    names = [("elbow_qvel", qvel), ("shoulder_qpos", qpos), ("wrist_qpos", qpos), ("elbow_qpos", qpos)]
    for seed in range(5):
        rng = np.random.default_rng(seed)
        grid = 0.002 * np.arange(1, 126)  # the prediction: simulation steps after the start
        state = np.column_stack([grid, rng.normal(size=(len(grid), model.nq + model.nv + model.na))])
        sensordata = sysid.TimeSeries(grid, np.zeros((len(grid), 1)))
        stamps = np.sort(
            np.concatenate(
                [
                    [0.0, 0.0015, 0.004],  # before the first prediction, one on the grid
                    0.002 * np.arange(3, 130) + rng.uniform(-4e-4, 4e-4, 127),
                ]
            )
        )
        mapping = {name: (kind[name][0], np.array([k])) for k, (name, kind) in enumerate(names)}
        measured = sysid.TimeSeries(stamps, rng.normal(size=(len(stamps), len(names))), mapping)
        fast = residual(sysid.ParameterDict(), sensordata, measured, model, True, state=state)
        residual.plain = False
        slow = residual(sysid.ParameterDict(), sensordata, measured, model, True, state=state)
        residual.plain = True
        np.testing.assert_array_equal(fast[0], slow[0])
        for a, b in zip(fast[1:], slow[1:]):
            np.testing.assert_array_equal(a.times, b.times)
            np.testing.assert_array_equal(a.data, b.data)
            assert {k: (t, list(i)) for k, (t, i) in a.signal_mapping.items()} == {
                k: (t, list(i)) for k, (t, i) in b.signal_mapping.items()
            }
        assert fast[2].times[0] >= grid[0] and fast[2].times[-1] <= grid[-1] and len(fast[2].times) > 100
        assert np.all(fast[0][:, 0] == (fast[2].data[:, 0] - fast[1].data[:, 0]) / 2e-3)  # velocity scale


def test_shortcut_only_without_transform_work():
    params = sysid.ParameterDict()
    params.add(sysid.Parameter("delay", 0.001, 0.0, 0.01))
    plain = sysid.SignalTransform(normalize=False)
    assert ScaledResidual(plain, 1e-3, 1e-2).plain
    delayed = sysid.SignalTransform(normalize=False)
    delayed.delay("hinge_qpos", params["delay"])
    assert not ScaledResidual(delayed, 1e-3, 1e-2).plain
    assert not ScaledResidual(sysid.SignalTransform(), 1e-3, 1e-2).plain  # the library's normalisation
