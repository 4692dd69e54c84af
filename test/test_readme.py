"""Every command of README.md's ```bash blocks, run as written, in README order; any non-zero exit fails.

Placeholders a reader replaces (BAG, PROPOSAL.yaml, NAME, j1 j2, ...) are replaced by this test from an explicit
table with what the README's own commands produced before them: the bag `sysid-ros record` wrote, the proposal
`sysid-ros tune` wrote. Commands that move a robot run against a sim_robot stack this test starts (the demo's
hidden pendulum: a forward position stream for `record`, then the demo's tuning rig for `tune`/`apply`/
`rollback`); the nodes the README starts itself (the venv's `python -m sysid_ros.nodes.<node> ... &` lines) run
as written, in processes of their own, once the demo's rig is stopped. What cannot run here is in SKIP, each with
its reason; a README command neither run nor skipped
fails the test, so a new block is either runnable or reviewed.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sysid_ros.ros.client import wait_for
from sysid_ros.ros.processes import NodeProcess

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TIMEOUT_S = 1800.0  # one command (a tune: ~320 s of motion at 3x real time on a loaded machine)

# The start of a command -> why it does not run here (reviewed: each is covered elsewhere or needs what is absent).
SKIP = {
    "make demo": "runs the demo in a venv of its own; the demo's job is the README's commands below, run here",
    "make test": "the test suite itself",
    "cd ~/ros2_ws/src && git clone": "a ROS 2 workspace on a robot (git, network); test_colcon builds the package",
    "pip install": "installs from the network; `make setup` pins and installs the same",
    "cd ~/ros2_ws && colcon build": "a ROS 2 workspace; test_colcon runs colcon build and colcon list the same way",
    "source install/setup.bash": "a colcon workspace's environment",
    "ros2 launch": "launch/ros2cli are not on PyPI: this test starts the same nodes as processes "
    "(test_launch_files checks every launch file against a stand-in)",
    "ros2 service call": "ros2cli is not on PyPI: the tests call the same services over DDS "
    "(test_fleet_stack: is_active, cancel)",
    "for robot in r1 r2 r3; do ssh": "ssh to robots",
    "sysid-ros fleet identify fleet/2026-12-01.yaml": "needs the fleet's bags under /data/fleet (recorded over ssh); "
    "test_fleet runs fleet identify on manifests of this shape",
    "sysid-ros fleet identify MANIFEST.yaml": "needs a manifest of the fleet's bags and problem files (README's "
    "example names /data/fleet); test_fleet runs fleet identify, and checks "
    "a robot with only train: is not validated on the shared problem's data",
    "grep -A30 '^drift:' results/2026-12-01/fleet.yaml": "reads the skipped fleet run's output",
    "sysid-ros calibrate-gains": "needs an unloaded and a loaded run of one motion and the known mass in the model; "
    "test_drive_gains runs calibrate-gains on such runs",
    "sysid-ros tune --namespace r1": "needs the namespaced stack fleet.launch.py starts; test_fleet_stack tunes /r1",
    "sysid-ros tune  ": "the same tune as `sysid-ros tune --activate` (run here against a stack not yet active): "
    "one tune is ~2 min of motion",
}


def readme_commands(text: str) -> list[str]:
    """The commands of every ```bash block: continuation lines joined, comments and blank lines dropped."""
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = _strip_comment(line).strip()
            if line:
                commands.append(line)
    return commands


def _strip_comment(line: str) -> str:
    """`line` without a trailing `# comment` (a # inside quotes is kept)."""
    quote = None
    for k, ch in enumerate(line):
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote == ch else ch
        elif ch == "#" and quote is None and (k == 0 or line[k - 1].isspace()):
            return line[:k]
    return line


# Commands whose outputs the others name (BAG, PROPOSAL.yaml) run first, in this order; the rest in README order.
FIRST = ("sysid-ros record", "sysid-ros tune --activate")


def skip_reason(command: str) -> str | None:
    padded = command + "  "  # "sysid-ros tune  " is the bare `sysid-ros tune`
    return next((why for start, why in SKIP.items() if padded.startswith(start)), None)


