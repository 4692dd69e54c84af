"""The whole-arm regressor tau = W(q, qd, qdd) theta from MuJoCo alone: exact against mj_inverse, its base
parameters, and identification of a 3-link planar vertical arm from noise-free and from noisy records."""

from __future__ import annotations

from functools import lru_cache

import mujoco
import numpy as np
import pytest

from sysid_ros.core.errors import DataError, ModelError
from sysid_ros.core.linear import (
    INERTIAL_NAMES,
    ArmRegressor,
    BootstrapSettings,
    RowSelection,
    base_parameters,
    body_inertial_parameters,
    fit_arm,
    structural_base_parameters,
)
from sysid_ros.core.signals import Derivatives, quartic_derivatives

# A deliberately irregular arm: tilted frames, rotated principal axes, a slide joint at the tip.
SPATIAL_XML = """<mujoco><option timestep="0.002"/>
<worldbody>
 <body name="l1" pos="0 0 0.1"><joint name="j1" axis="0 0 1" damping="0.3" armature="0.02"/>
  <inertial pos="0.01 0.02 0.15" quat="0.9 0.1 0.3 0.2" mass="2.0" diaginertia="0.03 0.02 0.01"/>
  <body name="l2" pos="0 0.05 0.3" euler="10 0 20"><joint name="j2" axis="0 1 0" damping="0.2" armature="0.01"/>
   <inertial pos="0.2 0.01 -0.02" quat="1 0.2 0 0.1" mass="1.5" diaginertia="0.02 0.015 0.005"/>
   <body name="l3" pos="0.4 0 0"><joint name="j3" axis="1 0.2 0" damping="0.1" armature="0.005"/>
    <inertial pos="0.1 0.03 0.01" mass="0.7" diaginertia="0.004 0.003 0.002"/>
    <body name="l4" pos="0.2 0 0"><joint name="j4" type="slide" axis="0 0.6 0.8" damping="1.0"/>
     <inertial pos="0.05 0 0" mass="0.3" diaginertia="0.001 0.001 0.001"/>
    </body>
   </body>
  </body>
 </body>
</worldbody></mujoco>"""

# The 3-link planar arm moving in the vertical x-z plane (hinges about y, gravity -z).
PLANAR_XML = """<mujoco model="arm3"><option timestep="0.002"/>
<default><joint type="hinge" axis="0 1 0" damping="0.3" frictionloss="0.2"/></default>
<worldbody>
 <body name="link1" pos="0 0 0.5"><joint name="j1" armature="0.05"/>
  <inertial pos="0.2 0 0.01" mass="2.0" diaginertia="0.002 0.03 0.03"/>
  <body name="link2" pos="0.4 0 0"><joint name="j2" armature="0.03"/>
   <inertial pos="0.15 0 -0.01" mass="1.2" diaginertia="0.001 0.012 0.012"/>
   <body name="link3" pos="0.3 0 0"><joint name="j3" armature="0.01"/>
    <inertial pos="0.08 0 0" mass="0.5" diaginertia="0.0005 0.002 0.002"/>
   </body>
  </body>
 </body>
</worldbody>
<actuator><motor joint="j1"/><motor joint="j2"/><motor joint="j3"/></actuator></mujoco>"""


@lru_cache(maxsize=2)
def compiled(xml: str) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(xml)


@lru_cache(maxsize=1)
def planar() -> tuple[ArmRegressor, object]:
    arm = ArmRegressor(compiled(PLANAR_XML))
    return arm, structural_base_parameters(arm)


@lru_cache(maxsize=1)
def planar_record() -> tuple[np.ndarray, ...]:
    """10 s of PD tracking of per-joint multisines: (positions, velocities, accelerations, requested torque)."""
    model = compiled(PLANAR_XML)
    h = model.opt.timestep
    t = np.arange(5000) * h
    rng = np.random.default_rng(3)
    ref, ref_d = np.zeros((t.size, 3)), np.zeros((t.size, 3))
    for j, (amp, centre) in enumerate(((0.19, 0.3), (0.15, -0.4), (0.125, 0.3))):
        for f, p in zip(rng.uniform(0.2, 1.5, 4), rng.uniform(0, 2 * np.pi, 4)):
            ref[:, j] += amp * np.sin(2 * np.pi * f * t + p)
            ref_d[:, j] += amp * 2 * np.pi * f * np.cos(2 * np.pi * f * t + p)
        ref[:, j] += centre
    kp, kd = np.array([200.0, 120.0, 60.0]), np.array([20.0, 12.0, 4.0])
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = ref[0], ref_d[0]
    q, qd, qdd, u = (np.empty((t.size, 3)) for _ in range(4))
    for k in range(t.size):
        q[k], qd[k] = data.qpos, data.qvel
        u[k] = kp * (ref[k] - data.qpos) + kd * (ref_d[k] - data.qvel)
        data.ctrl[:] = u[k]
        mujoco.mj_step(model, data)
        qdd[k] = data.qacc  # the acceleration of step k (mj_step integrates qpos/qvel, not qacc)
    return q, qd, qdd, u


