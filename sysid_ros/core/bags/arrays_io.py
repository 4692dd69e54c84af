"""Arrays without a bag: save / load `JointSamples` and `JointCommands` as `.npz`, export them as CSV.

The `.npz` layout (no pickles): `feedback_joint_names`, `feedback_time_ns` and `feedback_<field>` for
each measured field; `command<k>_{name,joint_names,time_ns,values,interface}` for each command stream;
`metadata_yaml` for recording metadata. CSV rows are `time_ns,<joint>.<field>,...`, times as integers.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import yaml

from ..errors import DataError
from ..files import npz_headers
from ..signals import JointCommands, JointSamples
from .write import metadata_yaml

FIELDS = ("position", "velocity", "effort")


def save_npz(
    path: str | Path,
    samples: JointSamples | None = None,
    commands: dict[str, JointCommands] | None = None,
    metadata: dict | None = None,
) -> Path:
    """Write feedback, named command streams and metadata into one `.npz`."""
    arrays: dict[str, np.ndarray] = {}
    if samples is not None:
        arrays["feedback_joint_names"] = np.array(samples.joint_names, dtype=str)
        arrays["feedback_time_ns"] = samples.time_ns
        for f in FIELDS:
            if getattr(samples, f) is not None:
                arrays[f"feedback_{f}"] = getattr(samples, f)
    for k, (name, cmd) in enumerate((commands or {}).items()):
        arrays[f"command{k}_name"] = np.array(name)
        arrays[f"command{k}_joint_names"] = np.array(cmd.joint_names, dtype=str)
        arrays[f"command{k}_time_ns"] = cmd.time_ns
        arrays[f"command{k}_values"] = cmd.values
        arrays[f"command{k}_interface"] = np.array(cmd.interface)
    if metadata is not None:
        arrays["metadata_yaml"] = np.array(metadata_yaml(metadata))
    path = Path(path)
    np.savez_compressed(path, **arrays)
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def load_npz(path: str | Path) -> tuple[JointSamples | None, dict[str, JointCommands], dict | None]:
    """Read what `save_npz` wrote (or a user's arrays in the same layout); checks shapes and time types."""
    path = Path(path)
    npz_headers(path)  # sizes declared by the headers checked before any array is allocated
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"cannot read npz: {exc}", file=str(path)) from None
    if not hasattr(data, "files"):
        raise DataError("not an .npz archive (a single .npy array?)", file=str(path))
    try:
        with data:
            return _from_npz(data, path)
    except ValueError as exc:  # object arrays (pickles) are refused, never loaded
        if "allow_pickle" in str(exc):
            raise DataError(
                "the npz holds object arrays (pickled Python objects), which are never loaded: save "
                "plain numeric and string arrays",
                file=str(path),
            ) from None
        raise DataError(f"cannot read npz: {exc}", file=str(path)) from None
    except (OSError, EOFError, KeyError, TypeError, zipfile.BadZipFile, yaml.YAMLError) as exc:
        raise DataError(f"cannot read npz: {type(exc).__name__}: {exc}", file=str(path)) from None


def _from_npz(data, path: Path) -> tuple[JointSamples | None, dict[str, JointCommands], dict | None]:
    keys = set(data.files)
    samples = None
    if "feedback_time_ns" in keys:
        if "feedback_joint_names" not in keys:
            raise DataError("feedback_time_ns without feedback_joint_names", file=str(path))
        samples = JointSamples(
            tuple(str(n) for n in data["feedback_joint_names"]),
            data["feedback_time_ns"],
            *(data[f"feedback_{f}"] if f"feedback_{f}" in keys else None for f in FIELDS),
            source=str(path),
        )
    commands: dict[str, JointCommands] = {}
    k = 0
    while f"command{k}_time_ns" in keys:
        name = str(data[f"command{k}_name"])
        commands[name] = JointCommands(
            tuple(str(n) for n in data[f"command{k}_joint_names"]),
            data[f"command{k}_time_ns"],
            data[f"command{k}_values"],
            str(data[f"command{k}_interface"]),
            source=f"{path}:{name}",
        )
        k += 1
    metadata = yaml.safe_load(str(data["metadata_yaml"])) if "metadata_yaml" in keys else None
    return samples, commands, metadata


def export_csv(path: str | Path, data: JointSamples | JointCommands) -> Path:
    """One CSV: `time_ns` then one column per joint and field (`j1.position`, ... or `j1.effort_cmd`)."""
    if isinstance(data, JointSamples):
        blocks = [(f, getattr(data, f)) for f in FIELDS if getattr(data, f) is not None]
    else:
        blocks = [(f"{data.interface}_cmd", data.values)]
    header = ["time_ns"] + [f"{j}.{f}" for f, _ in blocks for j in data.joint_names]
    path = Path(path)
    with path.open("w") as out:
        out.write(",".join(header) + "\n")
        values = np.hstack([v for _, v in blocks]) if blocks else np.zeros((len(data.time_ns), 0))
        for t, row in zip(data.time_ns.tolist(), values):
            out.write(str(t) + "," + ",".join(repr(float(x)) for x in row) + "\n")
    return path


def load_csv_samples(path: str | Path) -> JointSamples:
    """Read a CSV in the `export_csv` layout for joint samples (`time_ns,<joint>.<field>,...`)."""
    path = Path(path)
    with path.open() as f:
        header = f.readline().strip().split(",")
    if not header or header[0] != "time_ns":
        raise DataError("CSV must start with a time_ns column", file=str(path))
    times = np.loadtxt(path, delimiter=",", skiprows=1, usecols=0, dtype=np.int64, ndmin=1)
    values = np.loadtxt(path, delimiter=",", skiprows=1, usecols=range(1, len(header)), ndmin=2)
    joints: list[str] = []
    fields: dict[str, dict[str, int]] = {}
    for col, name in enumerate(header[1:]):
        joint, _, field = name.rpartition(".")
        if field not in FIELDS or not joint:
            raise DataError(f"CSV column {name!r} is not <joint>.<position|velocity|effort>", file=str(path))
        if joint not in joints:
            joints.append(joint)
        fields.setdefault(field, {})[joint] = col
    arrays = {}
    for field, cols in fields.items():
        arr = np.full((len(times), len(joints)), np.nan)
        for joint, col in cols.items():
            arr[:, joints.index(joint)] = values[:, col]
        arrays[field] = arr
    return JointSamples(
        tuple(joints), times, arrays.get("position"), arrays.get("velocity"), arrays.get("effort"), source=str(path)
    )
