"""A URDF arm as an identification model: inertials only, no meshes, no contacts, a payload, torque motors.

Traps handled (measured, see docs/facts.md "Models"): compiling a URDF spec fuses jointless
bodies (the base link, a payload) into their parents, so `fusestatic` is turned off; a URDF inertia is a
`fullinertia`, which a mass change does not scale, so every body gets MuJoCo's principal form (mass, ipos,
iquat, diagonal inertia) and scales like SimRobot's hidden physics; `add_body(pos=...)` without `ipos`
doubles the centre-of-mass offset, so the payload's is explicit; a base mesh fused into the world rubs
link 1, so contacts are disabled (and meshes dropped: the file then loads from anywhere).
"""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from ...errors import ConfigError, ModelError
from ...linear import ArmRegressor, structural_base_parameters
from .inertia import tensor_entries
from .spec_values import full_precision, has_full_inertia, inertia_tensor

IIWA_URDF = "kuka_iiwa/model.urdf"
IIWA_JOINTS = tuple(f"lbr_iiwa_joint_{i}" for i in range(1, 8))
IIWA_FLANGE = "lbr_iiwa_link_7"
IIWA_TORQUE_LIMITS_NM = (320.0, 320.0, 176.0, 176.0, 110.0, 40.0, 40.0)  # KUKA LBR iiwa 14 data sheet


@dataclass(frozen=True)
class Payload:
    """A mass rigidly attached to `parent` (the flange), centre at `com_m` in the parent's frame."""

    mass_kg: float
    com_m: tuple[float, float, float] = (0.0, 0.0, 0.08)
    radius_m: float = 0.03  # a solid sphere: inertia 2/5 m r^2 about each axis
    parent: str = IIWA_FLANGE
    name: str = "payload"

    def __post_init__(self) -> None:
        if not (np.isfinite(self.mass_kg) and self.mass_kg > 0 and self.radius_m > 0):
            raise ConfigError(
                f"payload mass and radius must be > 0, got {self.mass_kg} kg, {self.radius_m} m", body=self.name
            )