def combination_scale(base: object, theta: np.ndarray) -> np.ndarray:
    """Size of each base parameter's ingredients, |theta_i| + sum |beta_ij theta_j|: the yardstick for errors."""
    return np.abs(theta[base.independent]) + np.abs(base.beta) @ np.abs(theta[base.dependent])


def test_regressor_times_true_parameters_is_mj_inverse() -> None:
    model = compiled(SPATIAL_XML)
    arm = ArmRegressor(model)
    assert arm.n_params == 10 * 4 + 4 * 4 and arm.names[:2] == ("l1.m", "l1.mx")
    theta = arm.true_parameters()
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.normal(0, 1, (60, 4)), rng.normal(0, 2, (60, 4)), rng.normal(0, 5, (60, 4))
    w = arm.compute(q, qd, qdd)
    data = mujoco.MjData(model)
    for k in range(len(q)):
        data.qpos[:], data.qvel[:], data.qacc[:] = q[k], qd[k], qdd[k]
        mujoco.mj_inverse(model, data)
        np.testing.assert_allclose(w[k] @ theta, data.qfrc_inverse, rtol=0, atol=1e-9)


def test_body_parameters_follow_pinocchio_order() -> None:
    model = compiled(PLANAR_XML)
    theta = body_inertial_parameters(model, model.body("link3").id)
    assert INERTIAL_NAMES[6] == "Iyy"
    m, c = 0.5, 0.08
    np.testing.assert_allclose(theta[:4], [m, m * c, 0, 0], atol=1e-12)
    assert theta[6] == pytest.approx(0.002 + m * c**2)  # about the body origin: parallel axis
    assert theta[4] == pytest.approx(0.0005)


def test_planar_arm_base_parameters_and_what_cannot_be_identified() -> None:
    arm, base = planar()
    # 3 planar links: (mx, mz, Iyy) each plus link2's mass folded with its neighbours, 4 terms a joint, and
    # joint 1's armature can only ever be seen together with link 1's inertia about its axis
    assert base.rank == 20
    unid = set(base.unidentifiable)
    for link in ("link1", "link2", "link3"):
        assert {f"{link}.my", f"{link}.Ixx", f"{link}.Izz", f"{link}.Ixy", f"{link}.Iyz"} <= unid
    assert "link1.m" in unid  # its centre swings about a fixed axis: only m*c shows
    combined = set(base.combined_only)
    assert {"link3.m", "link2.m", "j1.armature", "link1.Iyy"} <= combined  # the last link's mass alone is not
    assert {"link3.mx", "link3.Iyy", "j2.armature", "j3.viscous"} <= set(base.identifiable_alone)
    assert any("link3.m" in name and "link2.mx" in name for name in base.base_names)
    # the base regressor reproduces the full one at new random states
    theta = arm.true_parameters()
    rng = np.random.default_rng(9)
    w = arm.compute(rng.normal(size=(20, 3)), rng.normal(size=(20, 3)), rng.normal(size=(20, 3)))
    np.testing.assert_allclose(base.reduce(w) @ base.values(theta), w @ theta, atol=1e-9)


def test_noise_free_record_recovers_the_base_parameters() -> None:
    arm, base = planar()
    q, qd, qdd, u = planar_record()
    exact = Derivatives(q, qd, qdd, np.ones(q.shape, dtype=bool), 0.002, "exact", 1, 0, 0.0, 0.0, 0.0)
    # MuJoCo's friction loss is f sign(qd) only outside a band that widens with acceleration: at up to
    # 48 rad/s^2 and 2 ms, rows at 0.1-0.3 rad/s still see the force of the other sign (measured), so
    # the exactness check leaves out rows slower than 0.3 rad/s
    fit = fit_arm(
        arm, exact, u, base, selection=RowSelection(slow_speed_rad_s=0.3), bootstrap=BootstrapSettings(resamples=50)
    )
    truth = base.values(arm.true_parameters())
    np.testing.assert_allclose(fit.fit.values, truth, rtol=0, atol=1e-9)
    np.testing.assert_allclose(fit.predicted_torque(arm, q[:5], qd[:5], qdd[:5]), u[:5], atol=1e-8)


