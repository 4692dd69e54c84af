"""Helpers of `test_plausibility` that other tests and benches use too:
plausible identification of a full-inertia arm (issue 19): bounds from physics, the prior toward the nominal
"""

from __future__ import annotations

import numpy as np

from support.synthetic import multisine, record_position
from sysid_ros.core.bags import save_npz
from sysid_ros.core.gains import PidGains
from sysid_ros.core.sim import FeedbackNoise, SimRobot

JOINTS = ("shoulder", "elbow", "wrist")


LIMITS_NM = (60.0, 30.0, 8.0)


GAINS = {
    "shoulder": PidGains(p=300.0, i=0.0, d=20.0),
    "elbow": PidGains(p=150.0, i=0.0, d=8.0),
    "wrist": PidGains(p=20.0, i=0.0, d=0.4),
}


TRUE_MASSES = (2.3, 1.1, 0.6)


TRUE_TERMS = {"damping": (0.5, 0.3, 0.05), "armature": (0.08, 0.05, 0.012), "frictionloss": (0.3, 0.2, 0.05)}


def arm(masses, damping, armature, friction, hand_com) -> str:
    joints = [f'damping="{d}" armature="{a}" frictionloss="{f}"' for d, a, f in zip(damping, armature, friction)]
    return f"""<mujoco model="wrist_arm">
  <option timestep="0.001" integrator="implicitfast"/>
  <worldbody>
    <body name="upper" pos="0 0 0.5">
      <joint name="shoulder" axis="0 1 0" {joints[0]}/>
      <inertial mass="{masses[0]}" pos="0.2 0.01 0" fullinertia="0.003 0.035 0.034 0.0002 0.001 0.0001"/>
      <body name="fore" pos="0.4 0 0">
        <joint name="elbow" axis="0 1 0" {joints[1]}/>
        <inertial mass="{masses[1]}" pos="0.15 0 0.01" fullinertia="0.001 0.011 0.0105 0.0001 -0.0003 0.0001"/>
        <body name="hand" pos="0.3 0 0">
          <joint name="wrist" axis="1 0 0" {joints[2]}/>
          <inertial mass="{masses[2]}" pos="{hand_com}" fullinertia="0.0011 0.0013 0.0009 0.0001 0.0002 -0.0001"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="shoulder_motor" joint="shoulder" ctrlrange="-{LIMITS_NM[0]} {LIMITS_NM[0]}"/>
    <motor name="elbow_motor" joint="elbow" ctrlrange="-{LIMITS_NM[1]} {LIMITS_NM[1]}"/>
    <motor name="wrist_motor" joint="wrist" ctrlrange="-{LIMITS_NM[2]} {LIMITS_NM[2]}"/>
  </actuator>
</mujoco>"""


NOMINAL = arm((2.0, 1.2, 0.5), (0.4, 0.25, 0.04), (0.1, 0.05, 0.02), (0, 0, 0), "0.05 0.02 -0.03")


TRUTH = arm(TRUE_MASSES, TRUE_TERMS["damping"], TRUE_TERMS["armature"], TRUE_TERMS["frictionloss"], "0.05 -0.01 0.01")


def write_logs(folder, train_seed: int = 1, validation_seed: int = 2) -> None:
    """truth.xml, nominal.xml, and 3 s of PID tracking for training and 2 s (another multisine) held out, 0.2 mrad
    and 2 mrad/s noise (the seeds draw the multisine phases and the noise)."""
    (folder / "truth.xml").write_text(TRUTH)
    (folder / "nominal.xml").write_text(NOMINAL)
    for name, seed, seconds in (("train", train_seed, 3.0), ("val", validation_seed, 2.0)):
        robot = SimRobot(
            str(folder / "truth.xml"),
            noise=FeedbackNoise(position_rad=2e-4, velocity_rad_s=2e-3),
            seed=seed,
            start_time_ns=5_000_000_017,
        )
        t = np.arange(0, seconds + 1e-9, 0.002)
        setpoints = np.column_stack(
            [
                amp * multisine(t, [0.3, 0.7, 1.1, 1.7, 2.3], 1.0, seed=10 * seed + j)
                for j, amp in enumerate((0.8, 1.0, 1.0))
            ]
        )
        save_npz(
            folder / f"{name}.npz",
            record_position(robot, lambda ts: setpoints[int(round(ts / 0.002))], seconds, GAINS),
            {},
        )


def problem_doc(tmp, parameters, **extra) -> dict:
    return {
        "model": str(tmp / "nominal.xml"),
        "joints": list(JOINTS),
        "training": [str(tmp / "train.npz")],
        "validation": [str(tmp / "val.npz")],
        "segment_s": 0.25,
        "warm_start": False,
        "noise": {"position_rad": 2e-4, "velocity_rad_s": 2e-3},
        "parameters": parameters,
        **extra,
    }


def joint_terms(bounds: bool) -> list[dict]:
    out = []
    for j in JOINTS:
        for kind, hi in (("damping", 5.0), ("armature", 1.0), ("frictionloss", 5.0)):
            out.append(
                {
                    "name": f"{j}_{kind}",
                    "kind": f"joint_{kind}",
                    "joint": j,
                    **({"min": 0.0, "max": hi} if bounds else {}),
                }
            )
    return out
