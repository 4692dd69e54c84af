"""The main job on the embedded simulated robot: `make demo` (or `python -m sysid_ros.demo`).

1. start `sim_robot` (the pendulum, its true mass, damping and friction loss hidden from everything else)
   and `tape_recorder` as processes on a DDS domain of their own, on simulated time faster than real time;
2. record: play two multisine torque tapes (training, held out) inside the envelope into rosbag2 bags;
3. identify: the regression estimate, then `mujoco.sysid` from the bags; print truth vs identified;
4. tune and propose over ROS: `servo_tuner` runs the staged pipeline (identify, sweep, refine screened on a
   MuJoCo twin, verify on held-out tapes) on the same hidden pendulum as a PID position servo with poor
   factory gains, every play through a tape_recorder into bags; the controller ends exactly as found;
5. apply: the proposal goes to sim_robot's gain parameters all at once, journaled first;
6. canary: held-out tapes under the new gains; kept only if the live cost ratio <= 1 - (1 - predicted) / 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml
from diagnostic_msgs.msg import DiagnosticArray
from std_msgs.msg import String

from .core.identify import identify, problem_from_dict, write_results
from .nodes.servo_tuner import RESULT_QOS
from .ros.client import RosClient, play_tape, status_value, wait_for
from .ros.processes import NodeProcess, user_or_own_domain

TRUTH = {"pole_mass": 1.3, "hinge_damping": 0.08, "hinge_frictionloss": 0.05}
NOMINAL = {"pole_mass": 1.0, "hinge_damping": 0.0, "hinge_frictionloss": 0.0}
NOISE_RAD = 5e-4

# sim_robot parameters of the hidden pendulum (torque-driven, 0.5 mrad angle noise, simulated time), and the
# tape_recorder's for multisine torque tapes on it (1.6 N m peak, inside a 1.5 rad / 6 rad/s envelope).
# The end-to-end tests drive the same robot with the same tapes.
HIDDEN_PENDULUM = {
    "use_sim_time": True,
    "real_time_factor": 2.0,
    "forward_interface": "effort",
    "noise.position_rad": NOISE_RAD,
    "physics.pole.mass": TRUTH["pole_mass"],
    "physics.hinge.damping": TRUTH["hinge_damping"],
    "physics.hinge.frictionloss": TRUTH["hinge_frictionloss"],
}
TORQUE_TAPES = {
    "joints": ["hinge"],
    "forward_interface": "effort",
    "command_rate_hz": 500.0,
    "tape.kind": "multisine",
    "model": "pendulum",
    "safety.stale_after_s": 2.0,
    "envelope.hinge.origin_rad": 0.0,
    "envelope.hinge.travel_rad": 1.5,
    "envelope.hinge.max_speed_rad_s": 6.0,
    "envelope.hinge.max_torque_nm": 2.0,
}


# The same hidden pendulum as a PID position servo (trajectory controller at 250 Hz) with poor factory gains,
# for the servo tuner; a finer encoder (0.02 mrad) than the torque-driven recording's.
TUNE_RATE_HZ = 250.0
AS_FOUND = {"gains.hinge.p": 5.0, "gains.hinge.i": 0.0, "gains.hinge.d": 0.2, "gains.hinge.i_clamp": 0.0}
TUNED_PENDULUM = {
    **HIDDEN_PENDULUM,
    "forward_interface": "position",
    "command_rate_hz": TUNE_RATE_HZ,
    "publish_rate_hz": TUNE_RATE_HZ,
    "noise.position_rad": 2e-5,
    "noise.velocity_rad_s": 0.0,
    "gain_guard.p_max": 1000.0,
    "gain_guard.d_max": 50.0,
    **AS_FOUND,
}
TUNE_ENVELOPE = {
    "envelope.hinge.origin_rad": 0.0,
    "envelope.hinge.travel_rad": 0.4,
    "envelope.hinge.max_speed_rad_s": 2.0,
    "envelope.hinge.max_torque_nm": 3.0,
}
TUNE_RECORDER = {
    "joints": ["hinge"],
    "command_mode": "trajectory",
    "command_rate_hz": TUNE_RATE_HZ,
    "safety.stale_after_s": 3.0,
    "model": "pendulum",
    **TUNE_ENVELOPE,
}
TUNER = {
    "joints": ["hinge"],
    "controller": "sim_robot",
    "model": "pendulum",
    "command_rate_hz": TUNE_RATE_HZ,
    "guard.p_max": 1000.0,
    "guard.d_max": 100.0,  # looser than the controller's own: its refusal is the last line
    "goal.twin_screening": True,
    **TUNE_ENVELOPE,
}


def activate(client: RosClient, node: str, logs: Path) -> None:
    """Configure and activate a lifecycle node; RuntimeError naming the transition and where its log is."""
    # first see it in the graph (by namespace and name: `r1/tape_recorder` is `tape_recorder` in `/r1`): a
    # node's imports can take a minute on a loaded 2-core machine
    namespace, _, name = client.resolve(node).rpartition("/")
    wait_for(
        lambda: (name, namespace or "/") in client.node.get_node_names_and_namespaces(),
        180.0,
        f"{node} to start (its log: {logs})",
    )
    for transition in ("configure", "activate"):
        ok, state = client.change_state(node, transition, timeout_s=120.0)
        if not ok:
            raise RuntimeError(f"{node} did not {transition} (state {state}); see {logs}")


def record(folder: Path, real_time_factor: float) -> list[str]:
    """Record a training and a held-out multisine torque tape from the hidden pendulum; return the bags."""
    sim = NodeProcess(
        "sim_robot", "sim_robot", {**HIDDEN_PENDULUM, "real_time_factor": real_time_factor}, folder / "logs"
    )
    recorder = NodeProcess(
        "tape_recorder", "tape_recorder", {**TORQUE_TAPES, "output_dir": str(folder / "bags")}, folder / "logs"
    )
    client = RosClient("sysid_ros_demo")
    bags = []
    try:
        diagnostics = client.collect(DiagnosticArray, "/diagnostics", 1000)
        activate(client, "tape_recorder", folder / "logs")
        for seed, role in ((1, "training"), (7, "held out")):
            client.set_parameters("tape_recorder", {"tape.seed": seed})
            status = play_tape(client, diagnostics)
            bag = status_value(status, "bag")
            print(f"  {role:<9} {status.message} -> {bag}")
            if not status.message.startswith("finished"):
                raise RuntimeError(status.message)
            bags.append(bag)
    finally:
        client.close()
        recorder.stop()
        sim.stop()
    return bags


def identify_pendulum(folder: Path, training: str, held_out: str):
    """Identify mass, damping and friction loss from the bags, starting from a nominal guess."""
    problem = problem_from_dict(
        {
            "name": "pendulum",
            "model": "pendulum",
            "joints": ["hinge"],
            "training": [{"bag": training, "control": "effort"}],
            "validation": [{"bag": held_out, "control": "effort"}],
            "noise": {"position_rad": NOISE_RAD, "velocity_rad_s": 5e-3},
            "warm_start": True,
            "parameters": [
                {
                    "name": "pole_mass",
                    "kind": "body_mass",
                    "body": "pole",
                    "start": NOMINAL["pole_mass"],
                    "min": 0.2,
                    "max": 5.0,
                },
                {
                    "name": "hinge_damping",
                    "kind": "joint_damping",
                    "joint": "hinge",
                    "start": 0.0,
                    "min": 0.0,
                    "max": 1.0,
                },
                {
                    "name": "hinge_frictionloss",
                    "kind": "joint_frictionloss",
                    "joint": "hinge",
                    "start": 0.0,
                    "min": 0.0,
                    "max": 1.0,
                },
            ],
            "optimizer": {"backend": "mujoco", "max_iters": 100, "quiet": True},
        },
        folder,
    )
    result = identify(problem)
    paths = write_results(result, folder / "identified", force=True)
    print(
        f"  {'parameter':<20}{'truth':>10}{'nominal':>10}{'regression':>12}{'identified':>12}{'+-95 %':>10}{'error':>9}"
    )
    for p in result.parameters:
        truth = TRUTH[p.name]
        warm = f"{p.warm_start[0]:.4f}" if p.warm_start else "-"
        print(
            f"  {p.name:<20}{truth:>10.4f}{NOMINAL[p.name]:>10.4f}{warm:>12}{p.value[0]:>12.5f}"
            f"{p.half_width_95[0]:>10.5f}{(p.value[0] / truth - 1):>+9.2%}"
        )
    rms = result.metrics.get("validation_position_rms_rad", {})
    print(
        f"  held-out angle RMS: {', '.join(f'{j} {v * 1e3:.3f} mrad' for j, v in rms.items())} "
        f"(noise {NOISE_RAD * 1e3:.1f} mrad); report: {paths['report']}"
    )
    print(f"  verdict: {result.verdict}" + "".join(f"\n  warning: {w}" for w in result.warnings))
    return result


class TuningRig:
    """The hidden pendulum position-controlled by a PID drive with poor factory gains (sim_robot), the
    tape_recorder the tuner plays through (trajectory mode) and the servo_tuner, as processes; a client
    that hears the tuner's outcomes. The tests drive the same rig."""

    def __init__(
        self,
        folder: Path,
        real_time_factor: float = 3.0,
        sim: dict | None = None,
        recorder: dict | None = None,
        tuner: dict | None = None,
    ) -> None:
        self.folder, self.logs = folder, folder / "logs"
        self.sim_params = {**(sim or TUNED_PENDULUM), "real_time_factor": real_time_factor}
        self.recorder_params = {**(recorder or TUNE_RECORDER), "output_dir": str(folder / "bags")}
        self.tuner_params = {**(tuner or TUNER), "output_dir": str(folder / "tuner")}
        self.sim = NodeProcess("sim_robot", "sim_robot", self.sim_params, self.logs)
        self.recorder = NodeProcess("tape_recorder", "tape_recorder", self.recorder_params, self.logs)
        self.tuner = self.start_tuner()
        self.client = RosClient("sysid_ros_tuning")
        self.results: list[dict] = []
        self.client.node.create_subscription(
            String, "servo_tuner/result", lambda m: self.results.append(yaml.safe_load(m.data)), RESULT_QOS
        )
        try:
            for node in ("tape_recorder", "servo_tuner"):
                self.activate(node)
        except BaseException:  # a rig that did not come up must not leave its processes running
            self.close()
            raise

    def start_tuner(self) -> NodeProcess:
        return NodeProcess("servo_tuner", "servo_tuner", self.tuner_params, self.logs)

    def restart_tuner(self) -> None:
        """Start the servo_tuner again once the graph has forgotten the old one (a SIGKILLed node lingers for
        DDS's 20 s lease, and a service call in that window can go to the ghost and be lost), then activate."""
        wait_for(
            lambda: "servo_tuner" not in self.client.node.get_node_names(),
            120.0,
            "the old servo_tuner to leave the ROS graph",
        )
        self.tuner = self.start_tuner()
        self.activate("servo_tuner")

    def activate(self, node: str) -> None:
        activate(self.client, node, self.logs)

    def call(self, service: str):
        from std_srvs.srv import Trigger

        return self.client.call(Trigger, f"servo_tuner/{service}", Trigger.Request())

    def tune(self, timeout_s: float, show=None) -> dict:
        """Tune through the `~/tune` action, `show` called with each feedback; the outcome (as on ~/result)."""
        from .cli.tuner import tune_goal

        return tune_goal(self.client, "servo_tuner", timeout_s, timeout_s, show)[1]

    def request(self, service: str, outcome: str, timeout_s: float) -> dict:
        """Call `~/<service>` and wait for the tuner's `outcome` on ~/result; RuntimeError when refused."""
        seen = len(self.results)
        response = self.call(service)
        if not response.success:
            raise RuntimeError(response.message)
        return self.outcome(outcome, seen, timeout_s)

    def outcome(self, action: str, seen: int, timeout_s: float = 600.0) -> dict:
        return wait_for(
            lambda: next((r for r in self.results[seen:] if r.get("action") == action), None),
            timeout_s,
            f"servo_tuner's {action} outcome",
        )

    def gains(self) -> dict[str, float]:
        """The controller's gains now (the parameters the tuner sets)."""
        names = [f"gains.{j}.{g}" for j in self.tuner_params["joints"] for g in ("p", "i", "d", "i_clamp")]
        return dict(zip(names, self.client.get_parameters("sim_robot", names)))

    def close(self) -> None:
        self.client.close()
        for process in (self.tuner, self.recorder, self.sim):
            process.stop()


