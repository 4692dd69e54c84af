"""`sysid-ros tune | apply | rollback`: ask a running servo_tuner node, print what it answers and reports.

The node does the work (and keeps the journal). `tune` is a client of its `~/tune` action: it prints the
feedback (stage, play, seconds of motion left, cost so far) as it changes and at least every FEEDBACK_LINE_S,
and Ctrl-C cancels the tune (the controller gets its as-found gains back) and exits 130 with one line;
`--activate` first configures and activates the tuner and its recorder when they are not active (a stack
started without `autostart`). `apply` and `rollback` call its services, then wait for the outcome on
`~/result`: the canary's verdict after an apply. `apply PROPOSAL
--persist FILE` also writes the gains the canary kept into the controller's block of the controllers YAML
FILE (in place, comments and order kept, the old file kept as FILE.bak), so a reload keeps them: everything the
canary proved, or a refusal before anything is sent when the proposal's host feed-forward cannot be written in
the controller's terms (`--gains-only` writes the gains anyway and says what is left out). Everything the file
needs is done before anything is sent (its block found, the gains inside the guard, the backup and the new
version written beside it): only the rename waits for the canary, and a change not kept leaves no trace.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from ..core.errors import SysidRosError

WAIT_FOR = {"tune": ("tune",), "apply": ("canary",), "rollback": ()}
FEEDBACK_LINE_S = 10.0  # a feedback line at least this often, and whenever the stage or the play changes
GONE_S = 2.0
"""How long the tuner's node must be missing from the graph before the goal is given up as vanished (a node
that exits cleanly leaves at once; a killed one when its DDS lease runs out, docs/servo_tuner_node.md)."""
ENDED = {4: "succeeded", 5: "canceled", 6: "aborted"}  # action_msgs GoalStatus


def _print(result: dict) -> None:
    print(result.get("message", ""))
    for key in (
        "proposal_file",
        "as_found",
        "parameters",
        "predicted_cost_ratio",
        "live_cost_ratio",
        "threshold",
        "kept",
        "gains",
        "restored",
        "seconds_of_motion",
        "report",
    ):
        if key in result:
            print(f"  {key}: {result[key]}")


def tuner_command(args: argparse.Namespace) -> int:
    """Call `~/<command>` on the servo_tuner and wait for its outcome; 0 when it succeeded."""
    pending = _prepare_persist(args) if getattr(args, "persist", None) else None  # before any ROS
    try:
        return _request(args, pending)
    finally:
        if pending is not None:
            pending[0].discard()  # not kept, failed, interrupted: no backup, no new version left (committed: no-op)


def _request(args: argparse.Namespace, pending) -> int:
    from std_msgs.msg import String
    from std_srvs.srv import Trigger

    from ..nodes.servo_tuner import RESULT_QOS
    from ..ros.client import ros_client, wait_for

    node = args.node
    client = ros_client("sysid_ros_tuner_cli", args)
    if args.command == "tune":
        try:
            return _tune(client, args)
        finally:
            client.close()
    results: list[dict] = []
    client.node.create_subscription(
        String, f"{node}/result", lambda m: results.append(yaml.safe_load(m.data)), RESULT_QOS
    )
    try:
        try:  # --timeout bounds the wait for the node, whichever of its services is asked first
            if getattr(args, "proposal", None) is not None:
                path = str(Path(args.proposal).resolve())
                outcome = client.set_parameters(node, {"apply.proposal_file": path}, args.timeout)
                if not all(r.successful for r in outcome):
                    print(f"{node} refused apply.proposal_file: {[r.reason for r in outcome]}")
                    return 1
            seen = len(results)
            response = client.call(Trigger, f"{node}/{args.command}", Trigger.Request(), args.timeout)
        except TimeoutError:
            raise SysidRosError(
                f"no {node} answered {client.resolve(node)}/{args.command} within {args.timeout:g} s: "
                f"start the servo_tuner node (and activate it), or name it with --node "
                f"(and --namespace)"
            ) from None
        print(response.message)
        if not response.success or not WAIT_FOR[args.command]:
            return 0 if response.success else 1
        wanted = WAIT_FOR[args.command] + (args.command,)
        result = wait_for(
            lambda: next((r for r in results[seen:] if r.get("action") in wanted), None),
            args.wait,
            f"{node} to finish {args.command}",
        )
        _print(result)
        if pending is not None:
            _persist(args.persist, result, *pending)
        return 0 if result.get("ok") else 1
    finally:
        client.close()


def feedback_printer(indent: str = "  "):
    """A Tune feedback callback printing a line when the stage or the play changes, else every FEEDBACK_LINE_S."""
    import math
    import time

    shown: list = [None, -math.inf]

    def show(msg) -> None:
        f = msg.feedback
        key = (f.stage, f.play, f.plays)
        if key != shown[0] or time.monotonic() - shown[1] >= FEEDBACK_LINE_S:
            shown[:] = [key, time.monotonic()]
            cost = "-" if math.isnan(f.cost_so_far) else f"{f.cost_so_far:.3f} x as found"
            print(
                f"{indent}{f.stage:<10} play {f.plays:>3} {f.play or '-':<16} {f.seconds_left:6.0f} s of motion "
                f"left at most, cost so far {cost}",
                flush=True,
            )

    return show


def tune_goal(client, node: str, timeout_s: float, wait_s: float, show=None) -> tuple[object, dict]:
    """Send a Tune goal to `node` and wait for its result, `show` called with each feedback; (result, outcome).

    Ctrl-C (KeyboardInterrupt) while waiting cancels the tune, waits until the tuner has restored the gains,
    and raises KeyboardInterrupt with the tuner's last word."""
    from rclpy.action import ActionClient
    from sysid_ros_interfaces.action import Tune

    from ..ros.client import wait_for

    action = ActionClient(client.node, Tune, f"{node}/tune")
    if not action.wait_for_server(timeout_sec=timeout_s):
        raise SysidRosError(
            f"no {node} offers the action {client.resolve(node)}/tune within {timeout_s:g} s: "
            f"start the servo_tuner node, or name it with --node (and --namespace)"
        )
    sent = action.send_goal_async(Tune.Goal(), feedback_callback=show)
    goal = wait_for(lambda: sent.result() if sent.done() else None, timeout_s, f"{node} to take the tune")
    if not goal.accepted:
        raise SysidRosError(f"{node} refused the tune goal")
    done = goal.get_result_async()
    try:
        response = _wait_result(client, action, node, done, wait_s)
    except KeyboardInterrupt:
        cancel = goal.cancel_goal_async()
        response = wait_for(lambda: done.result() if done.done() else None, 300.0, f"{node} to stop the cancelled tune")
        taken = cancel.done() and bool(cancel.result().goals_canceling)
        raise KeyboardInterrupt(response.result.message if taken else "the tuner did not take the cancel") from None
    outcome = yaml.safe_load(response.result.outcome) if response.result.outcome else {}
    ended = ENDED.get(response.status, f"ended with status {response.status}")
    return response.result, {**outcome, "message": response.result.message, "ended": ended}


