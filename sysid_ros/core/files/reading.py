"""The one door for the files sysid_ros reads: a bounded read of a regular file, YAML whose aliases cannot
expand past a bound, and `.npz` arrays whose declared sizes are checked before anything is allocated.

Every refusal is one `ConfigError` (a `DataError` for arrays) line naming the file and what is wrong:
`/dev/zero`, a FIFO or a folder where a file is expected, a file larger than its kind may be, text that is
not UTF-8, a YAML alias bomb (billion laughs) or a recursive alias, an array header declaring more rows
than the data holds or than any recording has.
"""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..errors import ConfigError, DataError

MAX_YAML_BYTES = 16 << 20
"""A problem, manifest, proposal, parameter or controllers file: 16 MiB (the largest real one is ~100 kB)."""
MAX_YAML_NODES = 1_000_000
"""Scalars, lists and mappings of a YAML document counted with every alias expanded."""
MAX_NPZ_ROWS = 20_000_000
"""Rows of one array in an `.npz` (5.5 h at 1 kHz), the grid bound of `core.signals.size_bounds`."""
MAX_NPZ_BYTES = 4 << 30
"""Declared bytes of all arrays of one `.npz`."""

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: also refuses nesting deeper than 1000


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.3g} MiB"


def read_bytes(path: str | Path, what: str, limit: int = MAX_YAML_BYTES) -> bytes:
    """The bytes of the regular file at `path` (a link to one is followed); ConfigError for anything else
    (a folder, `/dev/zero`, a FIFO, a socket) and for more than `limit` bytes, checked before and while
    reading (a file that grows endlessly stops at `limit`)."""
    path = Path(path).expanduser()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO with no writer must not hang the open
    except OSError as exc:
        raise ConfigError(f"cannot read the {what}: {exc.strerror or exc}", file=str(path)) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file (a device, FIFO or socket)"
        raise ConfigError(f"the {what} is {kind}", file=str(path))
    with os.fdopen(fd, "rb") as f:
        if info.st_size > limit:
            raise ConfigError(
                f"the {what} is {_mib(info.st_size)}, more than the {_mib(limit)} it may be", file=str(path)
            )
        data = f.read(info.st_size + 1)  # read(n) allocates n bytes first: the size it claims, not the bound
        if len(data) > info.st_size:  # it grew (or claims 0, as /proc does): on to the bound
            data += f.read(limit + 1 - len(data))
    if len(data) > limit:
        raise ConfigError(f"the {what} grew past the {_mib(limit)} it may be while read", file=str(path))
    return data


def read_text(path: str | Path, what: str, limit: int = MAX_YAML_BYTES) -> str:
    """`read_bytes` decoded as UTF-8 (ConfigError when it is not text)."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"the {what} is not UTF-8 text (byte {exc.start})", file=str(path)) from None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def expanded_size(root: yaml.Node, bound: int = MAX_YAML_NODES) -> int:
    """Nodes of a composed document with every alias expanded, counted without expanding anything (each
    shared node's size once); ConfigError past `bound` or for an alias that contains itself."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            if sizes[key] > bound:
                raise ConfigError(
                    f"the document expands to more than {bound:.0e} values through its aliases (an alias bomb?)"
                )
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise ConfigError("the document holds an alias that contains itself")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


def _checked_node(loader: Any, what: str, bound: int, where: dict[str, object]) -> yaml.Node | None:
    """The loader's document composed (nothing constructed yet) and its expanded size checked."""
    try:
        node = loader.get_single_node()
        if node is not None:
            expanded_size(node, bound)
        return node
    except ConfigError as exc:
        raise ConfigError(f"the {what}: {exc}", **where) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"the {what} is not valid YAML: {' '.join(str(exc).split())}", **where) from None
    except RecursionError:
        raise ConfigError(f"the {what} nests too deep", **where) from None


def parse_yaml(text: str, what: str, bound: int = MAX_YAML_NODES, **where: object) -> Any:
    """YAML text as Python values (safe types only); ConfigError for a syntax error, an alias bomb or a
    recursive alias, naming `what` and `where` (e.g. file=...)."""
    loader = _LOADER(text)
    try:
        node = _checked_node(loader, what, bound, where)
        try:
            return None if node is None else loader.construct_document(node)
        except yaml.YAMLError as exc:  # e.g. an unknown tag
            raise ConfigError(f"the {what} is not valid YAML: {' '.join(str(exc).split())}", **where) from None
    finally:
        loader.dispose()


def check_yaml_text(text: str, what: str, bound: int = MAX_YAML_NODES, **where: object) -> None:
    """Refuse YAML text that would not pass `parse_yaml` (for a round-trip loader reading it afterwards)."""
    loader = _LOADER(text)
    try:
        _checked_node(loader, what, bound, where)
    finally:
        loader.dispose()


def load_yaml(path: str | Path, what: str, limit: int = MAX_YAML_BYTES, bound: int = MAX_YAML_NODES) -> Any:
    """A YAML file read through the door: bounded bytes, bounded expansion, one-line errors."""
    return parse_yaml(read_text(path, what, limit), what, bound, file=str(Path(path).expanduser()))


def npz_headers(
    path: str | Path, max_rows: int = MAX_NPZ_ROWS, max_bytes: int = MAX_NPZ_BYTES
) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """{array name: (shape, dtype)} of an `.npz`, read from the headers alone; DataError for a file that is
    not a plain npz, an object (pickle) array, a shape larger than the stored data or than the bounds."""
    path = Path(path).expanduser()
    _regular(path)
    out: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    total = 0
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    read_header = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shape, _, dtype = read_header(member)
                    header = member.tell() if member.seekable() else 0
                name = info.filename[:-4]
                if dtype.hasobject:
                    raise DataError(
                        f"array {name!r}: object arrays (pickled Python objects) are never loaded", file=str(path)
                    )
                size = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if shape and shape[0] > max_rows:
                    raise DataError(
                        f"array {name!r} declares {shape[0]:.3g} rows, more than {max_rows:.0e}", file=str(path)
                    )
                if header and size > info.file_size - header:
                    raise DataError(
                        f"array {name!r} declares {shape} ({_mib(size)}) but holds "
                        f"{_mib(info.file_size - header)}: a damaged or forged file",
                        file=str(path),
                    )
                total += size
                out[name] = (tuple(shape), dtype)
    except (zipfile.BadZipFile, ValueError, EOFError, OSError) as exc:
        raise DataError(f"not a readable .npz: {' '.join(str(exc).split())}", file=str(path)) from None
    if total > max_bytes:
        raise DataError(f"the arrays declare {_mib(total)}, more than {_mib(max_bytes)}", file=str(path))
    return out


def _regular(path: Path) -> Path:
    try:
        info = os.stat(path)
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    if not stat.S_ISREG(info.st_mode):
        raise DataError("not a regular file (a folder, device, FIFO or socket)", file=str(path))
    return path


def load_npz(path: str | Path, max_rows: int = MAX_NPZ_ROWS, max_bytes: int = MAX_NPZ_BYTES) -> dict[str, np.ndarray]:
    """Every array of an `.npz` after `npz_headers` passed (no pickles)."""
    npz_headers(path, max_rows, max_bytes)
    try:
        with np.load(Path(path).expanduser(), allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"not a readable .npz: {' '.join(str(exc).split())}", file=str(path)) from None
