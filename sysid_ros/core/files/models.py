"""Robot models read from their files: an embedded model name or an MJCF/URDF path -> a MuJoCo `MjSpec`."""

from __future__ import annotations

from pathlib import Path

import mujoco

from ..errors import ModelError
from .paths import model_path


def load_spec(model: str | Path) -> mujoco.MjSpec:
    """An MjSpec from an embedded model name or an MJCF/URDF path, with a clear error when it fails."""
    path = model_path(str(model))
    try:
        return mujoco.MjSpec.from_file(str(path))
    except Exception as exc:
        raise ModelError(f"cannot load model: {exc}", model=str(path)) from exc
