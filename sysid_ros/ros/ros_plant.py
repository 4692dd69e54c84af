"""The tuner's Plant seam over ROS: a live arm moved only through its controller and a tape_recorder.

`RosArm` is an `Arm` (joints, envelopes, torque caps, home, the nominal model's feed-forward) whose plays go
to the robot:
1. trial gains are sent all at once inside a journaled session (`trials()`): when it ends, or after a crash
   at the next start, the controller gets back the exact gains it had before;
2. when the controller's setpoint is not at a tape's start, a slow move takes every joint there first;
3. the tape over every arm joint (the others hold home) and its host feed-forward go to the tape_recorder as
   a play file (on a disk both share: the recorder refuses a file it cannot read; docs/fleet_stack.md says why);
   the recorder sends the stamped trajectory, guards the envelope and stale feedback, and
   writes the bag;
4. the bag's joint states, put on the command grid, are the play's Telemetry.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState

from ..core.bags import read_joint_states, read_metadata
from ..core.errors import Cancelled, ConfigError, DataError, EnvelopeError
from ..core.gains import GainChange, clamp_for_tuning, parameter_name
from ..core.linear import JointModel
from ..core.report import save_play
from ..core.tapes import KnotCurve, KnotPath, Tape, duration_s, outside_room, room
from ..core.tuner import (
    HOLD_S,
    SPEED_FRAC,
    TUNED_GAINS,
    Arm,
    Controller,
    DriveGains,
    RestWatch,
    Telemetry,
    TuneProgress,
    gain_parameters,
    honours_feedforward,
)
from .client import RosClient, play_tape, stamp_ns, status_value, wait_for
from .controller_gains import ControllerGains
from .feedback import MatchedSubscription

MOVE_SPEED_FRAC = 0.5  # moves to a tape's start go at half the room's speed
SETTLE_S = 0.5  # and rest this long at the start
STILL_UNDER_GAINS_S = 5.0  # wall seconds for the arm to rest under the gains it has, before the as-found ones
STILL_TIMEOUT_S = 30.0  # then under the as-found gains, before the tune stops (wall seconds)


@dataclass
class RosArm(Arm):
    """An arm on a live robot: gains through `gains`, motion through the tape_recorder `recorder`."""

    client: RosClient | None = None
    gains: ControllerGains | None = None
    recorder: str = "tape_recorder"
    feedback_topic: str = "joint_states"
    workdir: Path = Path("tuner")
    play_timeout_s: float = 600.0
    cancel: threading.Event | None = None  # once set: the play running is cancelled, and no other starts
    progress: TuneProgress | None = None  # told of every play's start and end (the tune action's feedback)
    plays: int = 0
    bags: list[str] = field(default_factory=list)
    # Whether the controller adds the trajectory points' effort: None until two plays with feed-forward agree
    # (`core.tuner.feedforward_check`); False: nothing more is sent as feed-forward, the tuner tunes gains only.
    feedforward_honoured: bool | None = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.client is None or self.gains is None:
            raise ConfigError("RosArm needs a RosClient and the controller's ControllerGains")
        self.workdir = Path(self.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._diagnostics = self.client.collect(DiagnosticArray, "/diagnostics", 1000)
        self._session: GainChange | None = None
        self._on_controller: dict[str, float] = {}  # what we know the controller has now
        self._setpoint: dict[str, float] | None = None  # where the controller was last told to be
        self._ff_verdicts: list[bool] = []  # what each play with feed-forward said (feedforward_check)

    # --- gains ---------------------------------------------------------------------------------------
    def gain_names(self) -> list[str]:
        return [parameter_name(j, g) for j in self.joints for g in TUNED_GAINS]

    def read_gains(self) -> dict[str, DriveGains]:
        """The controller's gains of every arm joint now (an infinite integral clamp taken at the torque cap)."""
        values = self.gains.read(self.gain_names())
        self._on_controller.update(values)
        return {
            j: DriveGains(
                kp=values[parameter_name(j, "p")],
                kd=values[parameter_name(j, "d")],
                ki=values[parameter_name(j, "i")],
                i_clamp_nm=clamp_for_tuning(values[parameter_name(j, "i_clamp")], self.caps[j]),
            )
            for j in self.joints
        }

    def assume_gains(self, values: dict[str, float]) -> None:
        """Plays under these gains need not set them: the controller has them (e.g. a change just applied)."""
        self._on_controller.update(values)

    @contextmanager
    def trials(self, reason: str = "tuning: trial gains") -> Iterator[GainChange]:
        """A session in which plays may set trial gains; on leaving it the journaled gains come back exactly."""
        self._session = self.gains.begin_trials(self.gain_names(), reason)
        self._on_controller.update(self._session.previous)
        try:
            yield self._session
        finally:
            session, self._session = self._session, None
            self.gains.end_trials(session)
            self._on_controller.update(session.previous)

    def _ensure_gains(self, controllers: dict[str, Controller]) -> None:
        wanted = gain_parameters({j: controllers[j] for j in self.joints})
        changed = {k: v for k, v in wanted.items() if self._on_controller.get(k) != v}
        if not changed:
            return
        if self._session is None:
            raise ConfigError(f"gains {sorted(changed)} differ from the controller's, outside a trials() session")
        self.gains.try_gains(self._session, changed)
        self._on_controller.update(changed)

    # --- motion --------------------------------------------------------------------------------------
    def play(self, tape: Tape, controllers: dict[str, Controller]) -> dict[str, Telemetry]:
        """Play `tape` (its joints move, the rest hold home) under `controllers`; telemetry for every joint."""
        full = self._over_arm(tape)
        if self._setpoint is not None:  # after a play: a ringing arm (a rung that rang, a stopped play) is not moved
            self._settle(tape.name)
        self._ensure_gains(controllers)
        start = {j: float(c.evaluate(np.zeros(1))[0][0]) for j, c in zip(full.joints, full.curves)}
        here = self._setpoint or self._measured()
        if max(abs(here[j] - start[j]) for j in self.joints) > 1e-6:
            moved = self._play(self._move(here, start), controllers)
            stopped = next((t.notes[0] for t in moved.values() if t.notes), None)
            if stopped:  # never start a tape from somewhere else than its start: the tape is stopped with it,
                # for every joint (a sweep rung whose gains could not even move the arm stops the sweep)
                why = f"the move to the start of {tape.name} was {stopped}"
                return {j: replace(t, tape=tape.name, aborted=why, notes=(why,)) for j, t in moved.items()}
        return self._play(full, controllers)

    def _measured(self) -> dict[str, float]:
        """The arm's measured positions now (where a first move starts: the controller's setpoint is unknown)."""
        msg = self._joint_state(lambda m: True, 10.0, "", quiet=False)
        return {j: float(msg.position[list(msg.name).index(j)]) for j in self.joints}

    def _settle(self, before: str) -> None:
        """Before a play, the arm at rest under the gains it has (STILL_UNDER_GAINS_S); if it keeps moving (trial
        gains that ring or diverge), under the session's as-found gains, which the robot ran with before the
        tune (STILL_TIMEOUT_S, then DataError)."""
        try:
            self._wait_until_still(before, STILL_UNDER_GAINS_S)
            return
        except DataError:
            if self._session is None:
                raise
        as_found = {k: v for k, v in self._session.previous.items() if k in self.gain_names()}
        self.notes.append(
            f"the arm kept moving before {before} under trial gains: back to the as-found gains until it came to rest"
        )
        self.gains.try_gains(self._session, as_found)
        self._on_controller.update(as_found)
        self._wait_until_still(before, STILL_TIMEOUT_S)

    def _wait_until_still(self, before: str, timeout_s: float) -> None:
        """Wait until the arm is at rest (`RestWatch`; joint states without velocities are taken as still);
        DataError if it does not come to rest within `timeout_s`."""
        watch = RestWatch.for_limits([self.envelopes[j].max_speed_rad_s for j in self.joints])

        def still(msg: JointState) -> bool:
            if len(msg.velocity) != len(msg.name):
                return True
            names = list(msg.name)
            return watch.update(stamp_ns(msg), np.array([msg.velocity[names.index(j)] for j in self.joints]))

        self._joint_state(
            still,
            timeout_s,
            f" at rest (every joint under {SPEED_FRAC:.0%} of its envelope's speed "
            f"for {HOLD_S} s) before {before}: the arm keeps moving",
            quiet=True,
        )

    def _joint_state(
        self, accept: Callable[[JointState], bool], timeout_s: float, what: str, quiet: bool
    ) -> JointState:
        """The first joint state of every arm joint that `accept` takes, heard within `timeout_s` (QoS matched;
        `quiet`: the subscription's reliability not logged, for the wait before every play)."""
        got: list = []
        node, topic = self.client.node, self.client.resolve(self.feedback_topic)
        wait_for(lambda: node.count_publishers(topic), 10.0, f"a publisher of {topic}")
        sub = MatchedSubscription(node, JointState, topic, got.append, quiet=quiet)  # sensor-data QoS: best effort
        seen = 0

        def first() -> JointState | None:
            nonlocal seen
            self._check_cancel("while waiting for the arm")  # a cancel is not held up by the wait
            new, seen = got[seen:], len(got)
            return next((m for m in new if set(self.joints) <= set(m.name) and accept(m)), None)

        try:
            return wait_for(
                first, timeout_s, f"joint states of {list(self.joints)} on {topic} ({sub.reliability}){what}"
            )
        except TimeoutError as exc:
            raise DataError(str(exc)) from exc
        finally:
            sub.destroy()

    def _move(self, here: dict[str, float], target: dict[str, float]) -> Tape:
        """A slow rest-to-rest move of every arm joint from `here` to `target`, then a short rest."""
        outside = {j: why for j in self.joints if (why := outside_room(self.envelopes[j], here[j]))}
        if outside:  # the tuner moves joints only inside their envelopes: never out of a limit into them
            raise EnvelopeError(
                f"the arm rests outside its tuning envelopes: {'; '.join(f'{j} {w}' for j, w in outside.items())}. "
                f"The tuner moves a joint only inside its envelope: first bring the arm there (e.g. to each "
                f"envelope.<joint>.origin_rad) with the robot's own tools, or set the envelopes around where it "
                f"rests, clear of its joint limits",
                joint=",".join(outside),
            )
        rooms_ = [room(self.envelopes[j], here[j], joint=j) for j in self.joints]
        path = KnotPath(rooms_)
        path.hold(0.1)
        path.move([target[j] for j in self.joints], [MOVE_SPEED_FRAC * r.speed for r in rooms_])
        path.hold(SETTLE_S)
        return Tape("move_to_start", "fast_moves", "position", self.joints, path.curves(), self.command_rate_hz)

    def _over_arm(self, tape: Tape) -> Tape:
        """`tape` over every arm joint: the joints it does not move hold home."""
        end = duration_s(tape)
        curves = []
        for joint in self.joints:
            if joint in tape.joints:
                curves.append(tape.curves[tape.joints.index(joint)])
            else:
                h = self.home[joint]
                curves.append(KnotCurve((0.0, end), (h, h), (0.0, 0.0), (0.0, 0.0)))
        return replace(tape, joints=self.joints, curves=tuple(curves))

    def _check_cancel(self, where: str) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled(f"cancelled by request {where}")

    def _play(self, tape: Tape, controllers: dict[str, Controller]) -> dict[str, Telemetry]:
        self._check_cancel(f"before {tape.name}")
        t, q, qd, _, ff = self.reference(tape, controllers)
        play: dict = {"tape": tape.to_dict()}
        if np.any(ff):
            play["feedforward"] = {
                "rate_hz": self.command_rate_hz,
                "torque_nm": {j: ff[:, k].tolist() for k, j in enumerate(self.joints)},
            }
        path = self.workdir / f"play_{self.plays:04d}_{tape.name}.yaml"
        path.write_text(yaml.safe_dump(play, sort_keys=False))
        self.plays += 1
        if self.progress is not None:
            self.progress.starting(tape.name)
        self.client.node.get_logger().info(f"playing {tape.name} ({duration_s(tape):.1f} s) through {self.recorder}")
        results = self.client.set_parameters(self.recorder, {"tape.file": str(path.resolve())})
        if not all(r.successful for r in results):
            raise ConfigError(f"{self.recorder} refused tape.file: {[r.reason for r in results]}")
        status = play_tape(self.client, self._diagnostics, self.recorder, self.play_timeout_s, self.cancel)
        bag = status_value(status, "bag")
        if bag:
            self.bags.append(bag)
        self._check_cancel(f"during {tape.name} ({status.message}; bag {bag or 'none'})")
        if not bag:
            raise DataError(f"{self.recorder} recorded no bag: {status.message}")
        if not Path(bag).is_dir():
            raise ConfigError(
                f"{self.recorder}'s bag {bag} is not on this host: the tuner reads every play's bag, "
                f"so it and the recorder must share a disk (see docs/fleet_stack.md)"
            )
        out = self._telemetry(bag, tape.name, t, q, qd, ff, controllers)
        if self.feedforward_honoured is None and np.any(ff):
            verdicts = {honours_feedforward(tel) for tel in out.values() if not tel.aborted} - {None}
            if len(verdicts) == 1:
                self._ff_verdicts.append(verdicts.pop())
            if self._ff_verdicts[-2:] == [False, False]:  # two plays agree: never on one play's word
                self.feedforward_honoured = False
                self.notes.append(
                    f"the controller ignores the feed-forward in trajectory points' effort (measured "
                    f"torque vs commanded in {bag}): tuned with gains only, no host feed-forward"
                )
                out = self._telemetry(bag, tape.name, t, q, qd, np.zeros_like(ff), controllers)  # what ran
            elif self._ff_verdicts[-2:] == [True, True]:
                self.feedforward_honoured = True
        self.client.node.get_logger().info(f"played {tape.name}: {bag}")
        save_play(path.with_suffix(".npz"), out)  # what the reports draw, without reading the bag again
        if self.progress is not None:
            self.progress.played(tape.name, out, self.motion_s)
        return out

    def reference(self, tape: Tape, controllers: dict[str, Controller]) -> tuple[np.ndarray, ...]:
        """As `Arm.reference`, with no feed-forward once the controller is known to ignore it."""
        t, q, qd, qdd, ff = super().reference(tape, controllers)
        return t, q, qd, qdd, (np.zeros_like(ff) if self.feedforward_honoured is False else ff)

    @property
    def box_terms(self) -> tuple[str, ...]:
        return () if self.feedforward_honoured is False else super().box_terms

    def base_feedforward(self, joint: str) -> JointModel | None:
        return None if self.feedforward_honoured is False else super().base_feedforward(joint)

    def _telemetry(
        self,
        bag: str,
        name: str,
        t: np.ndarray,
        q: np.ndarray,
        qd: np.ndarray,
        ff: np.ndarray,
        controllers: dict[str, Controller],
    ) -> dict[str, Telemetry]:
        meta: dict = {}
        for doc in read_metadata(bag):
            if isinstance(doc, dict):
                meta.update(doc)
        read = read_joint_states(bag, joints=list(self.joints), time_source="header", on_gap="split")
        segments = [s for s in read.segments if len(s)]
        if not segments:
            raise DataError(f"no joint states of {list(self.joints)} in {bag}")
        stamps = np.concatenate([s.time_ns for s in segments])
        arrays = {f: np.vstack([getattr(s, f) for s in segments]) for f in ("position", "velocity", "effort")}
        grid = int(meta["start_ns"]) + np.round(t * 1e9).astype(np.int64)
        m = int(np.searchsorted(grid, stamps[-1], side="right"))
        result = meta.get("result") or {}
        aborted = None if result.get("completed", False) else (result.get("abort_reason") or "play did not complete")
        culprit = re.match(r"(?:envelope breach: )?joint (\S+):", aborted or "")
        rel = (grid[:m] - stamps[0]).astype(float)
        at = (stamps - stamps[0]).astype(float)
        out = {}
        for k, joint in enumerate(self.joints):
            series = [np.interp(rel, at, arrays[f][:, k]) for f in ("position", "velocity", "effort")]
            mine = aborted if (culprit is None or culprit.group(1) == joint) else None
            out[joint] = Telemetry(
                name,
                t[:m],
                *series,
                q[:m, k],
                qd[:m, k],
                ff[:m, k],
                self.command_rate_hz,
                self.caps[joint],
                mine,
                (f"stopped early: {aborted}",) if aborted else (),
                controllers[joint].gains.kp,
                controllers[joint].gains.kd,
            )
        self.motion_s += m / self.command_rate_hz
        # where the controller is told to be now: the tape's end, or the held position after a stop
        end = arrays["position"][-1] if aborted else q[-1]
        self._setpoint = dict(zip(self.joints, np.asarray(end, dtype=float).tolist()))
        return out
