"""The one door for the files sysid_ros writes: a temporary file created exclusively beside its target and
renamed over it, a lock per output folder, and the checks that keep a run from writing over its own inputs.

- `replace_file` writes a file whole or not at all: the temporary is a fresh name opened with `O_EXCL` and
  `O_NOFOLLOW` (a planted `<file>.tmp`, or a link by any name, is never followed), the target's mode is
  kept (0600 stays 0600), a read-only target is refused. A target that is a symbolic link is refused,
  unless `through_link`: then the file it points at is replaced, deliberately (a controllers file linked
  from a colcon install is edited where it lives), and the link stays a link.
- `create_new` creates a file that must not exist yet (a backup), again never through a link.
- `pending_beside` writes a file's next version beside it now, to be renamed over it later (`apply --persist`
  proves before anything is applied that the new file and its backup can be written).
- `folder_lock` holds `<folder>/.sysid-ros.lock` (flock) for a run: a second run into the same folder is
  refused at once instead of mixing its files with the first's.
- `remove_stale` deletes the staging folders of runs whose process is gone (`kill -9`), under that lock.
- `refuse_inputs_inside` refuses an output folder that holds, or lies inside, one of the run's inputs.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError

LOCK_NAME = ".sysid-ros.lock"
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def create_new(path: str | Path, data: bytes, mode: int = 0o666) -> Path:
    """Create `path` holding `data`; FileExistsError when anything (a link too) is there already."""
    path = Path(path)
    fd = os.open(path, _NEW, mode)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)
    return path


def temporary_beside(target: Path, mode: int = 0o600) -> tuple[int, Path]:
    """An open, exclusively created, never-followed temporary file in `target`'s folder: (fd, path)."""
    for _ in range(100):
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, _NEW, mode), tmp
        except FileExistsError:
            continue
    raise ConfigError("cannot create a temporary file beside the target", file=str(target))


def pending_beside(target: Path, data: bytes, mode: int) -> Path:
    """`data` written and synced beside `target` under a hidden name that carries this process's id
    (`.<name>.partial-<pid>-<hex>`, exclusively created, never through a link), for a later `os.replace`
    over `target`: written now, it proves the folder writable and the room there. What a killed process
    left of such files for `target` is removed first. OSError when the folder or the filesystem refuses."""
    for entry in target.parent.iterdir():
        match = STALE.match(entry.name)
        if entry.name.startswith(f".{target.name}.partial-") and match and not process_alive(int(match.group(1))):
            entry.unlink(missing_ok=True)
    for _ in range(100):
        new = target.with_name(f".{target.name}.partial-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            fd = os.open(new, _NEW, 0o600)
            break
        except FileExistsError:
            continue
    else:
        raise ConfigError("cannot create a temporary file beside the target", file=str(target))
    try:
        _write_all(fd, data)
        os.fchmod(fd, mode)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        new.unlink(missing_ok=True)
        raise
    os.close(fd)
    return new


def resolve_target(path: str | Path, through_link: bool = False) -> Path:
    """The file a write to `path` replaces: `path`, or with `through_link` the file its link points at;
    ConfigError for a link when not `through_link`, a dangling link, or a target that is not a regular file."""
    path = Path(path).expanduser()
    if path.is_symlink():
        if not through_link:
            raise ConfigError("is a symbolic link: not written through it (name the file itself)", file=str(path))
        real = Path(os.path.realpath(path))
        if not real.is_file():
            raise ConfigError("is a link to nothing writable (dangling, or not a file)", file=str(path))
        return real
    if path.exists() and not path.is_file():
        raise ConfigError("is not a regular file: not replaced", file=str(path))
    return path


def replace_file(path: str | Path, data: bytes, through_link: bool = False) -> Path:
    """Write `data` to `path` atomically (see the module); returns the file written (the link's target
    when `through_link`)."""
    target = resolve_target(path, through_link)
    mode = None
    if target.exists():
        mode = stat.S_IMODE(target.stat().st_mode)
        if not mode & stat.S_IWUSR:
            raise ConfigError(f"is read-only (mode {mode:04o}): not changed; make it writable first", file=str(target))
    fd, tmp = temporary_beside(target, 0o600 if mode is None else mode)
    try:
        _write_all(fd, data)
        if mode is not None:
            os.fchmod(fd, mode)  # the creation mode was cut by the umask
        else:
            os.fchmod(fd, 0o666 & ~_umask())
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    return target


def _umask() -> int:
    try:  # Linux >= 4.7 reports it without changing it
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def _holder(fd: int) -> str:
    try:
        return os.pread(fd, 64, 0).decode(errors="replace").split()[0]
    except (OSError, IndexError):
        return "?"


@contextmanager
def folder_lock(folder: str | Path) -> Iterator[Path]:
    """Hold `folder`'s lock (the folder is created when missing); ConfigError at once when another run holds
    it. The lock file is removed when released."""
    folder = Path(folder).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise ConfigError(f"cannot write into the output folder: {exc.strerror or exc}", out=str(folder)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise ConfigError(
                f"another sysid-ros run (pid {_holder(fd)}) is writing into this folder; wait for "
                "it to end or choose another --out",
                out=str(folder),
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path, follow_symlinks=False).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the run before us removed the file between our open and our lock
            raise ConfigError("another sysid-ros run just took this folder; run again", out=str(folder))
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield folder
        finally:
            path.unlink(missing_ok=True)  # still holding the lock: no one else has it
    finally:
        os.close(fd)


STALE = re.compile(r"^\.(?:staging-|.+\.partial-|.+\.old-)(\d+)")
"""Hidden names of work in progress that carry their process id: `.staging-<pid>-*`, `.<name>.partial-<pid>`,
`.<name>.old-<pid>`."""


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs on this host (a zombie, killed and not yet reaped, does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def remove_stale(folder: str | Path) -> list[str]:
    """Remove work in progress left in `folder` by processes that are gone (hold `folder_lock` when calling);
    a link is unlinked, never followed. Returns the names removed."""
    removed = []
    folder = Path(folder)
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        match = STALE.match(entry.name)
        if not match or int(match.group(1)) == os.getpid() or process_alive(int(match.group(1))):
            continue
        if entry.is_symlink() or not entry.is_dir():
            entry.unlink(missing_ok=True)
        else:
            shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
    return removed


def _within(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def refuse_inputs_inside(out: str | Path, inputs: Iterable[str | Path], what: str = "--out") -> None:
    """ConfigError when the output folder `out` holds one of `inputs` (results there could replace it) or
    lies inside one (a bag folder); links resolved, so neither a link to the folder nor `..` slips by."""
    folder = Path(os.path.realpath(Path(out).expanduser()))
    for item in inputs:
        real = Path(os.path.realpath(Path(item).expanduser()))
        if _within(real, folder):
            raise ConfigError(
                f"{what} {out} holds this run's input {item}: its results could replace it; choose another folder",
                out=str(out),
            )
        if _within(folder, real):
            raise ConfigError(f"{what} {out} lies inside this run's input {item}; choose another folder", out=str(out))