def in_run_order(commands: list[str]) -> list[str]:
    """FIRST's commands (each once: the venv section repeats `sysid-ros tune --activate`), then the rest in README
    order, a command the README repeats run once."""
    first = [next(c for c in commands if c.startswith(start)) for start in FIRST]
    rest = [c for c in commands if c not in first]
    return first + [c for k, c in enumerate(rest) if c not in rest[:k]]


NODE_LINE = re.compile(r"^python -m sysid_ros\.nodes\.(\w+) (.*)&$")
"""A node the README starts in the background (the venv's `ros2 launch`): started here as a process of its own."""


class Background:
    """A README node line's process, stopped by its pid (SIGINT: a clean shutdown) with the others."""

    def __init__(self, command: str, cwd: Path, env: dict, log: Path) -> None:
        self.log = open(log, "w")
        self.proc = subprocess.Popen(shlex.split(command), cwd=cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15.0)
        self.log.close()


def test_the_readme_lists_what_it_skips():
    """Every SKIP entry still matches a README command (a stale entry would hide nothing, but says nothing)."""
    commands = readme_commands(README.read_text())
    assert commands and len(commands) > 20
    for start in SKIP:
        assert any((c + "  ").startswith(start) for c in commands), f"SKIP entry {start!r} matches no README command"
    for start in FIRST:
        assert any(c.startswith(start) for c in commands), f"FIRST entry {start!r} matches no README command"


def _controllers_file(path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {"sim_robot": {"ros__parameters": {"gains": {"hinge": {"p": 5.0, "i": 0.0, "d": 0.2, "i_clamp": 0.0}}}}},
            sort_keys=False,
        )
    )
    return path


