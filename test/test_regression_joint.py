"""Seed 004's joint model, tau = J qdd + b qd + tc tanh(qd/0.01) + gs sin q + gc cos q, fitted to a
simulated geared joint (rotor inertia as armature, viscous damping, MuJoCo friction loss, an offset link
under gravity) tracking a chirp under PD control at 1 kHz, with the torque the controller requested."""

from __future__ import annotations

from functools import lru_cache

import mujoco
import numpy as np
import pytest

from sysid_ros.core.errors import ConfigError, DataError
from sysid_ros.core.linear import PRISMATIC_TERMS, REVOLUTE_TERMS, JointModel, fit_joint_model, joint_columns
from sysid_ros.core.signals import quartic_derivatives

CAP_NM = 5.5
NOISE_RAD = 1e-4  # an encoder-grade 0.1 mrad at 1 kHz
JOINT_XML = f"""<mujoco model="geared_joint">
  <option timestep="0.001"/>
  <worldbody>
    <body name="link">
      <joint name="elbow" type="hinge" axis="0 1 0" damping="0.4" frictionloss="0.3" armature="0.04"/>
      <inertial pos="0.15 0 -0.05" mass="1.5" diaginertia="0.004 0.006 0.004"/>
    </body>
  </worldbody>
  <actuator><motor joint="elbow" ctrllimited="true" ctrlrange="-{CAP_NM} {CAP_NM}"/></actuator>
</mujoco>"""


@lru_cache(maxsize=1)
def plant() -> tuple[mujoco.MjModel, dict[str, float]]:
    """The joint and its true model terms (J from the mass matrix, gravity from the bias force)."""
    model = mujoco.MjModel.from_xml_string(JOINT_XML)
    data = mujoco.MjData(model)

    def gravity(q: float) -> float:
        data.qpos[0], data.qvel[0] = q, 0.0
        mujoco.mj_forward(model, data)
        return float(data.qfrc_bias[0])

    terms = {"gravity_sin_nm": gravity(np.pi / 2), "gravity_cos_nm": gravity(0.0)}
    mass = np.zeros((1, 1))
    mujoco.mj_fullM(model, data, mass)  # after mj_forward
    return model, {"inertia_kg_m2": float(mass[0, 0]), "viscous_nm_s_rad": 0.4, "coulomb_nm": 0.3, **terms}


@lru_cache(maxsize=1)
def chirp_record() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """16 s: a 0.1-2 Hz chirp on a slow sweep, PD-tracked; (requested torque, true angle, measured angle)."""
    model, _ = plant()
    h, duration = model.opt.timestep, 16.0
    t = np.arange(round(duration / h)) * h
    phase = 2 * np.pi * (0.1 * t + (2.0 - 0.1) * t**2 / (2 * duration))
    ref = 0.35 * np.sin(phase) + 0.5 * np.sin(2 * np.pi * 0.15 * t)
    ref_d = np.gradient(ref, h)
    data = mujoco.MjData(model)
    data.qpos[0] = ref[0]
    q, u = np.empty(t.size), np.empty(t.size)
    for k in range(t.size):
        q[k] = data.qpos[0]
        u[k] = 150.0 * (ref[k] - data.qpos[0]) + 6.0 * (ref_d[k] - data.qvel[0])
        data.ctrl[0] = u[k]  # MuJoCo clips to the cap; the record keeps what was requested
        mujoco.mj_step(model, data)
    return u, q, q + np.random.default_rng(0).normal(0.0, NOISE_RAD, t.size)


def test_joint_model_torque_matches_its_columns() -> None:
    model = JointModel(0.1, 0.4, 0.3, 0.7, -2.2, 0.05)
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.normal(size=(3, 50))
    expected = 0.1 * qdd + 0.4 * qd + 0.3 * np.tanh(qd / 0.01) + 0.7 * np.sin(q) - 2.2 * np.cos(q) + 0.05
    np.testing.assert_allclose(model.torque(q, qd, qdd), expected, rtol=1e-12)
    assert joint_columns(q, qd, qdd, PRISMATIC_TERMS).shape == (50, 4)
    with pytest.raises(ConfigError):
        joint_columns(q, qd, qdd, ("inertia_kg_m2", "stiction"))
    with pytest.raises(ConfigError):
        model.replace_terms({"stiction": 1.0})


