"""The problem's model, parsed and compiled once per process: a worker identifying many robots of the same
model file (a fleet) compiles it once and hands each run its own copy of the spec and the compiled model.

Keyed by the resolved file, its size and modification time (an edited file is compiled again) and the
bodies the problem identifies masses of (`problem_spec` gives those explicit inertials).
Copies, not the cached objects: a run may edit its spec (parameter modifiers) or its model's data.
"""

from __future__ import annotations

import copy
from collections import OrderedDict

import mujoco

from ...errors import ConfigError
from ...files import model_path
from .file import Problem
from .model import problem_spec

_CACHE: OrderedDict[tuple, tuple[mujoco.MjSpec, mujoco.MjModel]] = OrderedDict()
MAXSIZE = 8
stats = {"compiles": 0, "hits": 0}
"""This process's model compiles and cache hits (for provenance and the fleet benchmark)."""


def compiled_model(problem: Problem) -> tuple[mujoco.MjSpec, mujoco.MjModel]:
    """(spec, model) of the problem's model as `problem_spec` prepares it and compiled, both private copies.
    ConfigError when the model does not compile."""
    path = model_path(problem.model)
    st = path.stat()
    bodies = tuple(sorted({p.target for p in problem.parameters if p.kind.startswith("body_")}))
    key = (str(path), st.st_size, st.st_mtime_ns, bodies)
    cached = _CACHE.get(key)
    if cached is None:
        spec = problem_spec(problem)
        try:
            model = spec.compile()
        except Exception as exc:
            raise ConfigError(f"model does not compile: {exc}", model=problem.model) from exc
        stats["compiles"] += 1
        cached = _CACHE[key] = (spec, model)
        if len(_CACHE) > MAXSIZE:
            _CACHE.popitem(last=False)
    else:
        stats["hits"] += 1
        _CACHE.move_to_end(key)
    spec, model = cached
    return spec.copy(), copy.copy(model)