def tune_pendulum(folder: Path, real_time_factor: float) -> tuple[dict, dict | None]:
    """Tune the hidden pendulum's poor servo over ROS, apply the proposal and let the canary decide."""
    from .cli.tuner import feedback_printer
    from .core.tuner import load_proposal

    rig = TuningRig(folder, real_time_factor)
    try:
        tuned = rig.tune(3600.0, feedback_printer("    "))
        if not tuned.get("ok"):
            raise RuntimeError(tuned.get("message"))
        proposal = load_proposal(tuned["proposal_file"])
        model = proposal.details["hinge"]["model"]["model"]
        print(
            f"  identified by the tuner: m g l {model['gravity_sin_nm']:.3f} N m (true "
            f"{TRUTH['pole_mass'] * 9.81 * 0.5:.3f}), damping + drive {model['viscous_nm_s_rad']:.4f} N m s "
            f"(true {TRUTH['hinge_damping']}), Coulomb {model['coulomb_nm']:.4f} N m (true "
            f"{TRUTH['hinge_frictionloss']}), J {model['inertia_kg_m2']:.4f} kg m^2"
        )
        print(f"  {proposal.summary}; {tuned['seconds_of_motion']:.0f} s of motion")
        print(f"  proposal: {tuned['proposal_file']}\n  tuning report: {tuned.get('report') or '(not drawn)'}")
        before, after = tuned["as_found"], tuned["parameters"]
        print(
            f"  gains before: p {before['gains.hinge.p']:.4g}, d {before['gains.hinge.d']:.4g}; proposed: "
            f"p {after['gains.hinge.p']:.4g}, d {after['gains.hinge.d']:.4g}"
            + (" + host feed-forward" if proposal.feedforward.get("hinge") else "")
        )
        if not tuned["improved"]:
            print("  nothing to apply: the tuner keeps the gains as found")
            return tuned, None
        verdict = rig.request("apply", "canary", 600.0)
        print(
            f"  applied; canary: predicted cost ratio {verdict['predicted_cost_ratio']:.3f}, live "
            f"{verdict['live_cost_ratio']:.3f} (keep if <= {verdict['threshold']:.3f}): "
            f"{'kept' if verdict['kept'] else 'rolled back'}"
        )
        print(f"  gains on the controller now: {rig.gains()}")
        print(f"  canary report: {verdict.get('report') or '(not drawn)'}")
        return tuned, verdict
    finally:
        rig.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real-time-factor", type=float, default=3.0)
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for bags, results and logs (default: out/demo_<UTC time> here)"
    )
    args = parser.parse_args(argv)
    try:
        domain, given = user_or_own_domain()
    except ValueError as exc:
        print(f"sysid_ros demo: {exc}", file=sys.stderr)
        return 2
    folder = (args.out or Path("out") / f"demo_{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}").resolve()
    if folder.exists() and any(folder.iterdir()):
        print(f"sysid_ros demo: {folder} holds earlier output: name another --out", file=sys.stderr)
        return 2
    folder.mkdir(parents=True, exist_ok=True)
    whose = "yours" if given else "a free one; set ROS_DOMAIN_ID to choose"
    print(f"sysid_ros demo on ROS_DOMAIN_ID={domain} ({whose}); everything it writes goes to {folder}")
    print("1-2. record: sim_robot (pendulum, hidden physics) + tape_recorder, multisine torque tapes")
    training, held_out = record(folder, args.real_time_factor)
    print("3. identify: regression warm start, then mujoco.sysid")
    identify_pendulum(folder, training, held_out)
    print("4-6. tune, propose, apply, canary: servo_tuner over ROS on the same hidden pendulum, now a PID")
    print("     position drive with poor factory gains (p 5, d 0.2) and a 0.02 mrad encoder")
    tuned, _ = tune_pendulum(folder, args.real_time_factor)
    print(f"done: everything is in {folder} (bags/, identified/, tuner/, logs/). Next:")
    for line in next_steps(training, held_out, tuned["proposal_file"]):
        print(f"  {line}")
    return 0


def next_steps(training: str, held_out: str, proposal_file: str) -> list[str]:
    """The commands the demo suggests at its end, each as it runs (test_export_feedforward runs the export)."""
    # the pendulum's proposal was proven with a host feed-forward (gravity, friction, inertia) that no controller
    # parameter holds: `export` refuses it alone, and with --gains-only writes the gains and names every term left out
    return [
        f"sysid-ros identify config/identify_pendulum.yaml --train {training} --validate {held_out} "
        f"--control effort --out results/   # the torque the drive applied (the commands' stamps lag it)",
        f"sysid-ros export {proposal_file} --controller sim_robot --gains-only   # the gains as a controllers "
        f"file block; its note names the host feed-forward they were proven with",
        "README.md, 'On a robot with a ROS 2 install': the same on your robot",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
