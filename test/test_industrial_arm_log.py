"""The industrial-arm log generator writes what it promises (test/industrial_arm.py): ~100 Hz rows 8-14 ms apart,
current-scaled efforts, garbage rows, the payload only in the loaded run, on a model whose payload MuJoCo
treats as `body_sameframe`."""

from __future__ import annotations

import mujoco
import numpy as np
from industrial_arm import CURRENT_RESOLUTION_A, DRIVE_GAIN_NM_PER_A, FRICTION, JOINTS, PAYLOAD_KG, loaded_and_unloaded

from sysid_ros.core.bags import read_joint_states
from sysid_ros.core.files import model_path


def test_the_model_s_payload_is_sameframe_and_each_joint_has_a_plain_motor():
    model = mujoco.MjModel.from_xml_path(str(model_path("ur10e_like")))
    assert model.body_sameframe[model.body("payload").id] == 1  # the trap the issue names
    assert [model.joint(model.actuator_trnid[a, 0]).name for a in range(model.nu)] == list(JOINTS)


def test_loaded_and_unloaded_runs_are_logged_like_a_controller(tmp_path):
    unloaded, loaded = loaded_and_unloaded(tmp_path, seed=3, seconds=3.0)
    for run, payload in ((unloaded, 0.0), (loaded, PAYLOAD_KG)):
        steps_ms = np.diff(run.samples.time_ns) / 1e6
        assert steps_ms.min() >= 8 and steps_ms.max() <= 14 and 9.5 < steps_ms.mean() < 10.5
        assert run.robot.model.body_mass[run.robot.model.body("payload").id] == payload
        bad = ~np.all(np.isfinite(run.samples.position) & (np.abs(run.samples.position) < 1e3), axis=1)
        assert tuple(np.flatnonzero(bad)) == run.garbage_rows and len(run.garbage_rows) == 3
        current = run.samples.effort / np.asarray(DRIVE_GAIN_NM_PER_A)  # whole milliamperes
        assert np.allclose(current / CURRENT_RESOLUTION_A, np.rint(current / CURRENT_RESOLUTION_A), atol=1e-6)
        read = read_joint_states(run.path)  # the garbage rows dropped, counted
        assert read.dropped_rows == 3 and len(read.samples) == len(run.samples) - 3
    # same trajectory: the setpoints are the same, the loaded arm's shoulder works harder
    assert np.abs(loaded.truth.effort[:, 1]).mean() > np.abs(unloaded.truth.effort[:, 1]).mean() + 5
    assert max(FRICTION.coulomb_nm[:3]) >= 10  # tens of N m on the big joints