def test_a_precomputed_regressor_with_another_coulomb_band_gives_the_same_fit() -> None:
    """`fit_arm(regressor=)` / `predicted_torque(regressor=)` (the friction check reuses one W per record):
    W computed with another Coulomb band has its Coulomb columns replaced by the arm's; a W of the wrong
    rows is refused."""
    arm, base = planar()
    q, _, _, u = planar_record()
    deriv = quartic_derivatives(q + np.random.default_rng(5).normal(0.0, 2e-4, q.shape), 0.002, 0.2)
    ok = deriv.valid.all(axis=1)
    other = ArmRegressor(arm.model, coulomb_band_rad_s=0.3)
    w = other.compute(deriv.q[ok], deriv.qd[ok], deriv.qdd[ok])
    settings = BootstrapSettings(resamples=50)
    fresh = fit_arm(arm, deriv, u, base, bootstrap=settings)
    reused = fit_arm(arm, deriv, u, base, bootstrap=settings, regressor=w)
    np.testing.assert_allclose(reused.fit.values, fresh.fit.values, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(reused.fit.half_width_95, fresh.fit.half_width_95, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(
        fresh.predicted_torque(arm, q[ok][:50], deriv.qd[ok][:50], deriv.qdd[ok][:50]),
        fresh.predicted_torque(
            arm,
            q[ok][:50],
            deriv.qd[ok][:50],
            deriv.qdd[ok][:50],
            regressor=other.compute(q[ok][:50], deriv.qd[ok][:50], deriv.qdd[ok][:50]),
        ),
        atol=1e-10,
    )
    with pytest.raises(DataError, match="precomputed regressor"):
        fit_arm(arm, deriv, u, base, bootstrap=settings, regressor=w[1:])


def test_noisy_record_identifies_what_it_excites_and_flags_the_rest() -> None:
    arm, base = planar()
    q, _, _, u = planar_record()
    noisy = q + np.random.default_rng(4).normal(0.0, 2e-4, q.shape)
    fit = fit_arm(arm, quartic_derivatives(noisy, 0.002, 0.2), u, base, bootstrap=BootstrapSettings(resamples=100))
    theta = arm.true_parameters()
    # Velocities from positions are v + h qdd / 2 under MuJoCo's semi-implicit Euler step, while its damping
    # acts on v + h qdd: from positions alone each armature looks larger by b h / 2 (3e-4 kg m^2 here)
    model = compiled(PLANAR_XML)
    for j, name in enumerate(arm.joint_names):
        theta[arm.names.index(f"{name}.armature")] += model.dof_damping[j] * model.opt.timestep / 2
    truth = base.values(theta)
    scale = combination_scale(base, theta)
    flagged = set(fit.fit.unreliable)
    # the offsets are zero and the link-1 combination nearly so: an interval of any width is wide next to
    # them; the record cannot tell joint 1's offset from its gravity term over its 1.2 rad of travel
    assert {"j1.offset", "j2.offset", "j3.offset", "link1.Iyy -0.4*link1.mx +1*j1.armature"} <= flagged
    solid = np.array([name not in flagged for name in fit.fit.names])
    assert solid.sum() >= 14
    # 0.2 mrad at 500 Hz, quartic fits over 0.2 s: the filter's own bias is under 0.5 % of each combination
    # (measured noise-free); the rest is noise, which the bootstrap half-width measures
    err = np.abs(fit.fit.values - truth)
    assert np.all(err[solid] < 2 * fit.fit.half_width_95[solid] + 0.005 * scale[solid])
    well_known = [
        i
        for i, name in enumerate(fit.fit.names)
        if name.startswith(("link2.m ", "link2.mx", "link2.Iyy", "link3.mx", "link3.Iyy", "j2.", "j3."))
        and "offset" not in name
    ]
    assert len(well_known) == 11
    assert np.all(err[well_known] / scale[well_known] < 0.02)


def test_arm_inputs_are_checked() -> None:
    ball = compiled("""<mujoco><worldbody><body><joint name="b" type="ball"/>
        <geom size="0.1"/></body></worldbody></mujoco>""")
    with pytest.raises(ModelError, match="hinge and slide"):
        ArmRegressor(ball)
    arm, base = planar()
    with pytest.raises(DataError):
        arm.compute(np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)))
    with pytest.raises(DataError, match="finite"):
        arm.compute(np.full((1, 3), np.nan), np.zeros((1, 3)), np.zeros((1, 3)))
    with pytest.raises(DataError, match="zero"):
        base_parameters(np.zeros((10, 4)), ("a", "b", "c", "d"))
