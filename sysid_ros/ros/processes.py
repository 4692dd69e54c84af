"""Start sysid_ros nodes as processes without `ros2 launch` (tests, the demo, the CLI) and stop them by pid.

Also claims a DDS domain of its own for a run, so concurrent runs on one host never see each other.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import yaml

_LOCK_DIR = Path("/tmp/sysid_ros_domains")
_held_locks: list[IO[str]] = []


def claim_domain_id() -> int:
    """A ROS_DOMAIN_ID in 1..232 that no other run on this host holds (233 and up make Fast DDS exit)."""
    _LOCK_DIR.mkdir(exist_ok=True)
    ids = list(range(1, 233))
    random.Random(os.getpid()).shuffle(ids)
    for domain in ids:
        handle = open(_LOCK_DIR / f"{domain}.lock", "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _held_locks.append(handle)  # held until this process exits
        return domain
    raise RuntimeError("no free ROS domain id in 1..232")


def isolate_ros_environment() -> int:
    """Put this process (and the nodes it starts) on a domain of its own, with discovery kept on this host."""
    domain = claim_domain_id()
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("AMENT_PREFIX_PATH", sys.prefix)
    return domain


def user_or_own_domain() -> tuple[int, bool]:
    """The ROS_DOMAIN_ID the user set (True), or else a domain of this run's own (False), as `isolate_ros_environment`;
    discovery stays on this host unless the user chose a range."""
    given = os.environ.get("ROS_DOMAIN_ID", "").strip()
    if not given:
        return isolate_ros_environment(), False
    if not given.isdigit() or not 0 <= int(given) <= 232:
        raise ValueError(f"ROS_DOMAIN_ID={given!r}: use 0..232 (233 and up make Fast DDS exit)")
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("AMENT_PREFIX_PATH", sys.prefix)
    return int(given), True


def namespace_args(namespace: str) -> list[str]:
    """`--ros-args` rules that move a node into `namespace`, with its simulated time: the robot's `<ns>/clock`."""
    if not namespace.strip("/"):
        return []
    return ["-r", f"__ns:=/{namespace.strip('/')}", "-r", "/clock:=clock"]


class NodeProcess:
    """A sysid_ros node in its own process, started with a parameter dict (in `namespace`); stopped by its pid.

    `composed=True` starts a process of several nodes (`robot_stack`): `params` then maps each node's name
    to its parameters, and no `__node:=` rule renames them; `name` only names the process's files.
    """

    def __init__(
        self,
        node: str,
        name: str,
        params: dict[str, Any],
        folder: Path,
        extra_args: list[str] | None = None,
        namespace: str = "",
        composed: bool = False,
    ) -> None:
        self.name, self.namespace = name, namespace.strip("/")
        self.full_name = f"/{self.namespace}/{name}" if self.namespace else f"/{name}"
        folder.mkdir(parents=True, exist_ok=True)
        tag = self.full_name.strip("/").replace("/", "_")
        params_file = folder / f"{tag}_params.yaml"
        sections = params if composed else {name: params}
        params_file.write_text(yaml.safe_dump({f"/**/{n}": {"ros__parameters": p} for n, p in sections.items()}))
        self.log_path = folder / f"{tag}.log"
        self._log = open(self.log_path, "a")  # a restarted node's log follows its predecessor's, never over it
        self._log_start = self._log.tell()
        rename = [] if composed else ["-r", f"__node:={name}"]
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                f"sysid_ros.nodes.{node}",
                "--ros-args",
                *rename,
                *namespace_args(namespace),
                "--params-file",
                str(params_file),
                *(extra_args or []),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        """What this process has printed (a predecessor's log under the same name left out)."""
        if not self._log.closed:
            self._log.flush()
        with open(self.log_path, "rb") as log:
            log.seek(self._log_start)
            return log.read().decode(errors="replace")

    def stop(self, sig: int = signal.SIGINT, timeout_s: float = 15.0) -> int:
        """Signal the process (SIGINT: a clean shutdown) and wait; kill it if it does not exit in time."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout_s)
        if not self._log.closed:
            self._log.close()
        return self.proc.returncode