def test_every_readme_command_runs(tmp_path, client):
    from sysid_ros.demo import HIDDEN_PENDULUM, TUNE_RECORDER, TUNED_PENDULUM, TUNER

    work = tmp_path / "work"
    work.mkdir()
    (work / "config").symlink_to(ROOT / "config")  # the README's relative paths: run from a copy of the repo's root
    (work / ".venv").symlink_to(Path(sys.executable).parents[1])  # `source .venv/bin/activate`: this venv
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    found: dict[str, str] = {}  # what earlier commands produced, for the placeholders of later ones
    stack: list = []

    def up(node: str) -> None:  # a node's imports can take over a minute on a loaded 2-core machine
        wait_for(lambda: node in client.node.get_node_names(), 180.0, f"{node} to start")

    def start_recording_stack() -> None:
        """sim_robot as config/tape_recorder.yaml expects it: a forward position stream at 500 Hz into a position
        servo (without gains it holds no position: the pendulum hangs still and its velocity is all zero)."""
        stack.append(
            NodeProcess(
                "sim_robot",
                "sim_robot",
                {
                    **HIDDEN_PENDULUM,
                    "forward_interface": "position",
                    "gains.hinge.p": 40.0,
                    "gains.hinge.d": 1.5,
                    "real_time_factor": 1.0,
                },
                tmp_path / "logs",
            )
        )
        up("sim_robot")

    def start_tuning_stack() -> None:
        """The demo's tuning rig (PID position servo with poor gains, trajectory recorder, servo_tuner), inactive."""
        for process in stack:
            process.stop()
        stack.clear()
        logs = tmp_path / "rig_logs"
        stack.append(NodeProcess("sim_robot", "sim_robot", {**TUNED_PENDULUM, "real_time_factor": 3.0}, logs))
        stack.append(
            NodeProcess(
                "tape_recorder", "tape_recorder", {**TUNE_RECORDER, "output_dir": str(tmp_path / "rig_bags")}, logs
            )
        )
        stack.append(NodeProcess("servo_tuner", "servo_tuner", {**TUNER, "output_dir": str(tmp_path / "tuner")}, logs))
        for node in ("sim_robot", "tape_recorder", "servo_tuner"):
            up(node)

    def substitute(command: str) -> str:
        table = [
            (r"\[--joints \.\.\.\]", ""),
            (r"\[--out events\.yaml\]", "--out events.yaml"),
            (r"\[--style auto\|jtc\|pid_controller\|\.\.\.\]", ""),
            (r"\[--out FILE\]", "--out exported.yaml"),
            # the demo's proposal has a gravity feed-forward no controller parameter holds: without the flag
            # persist and export refuse it (exit 2, tested in test_export_feedforward)
            (r"\[--gains-only\]", "--gains-only"),
            (r"\[PROPOSAL\.yaml\]", found.get("proposal", "")),
            (r"PROPOSAL\.yaml", found.get("proposal", "")),
            (r"--model arm\.xml", "--model pendulum"),  # the README's record bag is the pendulum's
            (r"--controller NAME", "--controller sim_robot"),
            (r"\bj1 j2\b", "hinge"),
            (r"--out SAFE", "--out safe_copy"),
            (r"\bBAG\b", found.get("bag", "")),
        ]
        for pattern, value in table:
            command = re.sub(pattern, value, command)
        return command

    def start_readme_node(node: str, command: str) -> None:
        """A README node line, as written (the demo's rig goes first: the same node names): up, and a lifecycle
        node configured and activated as `sysid-ros tune --activate` would (its tune is the one run first)."""
        if not any(isinstance(p, Background) for p in stack):
            for process in stack:
                process.stop()
            stack.clear()
        stack.append(Background(command, work, env, tmp_path / f"readme_{node}.log"))
        up(node)
        if node in ("tape_recorder", "servo_tuner"):
            wait_for(
                lambda: f"/{node}/change_state" in dict(client.node.get_service_names_and_types()),
                180.0,
                f"/{node}'s lifecycle services",
            )
            for transition, state in (("configure", "inactive"), ("activate", "active")):
                assert client.change_state(node, transition) == (True, state), (node, transition)

    ran, skipped = [], []
    try:
        start_recording_stack()
        for command in in_run_order(readme_commands(README.read_text())):
            why = skip_reason(command)
            if why:
                skipped.append((command, why))
                continue
            node_line = NODE_LINE.match(command)
            if node_line:
                start_readme_node(node_line.group(1), command[:-1])
                ran.append(command)
                continue
            if command.startswith("sysid-ros tune"):
                start_tuning_stack()
            if "persist controllers.yaml" in command:
                _controllers_file(work / "controllers.yaml")
            concrete = substitute(command)
            done = subprocess.run(
                ["bash", "-c", concrete], cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
            )
            if command.startswith("sysid-ros rollback") and found.get("kept") == "False":
                # the canary of the apply before already rolled the change back (its live ratio over the threshold:
                # seen once on a loaded CI machine): nothing is left to roll back, and rollback says so
                assert done.returncode == 1 and "no applied change to roll back" in done.stdout, done.stdout
                print(f"the canary rolled back already: {command} answered {done.stdout.strip()!r}")
                ran.append(command)
                continue
            assert done.returncode == 0, (
                f"README command failed (exit {done.returncode}):\n  {command}\n"
                f"  ran as: {concrete}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
            ran.append(command)
            if command.startswith("sysid-ros apply"):
                found["kept"] = next(iter(re.findall(r"^\s*kept: (\S+)", done.stdout, flags=re.M)), None)
                print(f"{command}: kept {found['kept']}")
            if command.startswith("sysid-ros record"):
                found["bag"] = re.search(r"-> (\S+)", done.stdout).group(1)
            if command.startswith("sysid-ros tune"):
                found["proposal"] = re.search(r"proposal_file: (\S+)", done.stdout).group(1)
    finally:
        for process in stack:
            process.stop()
    print(f"ran {len(ran)} README commands; skipped {len(skipped)}:")
    for command, why in skipped:
        print(f"  {command[:70]}: {why}")
    assert any(c.startswith("sysid-ros tune") for c in ran) and any(c.startswith("sysid-ros record") for c in ran)
