"""The base-parameter fit (core/linear/base_fit.py) on a simulated Panda with hidden physics: torque from
mj_inverse of the true model (its friction loss as the fit writes it) plus noise; the fitted MJCF must predict
held-out torque near the noise floor, and the joint terms the data identify alone must come out near the truth.
A torque sensor that misses part of a joint's inertia reads as a negative armature: the fit takes it where the
joint-space inertia stays positive definite and holds it at zero where it cannot (naming the joint)."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from sysid_ros.core.identify import ParameterSpec
from sysid_ros.core.identify.stages import torque_fit
from sysid_ros.core.linear import (
    FRICTION_SOLIMP,
    FRICTION_SOLREF,
    JOINT_TERMS,
    ArmRegressor,
    BaseFitSettings,
    Rows,
    fit_base_parameters,
)
from sysid_ros.core.linear.base_fit import from_log_cholesky, log_cholesky_jacobian, min_inertia_eigenvalue

MODEL = Path(__file__).parent / "data/real/panda_menagerie/panda_torque.xml"
DAMPING = (0.3, 0.5, 0.2, 0.4, 0.1, 0.05, 0.08)
FRICTION = (0.4, 0.6, 0.5, 0.8, 0.3, 0.2, 0.3)
OFFSET = (0.1, -0.2, 0.05, 0.3, -0.05, 0.02, 0.0)
NOISE_NM = 0.02


def truth() -> mujoco.MjSpec:
    spec = mujoco.MjSpec.from_file(str(MODEL))
    for k in range(7):
        body = spec.body(f"link{k + 1}")
        body.mass *= 1.0 + 0.1 * ((-1) ** k)
        joint = spec.joint(f"joint{k + 1}")
        joint.damping[0], joint.frictionloss, joint.armature = DAMPING[k], FRICTION[k], 0.05
        joint.solref_friction, joint.solimp_friction = FRICTION_SOLREF, FRICTION_SOLIMP
        motor = spec.actuator(f"motor{k + 1}")
        motor.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        motor.biasprm[0] = -OFFSET[k]
    return spec


def record(model: mujoco.MjModel, seconds: float, seed: int, noise_nm: float = NOISE_NM) -> Rows:
    rng = np.random.default_rng(seed)
    dt = 0.005
    t = np.arange(0.0, seconds, dt)[:, None]
    freqs = np.array([0.13, 0.29, 0.41])
    amp = rng.uniform(0.2, 0.5, (7, 3))
    phase = rng.uniform(0, 2 * np.pi, (7, 3))
    centre = np.array([0.0, 0.0, 0.0, -1.6, 0.0, 1.6, 0.0])
    w = 2 * np.pi * freqs
    q = centre + np.einsum("jf,tjf->tj", amp, np.sin(w * t[:, :, None] + phase))
    qd = np.einsum("jf,tjf->tj", amp * w, np.cos(w * t[:, :, None] + phase))
    qdd = np.einsum("jf,tjf->tj", -amp * w**2, np.sin(w * t[:, :, None] + phase))
    data = mujoco.MjData(model)
    tau = np.empty_like(q)
    for k in range(len(q)):
        data.qpos[:7], data.qvel[:7], data.qacc[:7] = q[k], qd[k], qdd[k]
        data.ctrl[:] = 0.0
        mujoco.mj_inverse(model, data)
        mujoco.mj_fwdActuation(model, data)
        tau[k] = (data.qfrc_inverse - data.qfrc_actuator)[:7]
    return Rows(q, qd, qdd, tau + rng.normal(0.0, noise_nm, tau.shape), dt)


def predict(model: mujoco.MjModel, rows: Rows, index: np.ndarray) -> np.ndarray:
    data = mujoco.MjData(model)
    out = np.empty((len(index), 7))
    for k, i in enumerate(index):
        data.qpos[:7], data.qvel[:7], data.qacc[:7] = rows.q[i], rows.qd[i], rows.qdd[i]
        data.ctrl[:] = 0.0
        mujoco.mj_inverse(model, data)
        mujoco.mj_fwdActuation(model, data)
        out[k] = (data.qfrc_inverse - data.qfrc_actuator)[:7]
    return out


def test_fitted_mjcf_predicts_held_out_torque_and_finds_the_joint_terms():
    true_model = truth().compile()
    rows = record(true_model, 24.0, seed=3)
    train = np.arange(len(rows.q)) < int(0.75 * len(rows.q))
    fit = fit_base_parameters(
        mujoco.MjSpec.from_file(str(MODEL)), rows, BaseFitSettings(bootstrap_replicates=100), train=train
    )
    fitted = fit.spec.compile()
    held = ~train
    clean = record(true_model, 24.0, seed=3, noise_nm=0.0)  # the same trajectory without noise
    predicted = predict(fitted, rows, np.flatnonzero(held))
    rms = np.sqrt(np.mean((clean.tau[held] - predicted) ** 2, axis=0))
    assert fit.notes == (), fit.notes  # every armature positive: nothing held
    assert np.all(fitted.dof_armature >= 0), fitted.dof_armature
    # against the noise-free torque; 0.06 N m (3x the noise) leaves room for the held-out poses' extrapolation
    # of what the data barely see
    assert np.all(rms < 3 * NOISE_NM), rms
    for k in range(7):
        j = f"joint{k + 1}"
        assert abs(fit.value(f"{j}.coulomb") - FRICTION[k]) < 0.05, (j, fit.value(f"{j}.coulomb"))
        assert abs(fit.value(f"{j}.offset") - OFFSET[k]) < 0.05, (j, fit.value(f"{j}.offset"))
    covered = [
        lo <= FRICTION[k] <= hi
        for k in range(7)
        for name, (lo, hi) in fit.intervals.items()
        if name == f"joint{k + 1}.coulomb"
    ]
    assert covered and np.mean(covered) >= 5 / 7, fit.intervals


def test_a_sensor_missing_inertia_reads_as_negative_armature_kept_where_the_inertia_stays_positive():
    """Joint 4's sensor misses 0.13 kg m^2 (the true armature 0.05: -0.08 net, its diagonal inertia >= 0.8), joint
    7's 0.1 (-0.05 net, more than half its smallest diagonal inertia, 0.057): joint 4 comes out near -0.08 and
    predicts held-out torque near the noise floor, joint 7 is held at zero and named, the inertia stays positive."""
    true_model = truth().compile()
    missing = np.array([0.0, 0.0, 0.0, 0.13, 0.0, 0.0, 0.1])
    noisy = record(true_model, 24.0, seed=3)
    rows = Rows(noisy.q, noisy.qd, noisy.qdd, noisy.tau - missing * noisy.qdd, noisy.period_s)
    train = np.arange(len(rows.q)) < int(0.75 * len(rows.q))
    fit = fit_base_parameters(
        mujoco.MjSpec.from_file(str(MODEL)), rows, BaseFitSettings(bootstrap_replicates=0), train=train
    )
    assert abs(fit.value("joint4.armature") + 0.08) < 0.02, fit.value("joint4.armature")
    assert 0.0 <= fit.value("joint7.armature") < 1e-6 and fit.least_squares[fit.names.index("joint7.armature")] < -0.03
    assert fit.notes == ("armature held >= 0 on joint7",), fit.notes
    fitted = fit.spec.compile()
    assert fitted.dof_armature[3] < -0.05
    assert min_inertia_eigenvalue(fitted, rows.q[::10]) > 0
    held = np.flatnonzero(~train)
    clean = record(true_model, 24.0, seed=3, noise_nm=0.0)
    rms = np.sqrt(np.mean((clean.tau[held] - missing * rows.qdd[held] - predict(fitted, rows, held)) ** 2, axis=0))
    assert np.all(rms[:6] < 3 * NOISE_NM), rms


def torque_space_rows(noisy: Rows, tau: np.ndarray) -> torque_fit.TorqueRows:
    """The torque-space fit's rows of a record (every row, the model file's regressor) with torque `tau`."""
    model = mujoco.MjModel.from_xml_path(str(MODEL))
    arm = ArmRegressor(model, JOINT_TERMS, coulomb_band_rad_s=torque_fit.FRICTIONLOSS_BAND_RAD_S)
    w = arm.compute(noisy.q, noisy.qd, noisy.qdd)
    return torque_fit.TorqueRows(w, tau, np.arange(len(tau)), noisy.period_s, 0.0, noisy.q)


def arm_parameters(link_bounds: dict[int, tuple] | None = None) -> list[ParameterSpec]:
    """Every link's mass (bounds from `link_bounds` by link number, else none) and every joint term free."""
    bounds = link_bounds or {}
    parameters = [
        ParameterSpec(f"link{k}_mass", "body_mass", f"link{k}", *bounds.get(k, (None, None))) for k in range(1, 8)
    ]
    return parameters + [
        ParameterSpec(f"joint{k}_{kind}", f"joint_{kind}", f"joint{k}", None, None)
        for k in range(1, 8)
        for kind in ("damping", "frictionloss", "armature", "effort_offset")
    ]


