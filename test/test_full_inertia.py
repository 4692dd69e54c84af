"""Bodies given by a full inertia tensor (`fullinertia`, issue 19): `body_mass` scales the whole tensor,
`body_mass_com` moves the centre of mass and keeps the tensor about it, and the identified MJCF and URDF are
written with the right tensors and load back (compiled `body_inertia` / `body_iquat` compared).
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from support.synthetic import EPOCH_NS, multisine, record_effort
from sysid_ros.core.bags import save_npz
from sysid_ros.core.identify import (
    ParameterSpec,
    build_parameters,
    identified_urdf,
    identified_xml,
    identify,
    inertia_tensor,
    problem_from_dict,
    write_results,
)
from sysid_ros.core.identify.problem import inertia
from sysid_ros.core.sim import FeedbackNoise, SimRobot

FULL = "0.05 0.04 0.03 0.004 -0.003 0.002"  # ixx iyy izz ixy ixz iyz: principal axes tilted off the body's
MJCF = f"""<mujoco model="tilted">
  <option timestep="0.002"/>
  <worldbody>
    <body name="link" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <inertial mass="2.0" pos="0.1 0.02 -0.3" fullinertia="{FULL}"/>
      <geom type="capsule" fromto="0 0 0 0.1 0.02 -0.3" size="0.02" contype="0" conaffinity="0" mass="0"/>
      <body name="tip" pos="0.1 0 -0.4">
        <joint name="tip_hinge" type="hinge" axis="1 0 0"/>
        <inertial mass="0.5" pos="0 0.01 -0.1" fullinertia="0.004 0.005 0.002 -0.0005 0.0003 0.0004"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor name="hinge_motor" joint="hinge"/><motor name="tip_motor" joint="tip_hinge"/></actuator>
</mujoco>
"""
URDF = """<robot name="tilted">
  <link name="base"/>
  <link name="link">
    <inertial><origin xyz="0.1 0.02 -0.3" rpy="0 0 0"/><mass value="2.0"/>
      <inertia ixx="0.05" iyy="0.04" izz="0.03" ixy="0.004" ixz="-0.003" iyz="0.002"/></inertial>
  </link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="link"/><origin xyz="0 0 1"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="50" velocity="10"/></joint>
</robot>
"""
MASS, COM = 2.6, (0.12, 0.0, -0.28)


def _specs():
    return [
        ParameterSpec("link_mass", "body_mass", "link", (0.5,), (5.0,)),
        ParameterSpec("tip_mass_com", "body_mass_com", "tip", (0.1, -1, -1, -1), (2.0, 1, 1, 1)),
    ]


def _applied(spec: mujoco.MjSpec) -> mujoco.MjModel:
    params = build_parameters(spec, _specs(), {"link_mass": (2.0,), "tip_mass_com": (0.5, 0, 0.01, -0.1)})
    params["link_mass"].value[:] = MASS
    params["tip_mass_com"].value[:] = (0.8, *COM)
    for name in ("link_mass", "tip_mass_com"):
        params[name].modifier(spec, params[name])
    return spec.compile()


def _assert_same_inertia(a: mujoco.MjModel, b: mujoco.MjModel, body: str, rel: float = 1e-12) -> None:
    i, j = a.body(body).id, b.body(body).id
    assert b.body_mass[j] == pytest.approx(a.body_mass[i], rel=rel)
    np.testing.assert_allclose(b.body_ipos[j], a.body_ipos[i], rtol=rel, atol=1e-15)
    np.testing.assert_allclose(b.body_inertia[j], a.body_inertia[i], rtol=rel)
    dot = abs(float(np.dot(b.body_iquat[j], a.body_iquat[i])))  # q and -q are the same rotation
    assert dot == pytest.approx(1.0, abs=1e-9)


def test_mass_scales_the_whole_tensor_and_com_keeps_it():
    nominal = mujoco.MjSpec.from_string(MJCF).compile()
    model = _applied(mujoco.MjSpec.from_string(MJCF))
    link, tip = nominal.body("link").id, nominal.body("tip").id
    np.testing.assert_allclose(model.body_inertia[link], nominal.body_inertia[link] * MASS / 2.0, rtol=1e-12)
    np.testing.assert_allclose(model.body_iquat[link], nominal.body_iquat[link], atol=1e-12)
    np.testing.assert_allclose(model.body_inertia[tip], nominal.body_inertia[tip] * 0.8 / 0.5, rtol=1e-12)
    np.testing.assert_allclose(model.body_ipos[tip], COM, atol=1e-15)
    np.testing.assert_allclose(model.body_iquat[tip], nominal.body_iquat[tip], atol=1e-12)


def test_identified_mjcf_writes_the_tensors_and_loads_back():
    spec = mujoco.MjSpec.from_string(MJCF)
    model = _applied(spec)
    params = build_parameters(spec, [], {})
    text = identified_xml(spec, _specs(), params)
    assert "fullinertia" in text
    back = mujoco.MjSpec.from_string(text).compile()
    for body in ("link", "tip"):
        _assert_same_inertia(model, back, body)


def test_identified_mjcf_keeps_the_tensors_of_bodies_not_identified():
    """A body nobody identified keeps its `fullinertia` as written, not the library's rounded principal form."""
    spec = mujoco.MjSpec.from_string(
        MJCF.replace('fullinertia="0.004 0.005 0.002', 'fullinertia="0.00412345678901 0.005 0.002')
    )
    nominal = spec.compile()
    text = identified_xml(spec, _specs()[:1], build_parameters(spec, [], {}))
    assert 'fullinertia="0.00412345678901 0.005 0.002 -0.0005 0.0003 0.0004"' in text
    _assert_same_inertia(nominal, mujoco.MjSpec.from_string(text).compile(), "tip")


