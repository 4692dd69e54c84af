"""Helpers of `test_online_industrial` that other tests and benches use too:
the online payload estimator on logs like a real 6-joint industrial arm's controller writes (issue 23).
"""

from __future__ import annotations

from functools import lru_cache

import mujoco
import numpy as np
from industrial_arm import (
    FRICTION,
    JOINTS,
    LINKS,
    MODEL,
    TRUE_DAMPING_NM_S_RAD,
    TRUE_LINK_MASS_KG,
    loaded_and_unloaded,
)

from sysid_ros.core.files import load_spec
from sysid_ros.core.online import (
    OnlineEstimator,
    load_model,
    payload_config,
)

SECONDS = 20.0


LINK_MASS_ERROR = (0.02, -0.015, 0.03, -0.03, 0.02, -0.02)


def identified_arm(path: str) -> str:
    """The user's model with what identification knows (module docstring), written to `path`."""
    spec = load_spec(MODEL)
    for body, mass, error in zip(LINKS, TRUE_LINK_MASS_KG, LINK_MASS_ERROR):
        spec.body(body).mass = mass * (1 + error)
    for k, joint in enumerate(JOINTS):
        spec.joint(joint).damping[0] = TRUE_DAMPING_NM_S_RAD[k]
        spec.joint(joint).frictionloss = FRICTION.coulomb_nm[k]
    for motor in spec.actuators:
        motor.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        motor.biasprm[0] = -FRICTION.effort_offset_nm[JOINTS.index(motor.target)] / motor.gear[0]
    payload = spec.body("payload")
    payload.mass, payload.inertia = 0.0, [0.0, 0.0, 0.0]
    with open(path, "w") as f:
        f.write(spec.to_xml())
    return path


@lru_cache(maxsize=1)
def runs(folder: str):
    """(the identified arm's file, {"unloaded": log, "loaded": log} with the estimator's outputs)."""
    arm = identified_arm(f"{folder}/identified.xml")
    unloaded, loaded = loaded_and_unloaded(folder, seed=0, seconds=SECONDS, garbage=3)
    config = payload_config(load_model(arm), "payload")
    out = {}
    for name, log in (("unloaded", unloaded), ("loaded", loaded)):
        est = OnlineEstimator(config)
        events, values = [], []
        for k in range(0, len(log.samples), 25):  # 0.25 s chunks, as the node feeds them
            events += est.update(log.samples.slice(k, k + 25))
            values.append(est.estimate.values)
        out[name] = (log, est, events, np.array(values))
    return arm, out
