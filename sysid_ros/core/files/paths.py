"""Where the package's shared files (config, embedded models, launch files) live."""

from __future__ import annotations

from pathlib import Path

from ..errors import ModelError

_SOURCE_ROOT = Path(__file__).resolve().parents[3]


def share_dir() -> Path:
    """The package's share folder: the source tree when run from it, else the ament install."""
    if (_SOURCE_ROOT / "package.xml").is_file() and (_SOURCE_ROOT / "config").is_dir():
        return _SOURCE_ROOT
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("sysid_ros"))
    except Exception as exc:  # ament index missing or package not installed in it
        raise ModelError("cannot find the sysid_ros share folder; set AMENT_PREFIX_PATH") from exc


def config_dir() -> Path:
    return share_dir() / "config"


def model_path(name_or_path: str) -> Path:
    """Resolve an embedded model name (`pendulum`, `arm3`) or a path to an MJCF/URDF file."""
    candidate = Path(name_or_path).expanduser()
    if candidate.suffix in (".xml", ".urdf", ".mjcf") and candidate.is_file():
        return candidate.resolve()
    embedded = config_dir() / "models" / f"{name_or_path}.xml"
    if embedded.is_file():
        return embedded
    raise ModelError("model not found: neither an embedded model name nor an existing file", model=name_or_path)
