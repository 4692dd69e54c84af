"""Identified values in the forms robot software loads: a URDF (when the model came from one) with the
identified `<inertial>` and `<dynamics damping friction>`, and a short YAML snippet of the values."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mujoco

from ..errors import ModelError
from .parameters import full_precision, inertia_tensor, joint_value
from .problem import ParameterSpec

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
            inertial.find("inertia").attrib = {f"i{'xyz'[a]}{'xyz'[b]}": repr(float(t[a, b]))
                                               for a, b in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))}
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
            out.setdefault("bodies", {}).setdefault(p.target, {}).update(mass=v[0], com=list(v[1:4]),
                                                                          inertia=list(v[4:10]))
        elif p.kind.startswith("joint_"):
            out.setdefault("joints", {}).setdefault(p.target, {})[p.kind.split("_", 1)[1]] = v[0]
        elif p.kind == "actuator_gain":
            out.setdefault("actuators", {}).setdefault(p.target, {})["gain"] = v[0]
        else:
            out.setdefault("signals", {}).setdefault(p.target, {})[p.kind.split("_", 1)[1]] = v[0]
    return out
