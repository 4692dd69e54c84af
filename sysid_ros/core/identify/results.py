"""What an identification run returns: one `ParameterResult` per parameter inside an `IdentificationResult`,
and `results_document`, the content of `identified.yaml` (the report, the node and the fleet read it); the
`RunLog` the stages write notes, warnings, metrics and timings into, and the verdict those warnings give."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np
from mujoco import sysid

from ..report import Trace
from .problem.file import Problem

Progress = Callable[[str, float, str], None]
"""progress(stage, fraction 0..1 of the whole run, message)."""
OK, SUSPECT = "ok", "suspect"


@dataclass
class RunLog:
    """What a run gathers on its way: notes, warnings (each makes the verdict suspect), metrics and timings."""

    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)  # the warm start's and the prior's, among the fit's
    timings: dict[str, float] = field(default_factory=dict)
    progress: Progress | None = None

    def report(self, stage: str, fraction: float, message: str) -> None:
        if self.progress is not None:
            self.progress(stage, fraction, message)


def verdict(warnings: Sequence[str]) -> str:
    """`suspect` when there is any warning, else `ok`."""
    return SUSPECT if warnings else OK


@dataclass(frozen=True)
class ParameterResult:
    """One identified parameter: value, 95 % half-width (inf when not identifiable), start and bounds."""

    name: str
    kind: str
    target: str
    value: tuple[float, ...]
    half_width_95: tuple[float, ...]
    start: tuple[float, ...]
    min_value: tuple[float, ...]
    max_value: tuple[float, ...]
    frozen: bool
    identifiable: bool
    warm_start: tuple[float, ...] | None = None
    coordinates: dict[str, tuple] | None = None
    """`body_inertia`: the optimiser's log-Cholesky coordinates (`names`, `value`, `half_width_95`, `min`,
    `max`); `value` etc. above are then mass, com and tensor (`inertia.PHYSICAL`), half-widths propagated."""


@dataclass(eq=False, kw_only=True)
class IdentificationResult:
    """What `identify` returns: the results per parameter, metrics, the identified model and the library's state."""

    problem: Problem
    parameters: tuple[ParameterResult, ...]
    metrics: dict[str, Any]
    identified_spec: mujoco.MjSpec
    initial_params: sysid.ParameterDict
    opt_params: sysid.ParameterDict
    opt_result: Any
    residual_fn: Callable[..., Any]
    model_sequences: sysid.ModelSequences
    covariance: np.ndarray
    traces: tuple[Trace, ...]
    objective: tuple[float, ...]
    notes: tuple[str, ...] = ()
    timings_s: dict[str, float] = field(default_factory=dict)
    verdict: str = "ok"  # "ok" | "suspect": suspect when there is any warning
    warnings: tuple[str, ...] = ()  # one line each, naming the signal/parameter/file and the number that tripped
    friction: dict[str, Any] = field(default_factory=dict)  # per joint: the regression's friction and offset
    torque_space: dict[str, Any] = field(default_factory=dict)  # the torque-space fit's values; `taken`: the MJCF's
    window_fit_parameters: tuple[ParameterResult, ...] = ()  # when `parameters` are the torque-space fit's

    def value(self, name: str) -> float:
        """The first component of a parameter's identified value."""
        return next(p.value[0] for p in self.parameters if p.name == name)


def parameters_document(parameters: Sequence[ParameterResult]) -> dict[str, Any]:
    """Each parameter's entry in `identified.yaml`, by name."""

    def scalar(v: tuple[float, ...]) -> float | list[float]:
        return v[0] if len(v) == 1 else list(v)

    return {
        p.name: {
            "kind": p.kind,
            "target": p.target,
            "value": scalar(p.value),
            "half_width_95": scalar(tuple(x if math.isfinite(x) else float("inf") for x in p.half_width_95)),
            "start": scalar(p.start),
            "min": scalar(p.min_value),
            "max": scalar(p.max_value),
            "frozen": p.frozen,
            "identifiable": p.identifiable,
            **({"warm_start": scalar(p.warm_start)} if p.warm_start else {}),
            **({"coordinates": {key: list(v) for key, v in p.coordinates.items()}} if p.coordinates else {}),
        }
        for p in parameters
    }


def results_document(result: IdentificationResult) -> dict[str, Any]:
    """The content of `identified.yaml`: `parameters` describe the model the MJCF carries (the window fit's
    are under `window_fit_parameters` when it carries the torque-space fit)."""
    return {
        "verdict": result.verdict,
        "warnings": list(result.warnings),
        "model": result.problem.model,
        "parameters": parameters_document(result.parameters),
        **(
            {"window_fit_parameters": parameters_document(result.window_fit_parameters)}
            if result.window_fit_parameters
            else {}
        ),
        "metrics": result.metrics,
        **({"friction": result.friction} if result.friction else {}),
        **({"torque_space": result.torque_space} if result.torque_space else {}),
        "notes": list(result.notes),
        "timings_s": result.timings_s,
    }