def test_the_torque_space_fit_holds_every_armature_at_or_above_zero():
    """`identify`'s torque-space fit keeps armature a rotor's inertia (>= 0, as the physically consistent peer of
    issue 32 does) where the base-parameter fit may take it below zero: on the same sensor missing inertia, with
    every link's inertials and every joint term free, joint 4's armature (the least squares': near -0.08) is held
    at 0, and the written model's joint-space inertia is positive definite."""
    true_model = truth().compile()
    missing = np.array([0.0, 0.0, 0.0, 0.13, 0.0, 0.0, 0.1])
    noisy = record(true_model, 24.0, seed=3)
    rows = torque_space_rows(noisy, noisy.tau - missing * noisy.qdd)
    fit = torque_fit.fit_torque_space(mujoco.MjSpec.from_file(str(MODEL)), arm_parameters(), rows, intervals=False)
    armature = {j: v["armature"] for j, v in fit.joints.items()}
    assert min(armature.values()) >= 0.0 and armature["joint4"] < 1e-9, armature
    assert min_inertia_eigenvalue(fit.spec.compile(), noisy.q[::10]) > 0


def test_log_cholesky_jacobian_matches_finite_differences():
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.normal(0.0, 0.5, 10)
        step = 1e-6
        numeric = np.stack(
            [(from_log_cholesky(x + step * e) - from_log_cholesky(x - step * e)) / (2 * step) for e in np.eye(10)],
            axis=1,
        )
        assert np.allclose(log_cholesky_jacobian(x), numeric, rtol=1e-6, atol=1e-8)