def pybullet_data_file(relative: str = IIWA_URDF) -> Path:
    """A file shipped in pybullet's `pybullet_data` (a test-only dependency), e.g. the KUKA iiwa URDF."""
    found = importlib.util.find_spec("pybullet_data")
    if found is None or not found.submodule_search_locations:
        raise ModelError("pybullet_data is not installed (pip install pybullet==3.2.7)", model=relative)
    path = Path(list(found.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise ModelError("not in pybullet_data", model=str(path))
    return path


def explicit_inertials(spec: mujoco.MjSpec, bodies: Sequence[str] | None = None) -> None:
    """Rewrite bodies' inertials (default: all) as mass, ipos, iquat and diagonal inertia taken from the
    compiled model (MuJoCo's principal form): a body whose mass came from its geoms, or a URDF `fullinertia`,
    then has an explicit inertial that a mass change scales. Fused bodies are refused by the caller."""
    model = spec.copy().compile()
    if spec.compiler.inertiafromgeom == mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_TRUE:
        bodies = None  # geoms override every inertial: make them all explicit and stop that
        spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_AUTO
    for body in spec.bodies[1:]:
        if bodies is not None and body.name not in bodies:
            continue
        b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body.name)
        if b < 0:
            continue  # fused into its parent when compiled
        body.explicitinertial = True
        body.mass = float(model.body_mass[b])
        body.ipos = np.array(model.body_ipos[b])
        body.iquat = np.array(model.body_iquat[b])
        body.inertia = np.array(model.body_inertia[b])
        body.fullinertia = np.array([np.nan, 0, 0, 0, 0, 0])


def prepare_urdf_spec(spec: mujoco.MjSpec, torque_limits_nm: Sequence[float] | None = None, source: str = "") -> list:
    """A URDF-loaded spec made ready to identify (see the module docstring): no fusing, contacts off,
    explicit principal inertials, no geoms or meshes, and a torque motor `<joint>_motor` on every hinge
    joint (its range: `torque_limits_nm`, else the URDF's effort limit). Returns the hinge joints."""
    spec.compiler.fusestatic = False
    spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    model = spec.copy().compile()
    explicit_inertials(spec)
    for geom in list(spec.geoms):
        spec.delete(geom)
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    joints = [j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_HINGE]
    limits = None if torque_limits_nm is None else np.asarray(torque_limits_nm, dtype=float)
    if limits is not None and limits.shape != (len(joints),):
        raise ConfigError(f"{len(limits)} torque limits for {len(joints)} joints", model=source)
    for k, joint in enumerate(joints):
        jid = model.joint(joint.name).id
        urdf_limit = float(model.jnt_actfrcrange[jid][1]) if model.jnt_actfrclimited[jid] else 0.0
        joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_FALSE  # the motor's ctrlrange is the one limit
        if spec.actuator(f"{joint.name}_motor") is not None:
            continue
        motor = spec.add_actuator(name=f"{joint.name}_motor", target=joint.name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        limit = limits[k] if limits is not None else urdf_limit
        if limit > 0:
            motor.ctrllimited = True
            motor.ctrlrange = [-limit, limit]
    return joints


def arm_spec_from_urdf(
    urdf: str | Path,
    *,
    payload: Payload | None = None,
    armature_kg_m2: float | Sequence[float] = 0.0,
    damping_nm_s_rad: float | Sequence[float] | None = None,
    torque_limits_nm: Sequence[float] | None = None,
    timestep_s: float = 0.002,
) -> mujoco.MjSpec:
    """The URDF arm as an MjSpec ready for SimRobot and identification (see the module docstring).

    Hinge joints in URDF order get `armature_kg_m2` (reflected rotor inertia, known), optionally new
    `damping_nm_s_rad`, and a torque motor `<joint>_motor` limited to `torque_limits_nm`.
    """
    try:
        spec = mujoco.MjSpec.from_file(str(urdf))
    except Exception as exc:
        raise ModelError(f"cannot load the URDF: {exc}", model=str(urdf)) from exc
    spec.option.timestep = timestep_s
    joints = prepare_urdf_spec(spec, torque_limits_nm, str(urdf))
    n = len(joints)
    armature = np.broadcast_to(np.asarray(armature_kg_m2, dtype=float), (n,))
    damping = None if damping_nm_s_rad is None else np.broadcast_to(np.asarray(damping_nm_s_rad, dtype=float), (n,))
    for k, joint in enumerate(joints):
        joint.armature = float(armature[k])
        if damping is not None:
            joint.damping[0] = float(damping[k])
    if payload is not None:
        parent = spec.body(payload.parent)
        if parent is None:
            raise ModelError("payload parent body not in the model", body=payload.parent, model=str(urdf))
        inertia = 0.4 * payload.mass_kg * payload.radius_m**2
        parent.add_body(
            name=payload.name,
            pos=[0, 0, 0],
            ipos=list(payload.com_m),
            mass=payload.mass_kg,
            inertia=[inertia] * 3,
            explicitinertial=True,
        )
    try:
        spec.copy().compile()
    except Exception as exc:
        raise ModelError(f"the identification model does not compile: {exc}", model=str(urdf)) from exc
    return spec


def write_mjcf(spec: mujoco.MjSpec, path: str | Path) -> Path:
    """Write the spec as an MJCF file (no meshes: it loads from any folder) and check it compiles back."""
    path = Path(path)
    path.write_text(with_full_inertia_text(spec, spec.to_xml()))
    try:
        mujoco.MjModel.from_xml_path(str(path))
    except Exception as exc:
        raise ModelError(f"the written MJCF does not load: {exc}", model=str(path)) from exc
    return path


def as_full_inertia(spec: mujoco.MjSpec) -> None:
    """Every body with mass gets its inertia as a full tensor about its centre of mass (`fullinertia`), as a
    URDF or a CAD export gives it, instead of principal moments and `iquat`."""
    for body in spec.bodies[1:]:
        if body.mass > 0:
            body.fullinertia = tensor_entries(inertia_tensor(body))
            body.iquat = [1.0, 0.0, 0.0, 0.0]
            body.inertia = [0.0, 0.0, 0.0]


def with_full_inertia_text(spec: mujoco.MjSpec, xml: str) -> str:
    """`to_xml` writes a `fullinertia` body in its principal form, rounded: write the tensor itself."""
    full = {b.name: b for b in spec.bodies[1:] if has_full_inertia(b)}
    if not full:
        return xml
    root = ET.fromstring(xml)
    for el in root.iter("body"):
        inertial = el.find("inertial")
        if el.get("name") in full and inertial is not None:
            for attribute in ("diaginertia", "quat", "axisangle", "xyaxes", "zaxis", "euler"):
                inertial.attrib.pop(attribute, None)
            inertial.set("fullinertia", full_precision(full[el.get("name")].fullinertia))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def iiwa_mjcf(
    path: str | Path,
    *,
    payload: Payload | None = None,
    armature_kg_m2: float | Sequence[float] = 0.05,
    damping_nm_s_rad: float | Sequence[float] | None = None,
    full_inertia: bool = False,
) -> Path:
    """pybullet's KUKA LBR iiwa with its data-sheet torque limits, written to `path` as MJCF (`full_inertia`:
    with every body's inertia written as a `fullinertia` tensor)."""
    spec = arm_spec_from_urdf(
        pybullet_data_file(IIWA_URDF),
        payload=payload,
        armature_kg_m2=armature_kg_m2,
        damping_nm_s_rad=damping_nm_s_rad,
        torque_limits_nm=IIWA_TORQUE_LIMITS_NM,
    )
    if full_inertia:
        as_full_inertia(spec)
    return write_mjcf(spec, path)


def mass_sum_groups(
    model: mujoco.MjModel, bodies: Sequence[str], samples: int = 60, seed: int = 0
) -> tuple[tuple[str, ...], ...]:
    """Bodies whose masses joint data cannot tell apart once their centres of mass and inertias are unknown.

    From the structural base parameters of the whole-arm regressor (random states in the joint ranges):
    masses with identical coefficients in every base parameter (e.g. two bodies fixed to the last link,
    their centres on its axis) enter the dynamics only as their sum. A mass-only fit still "splits" them,
    but only through the centres of mass the model assumes. Groups of one are identifiable apart.
    """
    arm = ArmRegressor(model, joint_terms=())
    base = structural_base_parameters(arm, samples=samples, seed=seed)
    index = {name: i for i, name in enumerate(base.names)}
    independent, dependent = list(base.independent), list(base.dependent)
    vectors = {}
    for body in bodies:
        i = index.get(f"{body}.m")
        if i is None:
            raise ModelError("no such moving body in the model", body=body)
        if i in independent:
            v = np.zeros(base.rank)
            v[independent.index(i)] = 1.0
        else:
            v = base.beta[:, dependent.index(i)]
        vectors[body] = v
    groups: list[list[str]] = []
    for body, v in vectors.items():
        scale = max(float(np.abs(v).max(initial=0.0)), 1e-12)
        for group in groups:
            if np.allclose(vectors[group[0]], v, rtol=0.0, atol=1e-6 * scale):
                group.append(body)
                break
        else:
            groups.append([body])
    return tuple(tuple(g) for g in groups)