def _wait_result(client, action, node: str, done, wait_s: float):
    """The goal's result, or a one-line SysidRosError when the tuner's node left the graph (its process ended)
    or `wait_s` passed."""
    import time

    full = client.resolve(node)
    namespace, _, name = full.rpartition("/")
    deadline = time.monotonic() + wait_s
    gone_since = None
    while not done.done():
        now = time.monotonic()
        present = action.server_is_ready() and (name, namespace or "/") in client.node.get_node_names_and_namespaces()
        gone_since = None if present else (gone_since or now)
        if gone_since is not None and now - gone_since >= GONE_S:
            raise SysidRosError(
                f"{full} vanished mid-tune (its node left the graph: its process "
                f"ended?); the gains it was trying are rolled back when a servo_tuner next "
                f"configures with its journal"
            )
        if now > deadline:
            raise SysidRosError(f"{full} did not finish the tune within --wait {wait_s:g} s")
        time.sleep(0.2)
    return done.result()


def _tune(client, args: argparse.Namespace) -> int:
    """`sysid-ros tune`: feedback lines while the tuner works, the outcome at the end; Ctrl-C cancels."""
    if args.activate:
        _bring_up(client, args.node)
    print(
        f"tuning through {client.resolve(args.node)}/tune (Ctrl-C cancels: the controller gets its gains back)",
        flush=True,
    )
    result, outcome = tune_goal(client, args.node, args.timeout, args.wait, feedback_printer())
    if outcome["ended"] != "succeeded":  # one line saying what ended the goal, then the outcome's details
        outcome["message"] = f"tune {outcome['ended']}: {outcome['message'] or 'no message'}"
    _print(outcome)
    if not result.success and result.message.startswith("not active"):
        where = f" --namespace {args.namespace}" if args.namespace else ""
        print(f"  bring it up with: sysid-ros tune --activate{where}")
    return 0 if result.success else 1