def test_geared_joint_is_recovered() -> None:
    model, truth = plant()
    torque, _, q = chirp_record()
    fit = fit_joint_model(quartic_derivatives(q, model.opt.timestep), torque, torque_cap_nm=CAP_NM, joint="elbow")
    # Tolerances: the noise-free fit is off by +0.21 % in J (MuJoCo's Euler step damps with v + h qdd, the
    # fit sees v + h qdd / 2: b h / 2 = 2e-4 kg m^2) and < 0.1 % elsewhere; 0.1 mrad of noise adds less
    # than its 95 % half-widths (<= 0.05 % here). 1 % on J and gravity, 2 % on friction terms leave room.
    for name, rel in (
        ("inertia_kg_m2", 0.01),
        ("viscous_nm_s_rad", 0.02),
        ("coulomb_nm", 0.02),
        ("gravity_sin_nm", 0.01),
        ("gravity_cos_nm", 0.01),
    ):
        assert fit.fit.value(name) == pytest.approx(truth[name], rel=rel), name
        assert getattr(fit.model, name) == fit.fit.value(name)
    assert fit.fit.warnings == ()
    assert fit.fit.condition_number < 100  # the tuner refuses a fit above 100


def test_saturated_rows_are_left_out() -> None:
    model, truth = plant()
    torque, _, q = chirp_record()
    deriv = quartic_derivatives(q, model.opt.timestep)
    saturated = np.abs(torque) >= 0.98 * CAP_NM
    assert 0.005 < saturated.mean() < 0.1
    kept = fit_joint_model(deriv, torque, torque_cap_nm=CAP_NM)
    assert not (kept.rows & saturated).any()
    blind = fit_joint_model(deriv, torque)  # requested torque above the cap, never applied
    err_blind = abs(blind.fit.value("inertia_kg_m2") / truth["inertia_kg_m2"] - 1)
    err_kept = abs(kept.fit.value("inertia_kg_m2") / truth["inertia_kg_m2"] - 1)
    assert err_blind > 3 * err_kept


def test_known_rotor_inertia_moves_to_the_left_hand_side() -> None:
    model, truth = plant()
    torque, _, q = chirp_record()
    deriv = quartic_derivatives(q, model.opt.timestep)
    rotor = 0.04
    link_only = fit_joint_model(deriv, torque, torque_cap_nm=CAP_NM, known_torque_nm=rotor * np.nan_to_num(deriv.qdd))
    assert link_only.model.inertia_kg_m2 == pytest.approx(truth["inertia_kg_m2"] - rotor, rel=0.02)
    fixed = fit_joint_model(
        deriv, torque, torque_cap_nm=CAP_NM, fixed={"inertia_kg_m2": truth["inertia_kg_m2"]}, terms=REVOLUTE_TERMS[1:]
    )
    assert fixed.fit.names == REVOLUTE_TERMS[1:]
    assert fixed.model.inertia_kg_m2 == truth["inertia_kg_m2"]
    assert fixed.model.coulomb_nm == pytest.approx(0.3, rel=0.02)
    with pytest.raises(ConfigError, match="both fixed and estimated"):
        fit_joint_model(deriv, torque, fixed={"coulomb_nm": 0.3})


def test_a_joint_that_does_not_move_is_refused() -> None:
    model, _ = plant()
    torque, _, q = chirp_record()
    still = np.full_like(q, 0.2) + np.random.default_rng(1).normal(0.0, NOISE_RAD, q.size)
    with pytest.raises(DataError, match="usable rows") as info:
        fit_joint_model(quartic_derivatives(still, model.opt.timestep), torque, joint="elbow")
    assert info.value.where["joint"] == "elbow"
