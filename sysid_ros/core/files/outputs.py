"""Writing results safely: every output stays inside its folder, earlier results are kept unless asked
(`force`), the folder is checked writable before any long work, and every file appears whole or not at all.

Outputs are written into a hidden staging folder next to their final place (same file system) and renamed
into place only when all of them are complete; a failure leaves the folder as it was.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError


def inside(folder: Path, name: str) -> Path:
    """`folder / name`, refused when `name` would leave `folder` (absolute, `..`, a path)."""
    target = (folder / name).resolve()
    if Path(name).is_absolute() or target.parent != folder.resolve() or name in ("", ".", ".."):
        raise ConfigError(f"output name {name!r} must be a plain file name inside {folder}")
    return target


def check_writable(folder: str | Path, names: Sequence[str] = (), force: bool = False) -> Path:
    """Create `folder` when missing, check that a file can be written there, and that none of `names`
    exists yet (unless `force`). Returns the folder, resolved."""
    folder = Path(folder).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ConfigError("output folder is a file", out=str(folder))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise ConfigError(f"cannot write into the output folder: {exc.strerror or exc}", out=str(folder)) from None
    folder = folder.resolve()
    earlier = [n for n in names if (inside(folder, n)).exists() or (inside(folder, n)).is_symlink()]
    if earlier and not force:
        raise ConfigError(
            f"the output folder holds earlier results {earlier}; use --force to replace them or choose another --out",
            out=str(folder),
        )
    return folder


@contextmanager
def staged(folder: str | Path, names: Sequence[str], force: bool = False) -> Iterator[dict[str, Path]]:
    """Paths to write `names` to (in a staging folder); on success they are renamed into `folder`.

    Files and folders both work. Nothing in `folder` changes if the body raises.
    """
    folder = check_writable(folder, names, force)
    stage = Path(tempfile.mkdtemp(dir=folder, prefix=f".staging-{os.getpid()}-"))  # `remove_stale` knows it
    try:
        yield {n: stage / n for n in names}
        missing = [n for n in names if not (stage / n).exists()]
        if missing:
            raise ConfigError(f"outputs {missing} were not written", out=str(folder))
        for n in names:
            final = inside(folder, n)
            if final.is_dir() and not final.is_symlink():
                shutil.rmtree(final)  # only with force (check_writable refused earlier results)
            os.replace(stage / n, final)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def write_file(path: str | Path, write, force: bool = False) -> Path:
    """Write one file atomically: `write(tmp_path)` fills a temp file that is then renamed to `path`."""
    path = Path(path).expanduser()
    with staged(path.parent, [path.name], force) as tmp:
        write(tmp[path.name])
    return path