def test_identified_urdf_writes_the_tensor_and_loads_back(tmp_path):
    source = tmp_path / "tilted.urdf"
    source.write_text(URDF)
    spec = mujoco.MjSpec.from_file(str(source))
    specs = [ParameterSpec("link_mass", "body_mass", "link", (0.5,), (5.0,))]
    params = build_parameters(spec, specs, {"link_mass": (2.0,)})
    params["link_mass"].value[:] = MASS
    params["link_mass"].modifier(spec, params["link_mass"])
    np.testing.assert_allclose(
        inertia_tensor(spec.body("link")),
        np.array([[0.05, 0.004, -0.003], [0.004, 0.04, 0.002], [-0.003, 0.002, 0.03]]) * MASS / 2.0,
        rtol=1e-12,
    )
    text, notes = identified_urdf(source, spec, specs)
    assert not notes
    written = tmp_path / "identified.urdf"
    written.write_text(text)
    _assert_same_inertia(spec.compile(), mujoco.MjSpec.from_file(str(written)).compile(), "link")


def test_identify_recovers_the_mass_of_a_full_inertia_body(tmp_path):
    """Hidden truth 2.6 kg on the tilted link (the model says 2.0); the simulation scales its principal
    inertia with the mass. Noise-free: the mass comes back to 1e-4, and the identified MJCF written by
    `write_results` loads with the nominal tensor scaled by the identified mass (same principal axes)."""
    model = tmp_path / "tilted.xml"
    model.write_text(MJCF)
    robot = SimRobot(
        str(model), joints=["hinge"], physics={"link.mass": MASS}, noise=FeedbackNoise(), start_time_ns=EPOCH_NS
    )
    t = np.arange(0, 4.0 + 1e-9, 0.002)
    u = multisine(t, [0.3, 0.9, 1.7, 2.6], 12.0, seed=3)
    samples, commands = record_effort(robot, lambda ts: [u[int(round(ts / 0.002))]], 4.0)
    save_npz(tmp_path / "train.npz", samples, {"/effort_controller/commands": commands})
    result = identify(
        problem_from_dict(
            {
                "model": str(model),
                "joints": ["hinge"],
                "training": [str(tmp_path / "train.npz")],
                "initial_state": "measured",
                "warm_start": False,
                "noise": {"position_rad": 5e-4},
                "parameters": [
                    {"name": "link_mass", "kind": "body_mass", "body": "link", "min": 0.5, "max": 5.0, "start": 2.0}
                ],
            }
        )
    )
    mass = result.parameters[0].value[0]
    assert mass == pytest.approx(MASS, rel=1e-4)
    paths = write_results(result, tmp_path / "out")
    back = mujoco.MjSpec.from_file(str(paths["mjcf"])).compile()
    nominal = mujoco.MjSpec.from_string(MJCF).compile()
    b, n = back.body("link").id, nominal.body("link").id
    np.testing.assert_allclose(back.body_inertia[b], nominal.body_inertia[n] * mass / 2.0, rtol=1e-9)
    assert abs(float(np.dot(back.body_iquat[b], nominal.body_iquat[n]))) == pytest.approx(1.0, abs=1e-9)


def test_identified_urdf_writes_the_body_inertia_tensor(tmp_path):
    source = tmp_path / "tilted.urdf"
    source.write_text(URDF)
    spec = mujoco.MjSpec.from_file(str(source))
    start = (2.0, 0.1, 0.02, -0.3, 0.05, 0.04, 0.03, 0.004, -0.003, 0.002)
    specs = [ParameterSpec("link_inertia", "body_inertia", "link", (0.5,), (5.0,))]
    params = build_parameters(spec, specs, {"link_inertia": start})
    new = np.array([2.4, 0.12, 0.0, -0.28, 0.06, 0.045, 0.028, 0.003, -0.004, 0.001])
    params["link_inertia"].value[:] = inertia.from_physical(new)
    params["link_inertia"].modifier(spec, params["link_inertia"])
    np.testing.assert_allclose(inertia.tensor_entries(inertia_tensor(spec.body("link"))), new[4:], rtol=1e-12)
    text, notes = identified_urdf(source, spec, specs)
    assert not notes
    written = tmp_path / "identified.urdf"
    written.write_text(text)
    back = mujoco.MjSpec.from_file(str(written)).compile()
    link = back.body("link").id
    assert back.body_mass[link] == pytest.approx(2.4, rel=1e-12)
    np.testing.assert_allclose(back.body_ipos[link], new[1:4], atol=1e-15)
    np.testing.assert_allclose(
        np.sort(back.body_inertia[link]), np.linalg.eigvalsh(inertia.tensor_from_entries(new[4:])), rtol=1e-10
    )
