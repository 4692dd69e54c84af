"""Identified values in the forms robot software loads: a URDF (when the model came from one) with the
identified `<inertial>` and `<dynamics damping friction>`, and a short YAML snippet of the values."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
from mujoco import sysid

from ...errors import ConfigError, ModelError
from ...sim import joint_motor
from ..problem.arm_models import with_full_inertia_text
from ..problem.file import ParameterSpec
from ..problem.parameters import SIGNAL_KINDS
from ..problem.spec_values import full_precision, has_full_inertia, inertia_tensor, joint_value

_URDF_JOINT_FIELDS = {"joint_damping": "damping", "joint_frictionloss": "friction"}


def identified_urdf(urdf: str | Path, spec: mujoco.MjSpec, specs: Sequence[ParameterSpec]) -> tuple[str, list[str]]:
    """The URDF file `urdf` with the identified values of `spec` written in; notes for values URDF cannot hold.

    Links and joints keep their names through MuJoCo's URDF import, and a body's frame is its link frame:
    `<inertial><origin xyz>` is the centre of mass, `rpy` 0 and the full tensor in the link frame.
    """
    try:
        root = ET.parse(str(urdf)).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ModelError(f"cannot read the URDF to write results into: {exc}", model=str(urdf)) from exc
    notes: list[str] = []
    for p in specs:
        if p.kind.startswith("body_"):
            link = root.find(f"link[@name='{p.target}']")
            if link is None:
                notes.append(f"{p.name}: body {p.target} is not a URDF link; left out of the URDF")
                continue
            body = spec.body(p.target)
            inertial = link.find("inertial")
            if inertial is None:
                inertial = ET.SubElement(link, "inertial")
            for tag in ("origin", "mass", "inertia"):
                if inertial.find(tag) is None:
                    ET.SubElement(inertial, tag)
            inertial.find("origin").attrib = {"xyz": full_precision(body.ipos), "rpy": "0 0 0"}
            inertial.find("mass").attrib = {"value": repr(float(body.mass))}
            t = inertia_tensor(body)
            inertial.find("inertia").attrib = {
                f"i{'xyz'[a]}{'xyz'[b]}": repr(float(t[a, b]))
                for a, b in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))
            }
        elif p.kind in _URDF_JOINT_FIELDS:
            joint = root.find(f"joint[@name='{p.target}']")
            if joint is None:
                notes.append(f"{p.name}: joint {p.target} is not in the URDF; left out")
                continue
            dynamics = joint.find("dynamics")
            if dynamics is None:
                dynamics = ET.SubElement(joint, "dynamics")
            value = joint_value(spec, p)
            dynamics.set(_URDF_JOINT_FIELDS[p.kind], repr(value))
        elif not p.frozen:
            notes.append(f"{p.name}: URDF has no field for {p.kind}; see the MJCF and YAML results")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n", notes


def identified_values(specs: Sequence[ParameterSpec], values: dict[str, tuple[float, ...]]) -> dict[str, Any]:
    """The identified values grouped by what they belong to, for pasting into a robot's configuration:
    `bodies: {link: {mass, com, inertia}}`, `joints: {joint: {damping, frictionloss, armature}}`,
    `actuators: {motor: {gain}}`, `signals: {pattern: {delay, gain, bias}}`."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for p in specs:
        v = values[p.name]
        if p.kind == "body_mass":
            out.setdefault("bodies", {}).setdefault(p.target, {})["mass"] = v[0]
        elif p.kind == "body_mass_com":
            out.setdefault("bodies", {}).setdefault(p.target, {}).update(mass=v[0], com=list(v[1:4]))
        elif p.kind == "body_inertia":  # the tensor about the centre of mass: ixx iyy izz ixy ixz iyz
            out.setdefault("bodies", {}).setdefault(p.target, {}).update(
                mass=v[0], com=list(v[1:4]), inertia=list(v[4:10])
            )
        elif p.kind.startswith("joint_"):
            out.setdefault("joints", {}).setdefault(p.target, {})[p.kind.split("_", 1)[1]] = v[0]
        elif p.kind == "actuator_gain":
            out.setdefault("actuators", {}).setdefault(p.target, {})["gain"] = v[0]
        else:
            out.setdefault("signals", {}).setdefault(p.target, {})[p.kind.split("_", 1)[1]] = v[0]
    return out


def _find(root: ET.Element, tag: str, name: str) -> ET.Element | None:
    for el in root.iter(tag):
        if el.get("name") == name:
            return el
    return None


def identified_xml(spec: mujoco.MjSpec, specs: Sequence[ParameterSpec], params: sysid.ParameterDict) -> str:
    """The MJCF of `spec` (identified values applied) with every identified number at full precision.

    `MjSpec.to_xml` rounds to 6 significant digits; the identified attributes are rewritten with repr(), and
    every full inertia tensor is written as the tensor (to_xml writes its rounded principal form).
    """
    root = ET.fromstring(with_full_inertia_text(spec, spec.to_xml()))
    for p in specs:
        if p.kind in SIGNAL_KINDS:
            continue
        if p.kind.startswith("body_"):
            body, el = spec.body(p.target), _find(root, "body", p.target)
            if el is None:
                raise ConfigError("identified body missing from the written MJCF", body=p.target)
            inertial = el.find("inertial")
            if inertial is None:
                inertial = ET.SubElement(el, "inertial")
                el.remove(inertial)
                el.insert(0, inertial)
            inertial.set("mass", repr(float(body.mass)))
            inertial.set("pos", full_precision(body.ipos))
            if not has_full_inertia(body):  # a full tensor is written already (with_full_inertia_text)
                inertial.set("diaginertia", full_precision(body.inertia))
                if not np.any(np.isnan(body.iquat)):
                    inertial.set("quat", full_precision(body.iquat))
        elif p.kind == "joint_effort_offset":
            motor = joint_motor(spec, p.target)
            actuators = root.find("actuator")
            el = None if actuators is None else next((a for a in actuators if a.get("name") == motor.name), None)
            if el is None:
                raise ConfigError("identified joint motor missing from the written MJCF", joint=p.target)
            el.tag = "general"  # a <motor> cannot hold a bias; <general> with the motor's defaults can
            el.set("biastype", "affine")
            el.set("biasprm", full_precision(motor.biasprm[:3]))
        elif p.kind.startswith("joint_"):
            el = _find(root, "joint", p.target)
            if el is None:
                raise ConfigError("identified joint missing from the written MJCF", joint=p.target)
            el.set(p.kind.split("_", 1)[1], repr(joint_value(spec, p)))
        elif p.kind == "actuator_gain":
            actuators = root.find("actuator")
            el = None if actuators is None else next((a for a in actuators if a.get("name") == p.target), None)
            if el is None:
                raise ConfigError("identified actuator missing from the written MJCF", actuator=p.target)
            el.set("gear", full_precision(spec.actuator(p.target).gear))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"