def test_the_torque_space_fit_keeps_each_mass_within_the_problems_bounds():
    """A mass bound the least squares would leave (link 4 held to 1.5-2x its file mass, the truth 0.9x) sends
    the fit to its physical refit, which keeps it there; nothing ends outside the problem's bounds. The bounds hold
    as the problem gives them, also far from the file's mass (a placeholder's)."""
    true_model = truth().compile()
    noisy = record(true_model, 24.0, seed=3)
    spec = mujoco.MjSpec.from_file(str(MODEL))
    file_mass = spec.copy().compile().body("link4").mass[0]
    rows = torque_space_rows(noisy, noisy.tau)
    parameters = arm_parameters({4: ((1.5 * file_mass,), (2.0 * file_mass,))})
    unbounded = arm_parameters()
    free = torque_fit.fit_torque_space(spec, unbounded, rows, intervals=False)
    assert free.bodies["link4"][0] < 1.2 * file_mass, free.bodies["link4"][0]  # the data want it near the truth
    fit = torque_fit.fit_torque_space(spec, parameters, rows, intervals=False)
    assert 1.5 * file_mass * (1 - 1e-9) <= fit.bodies["link4"][0] <= 2.0 * file_mass * (1 + 1e-9), fit.bodies["link4"]
    assert torque_fit.outside_bounds(fit, parameters) == []
    # the problem's bounds hold as given, also beyond 1e3x a placeholder's file mass (a 1 g tool weighed at 2-5 kg)
    light = mujoco.MjSpec.from_file(str(MODEL))
    light.body("hand").mass = 1e-3
    model = light.compile()
    hand = [model.body("hand").id]
    tool = [ParameterSpec("hand_mass", "body_mass", "hand", (2.0,), (5.0,))]
    np.testing.assert_allclose(torque_fit.mass_bounds(model, hand, tool), [[2.0, 5.0]])
    unbounded = [ParameterSpec("hand_mass", "body_mass", "hand", None, None)]
    np.testing.assert_allclose(torque_fit.mass_bounds(model, hand, unbounded), [[1e-6, 1.0]])