def _bring_up(client, node: str) -> None:
    """Configure and activate the tuner's recorder, then the tuner, where they are not active yet."""
    recorder = client.get_parameters(node, ["recorder"])[0] or "tape_recorder"
    for name in (recorder, node):
        state = client.lifecycle_state(name)
        for transition, before in (("configure", "unconfigured"), ("activate", "inactive")):
            if state == before:
                ok, state = client.change_state(name, transition)
                if not ok:
                    raise SysidRosError(f"{client.resolve(name)} did not {transition} (it is {state}): see its log")
        print(f"{client.resolve(name)}: {state}")


def _prepare_persist(args: argparse.Namespace):
    """(the controllers file update made ready before anything is sent to the robot (`prepare_persist`), the note
    of what it leaves out); a refusal says that nothing was sent."""
    from ..core.errors import ConfigError
    from ..core.gains import prepare_persist
    from ..core.tuner import proposal_target, proven_parameters

    if args.proposal is None:
        raise ConfigError("--persist needs the PROPOSAL file that is applied")
    _, controller, style = proposal_target(args.proposal, args.controller, args.style)
    parameters, note = proven_parameters(args.proposal, args.gains_only)
    try:
        return prepare_persist(args.persist, controller, parameters, style), note
    except SysidRosError as exc:
        raise type(exc)(f"--persist {args.persist}: {exc}; nothing was sent to the robot") from None


def _persist(path: Path, result: dict, pending, note: str) -> None:
    if not result.get("kept"):
        print(f"not persisted to {path}: the change was not kept")
        return
    backup = pending.commit()
    print(f"persisted to {path} ({pending.controller}, {pending.style.name} names; the file as it was: {backup})")
    if note:
        print(f"note: {note}")


def add_commands(commands: argparse._SubParsersAction, ros_options: argparse.ArgumentParser) -> None:
    for name, text in (
        ("tune", "tune the servo_tuner's joints over ROS and write a proposal"),
        ("apply", "apply a proposal (default: the latest tune's) and run the canary"),
        ("rollback", "restore the gains from before the last applied change"),
    ):
        sub = commands.add_parser(name, help=text, parents=[ros_options])
        if name == "apply":
            from ..core.gains import ALIASES, STYLES

            sub.add_argument("proposal", nargs="?", type=Path, default=None, help="a proposal YAML")
            sub.add_argument(
                "--persist",
                type=Path,
                default=None,
                metavar="FILE",
                help="when the canary keeps the change, write the gains into this controllers YAML",
            )
            sub.add_argument(
                "--style",
                default="auto",
                choices=("auto", *STYLES, *ALIASES),
                help="with --persist: the controller's parameter names (auto: as the proposal says)",
            )
            sub.add_argument(
                "--controller", default=None, help="with --persist: the controller (default: the proposal's)"
            )
            sub.add_argument(
                "--gains-only",
                action="store_true",
                help="with --persist: write the gains even when the canary also ran with a host "
                "feed-forward the controller's parameters cannot hold (said, not silent)",
            )
        if name == "tune":
            sub.add_argument(
                "--activate",
                action="store_true",
                help="first configure and activate the servo_tuner and its tape_recorder if they are not",
            )
        sub.add_argument("--node", default="servo_tuner", help="the servo_tuner node's name (relative: in --namespace)")
        sub.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the service")
        sub.add_argument("--wait", type=float, default=7200.0, help="seconds to wait for the outcome")
        sub.set_defaults(run=tuner_command, command=name)
