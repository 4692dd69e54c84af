"""The main job on the embedded simulated robot: `make demo` (or `python -m sysid_ros.demo`).

1. start `sim_robot` (the pendulum, its true mass, damping and friction loss hidden from everything else)
   and `tape_recorder` as processes on a DDS domain of their own, on simulated time faster than real time;
2. record: play two multisine torque tapes (training, held out) inside the envelope into rosbag2 bags;
3. identify: the regression estimate, then `mujoco.sysid` from the bags; print truth vs identified;
4. tune and propose: the servo tuner's staged pipeline (identify, sweep, refine screened on a MuJoCo twin,
   verify on held-out tapes) on the simulated 3.6 kg m^2 arm shoulder with poor factory gains, in-process
   (the ROS plant and the apply/canary loop over parameter services come with the servo_tuner node).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray

from .core.identify import identify, problem_from_dict, write_results
from .nodes.client import RosClient, play_tape, status_value
from .nodes.processes import NodeProcess, isolate_ros_environment

TRUTH = {"pole_mass": 1.3, "hinge_damping": 0.08, "hinge_frictionloss": 0.05}
NOMINAL = {"pole_mass": 1.0, "hinge_damping": 0.0, "hinge_frictionloss": 0.0}
NOISE_RAD = 5e-4

# sim_robot parameters of the hidden pendulum (torque-driven, 0.5 mrad angle noise, simulated time), and the
# tape_recorder's for multisine torque tapes on it (1.6 N m peak, inside a 1.5 rad / 6 rad/s envelope).
# The end-to-end tests drive the same robot with the same tapes.
HIDDEN_PENDULUM = {"use_sim_time": True, "real_time_factor": 2.0, "forward_interface": "effort",
                   "noise.position_rad": NOISE_RAD, "physics.pole.mass": TRUTH["pole_mass"],
                   "physics.hinge.damping": TRUTH["hinge_damping"],
                   "physics.hinge.frictionloss": TRUTH["hinge_frictionloss"]}
TORQUE_TAPES = {"joints": ["hinge"], "forward_interface": "effort", "command_rate_hz": 500.0,
                "tape.kind": "multisine", "model": "pendulum", "safety.stale_after_s": 0.5,
                "envelope.hinge.origin_rad": 0.0, "envelope.hinge.travel_rad": 1.5,
                "envelope.hinge.max_speed_rad_s": 6.0, "envelope.hinge.max_torque_nm": 2.0}


def record(folder: Path, real_time_factor: float) -> list[str]:
    """Record a training and a held-out multisine torque tape from the hidden pendulum; return the bags."""
    sim = NodeProcess("sim_robot", "sim_robot", {**HIDDEN_PENDULUM, "real_time_factor": real_time_factor},
                      folder / "logs")
    recorder = NodeProcess("tape_recorder", "tape_recorder", {**TORQUE_TAPES, "output_dir": str(folder / "bags")},
                           folder / "logs")
    client = RosClient("sysid_ros_demo")
    bags = []
    try:
        diagnostics = client.collect(DiagnosticArray, "/diagnostics", 1000)
        for transition in ("configure", "activate"):
            ok, state = client.change_state("tape_recorder", transition)
            if not ok:
                raise RuntimeError(f"tape_recorder did not {transition} (state {state}); see {folder / 'logs'}")
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
    problem = problem_from_dict({
        "name": "pendulum", "model": "pendulum", "joints": ["hinge"],
        "training": [{"bag": training, "control": "effort"}], "validation": [{"bag": held_out, "control": "effort"}],
        "noise": {"position_rad": NOISE_RAD, "velocity_rad_s": 5e-3}, "warm_start": True,
        "parameters": [
            {"name": "pole_mass", "kind": "body_mass", "body": "pole", "start": NOMINAL["pole_mass"], "min": 0.2, "max": 5.0},
            {"name": "hinge_damping", "kind": "joint_damping", "joint": "hinge", "start": 0.0, "min": 0.0, "max": 1.0},
            {"name": "hinge_frictionloss", "kind": "joint_frictionloss", "joint": "hinge", "start": 0.0,
             "min": 0.0, "max": 1.0}],
        "optimizer": {"backend": "mujoco", "max_iters": 100, "quiet": True}}, folder)
    result = identify(problem)
    paths = write_results(result, folder / "identified")
    print(f"  {'parameter':<20}{'truth':>10}{'nominal':>10}{'regression':>12}{'identified':>12}{'+-95 %':>10}{'error':>9}")
    for p in result.parameters:
        truth = TRUTH[p.name]
        warm = f"{p.warm_start[0]:.4f}" if p.warm_start else "-"
        print(f"  {p.name:<20}{truth:>10.4f}{NOMINAL[p.name]:>10.4f}{warm:>12}{p.value[0]:>12.5f}"
              f"{p.half_width_95[0]:>10.5f}{(p.value[0] / truth - 1):>+9.2%}")
    rms = result.metrics.get("validation_position_rms_rad", {})
    print(f"  held-out angle RMS: {', '.join(f'{j} {v * 1e3:.3f} mrad' for j, v in rms.items())} "
          f"(noise {NOISE_RAD * 1e3:.1f} mrad); report: {paths['report']}")
    return result


def tune_shoulder(folder: Path) -> dict:
    """Tune the simulated shoulder from poor factory gains; print and write the proposal."""
    from .core.tuner import Gains, Goal, proposal, to_yaml, tune
    from .core.tuner.joints import shoulder

    joint = shoulder(gains=Gains(800.0, 80.0))
    result = tune(joint.servo, joint.plant, Goal(twin_screening=True))
    data = proposal(result)
    path = folder / "proposal_shoulder.yaml"
    path.write_text(to_yaml(data))
    model = result.identification.model
    truth = joint.truth
    print(f"  identified J {model.inertia_kg_m2:.3f} (true {truth.inertia_kg_m2}) kg m^2, b {model.viscous_nm_s_rad:.2f} "
          f"({truth.viscous_nm_s_rad}), Coulomb {model.coulomb_nm:.2f} ({truth.coulomb_nm}) N m, "
          f"gravity {model.gravity_sin_nm:.1f} ({truth.gravity_sin_nm:.1f}) N m")
    before, after = data["as_found"]["drive_parameters"], data["proposed"]["drive_parameters"]
    print(f"  gains before: p {before['gains.shoulder.p']:.0f}, d {before['gains.shoulder.d']:.1f}; "
          f"proposed: p {after['gains.shoulder.p']:.0f}, d {after['gains.shoulder.d']:.1f}"
          + (" + host feed-forward" if data["proposed"]["host_feedforward"] else ""))
    print(f"  {data['summary']}")
    seconds = data["seconds_of_motion"]
    print(f"  plant motion: {', '.join(f'{k} {v:.0f} s' for k, v in seconds.items())}; proposal: {path}")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real-time-factor", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=None, help="folder for bags, results and logs")
    args = parser.parse_args(argv)
    domain = isolate_ros_environment()
    folder = (args.out or Path(tempfile.mkdtemp(prefix="sysid_ros_demo_"))).resolve()
    print(f"sysid_ros demo on ROS_DOMAIN_ID={domain}; everything it writes goes to {folder}")
    print("1-2. record: sim_robot (pendulum, hidden physics) + tape_recorder, multisine torque tapes")
    training, held_out = record(folder, args.real_time_factor)
    print("3. identify: regression warm start, then mujoco.sysid")
    identify_pendulum(folder, training, held_out)
    print("4. tune and propose: the servo tuner on the simulated arm shoulder (poor factory gains)")
    tune_shoulder(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
