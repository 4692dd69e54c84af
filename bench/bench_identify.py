"""Wall time of the whole `identify()` against raw `mujoco.sysid` on the same arrays, side by side, and the
accuracy of each against the hidden truth.

Raw = a careful hand-written mujoco.sysid run (docs/facts.md): integer-ns shift, held control on the grid,
`<joint>_qpos` signals, absolute-value modifiers, default residual, `optimize` + `calculate_intervals`.
Runs alternate (raw, identify, raw, ...) so that load on the shared cores hits both alike; medians are
compared (CPU time beside them: less swayed by the other processes on the shared cores). Goals: identify
<= 1.05x raw on the pendulum and the 3-link arm, <= 0.7x on the iiwa (issue 13). Both sides roll out with
the library's default threads (one MjData per CPU); `identify` runs BLAS on one thread (threadpoolctl),
raw at numpy's default; on the iiwa a third row runs raw with one BLAS thread too, and a fourth
identify without its held-out joint torque check (a stage raw has nothing like). Each run also
reports its parameter points (one rollout of every segment each) and the wall time per point: the
whole-run ratio depends on the optimiser's path (warm start, residual scaling, stopping rule), the
per-point time on the overhead around the rollouts (identify's includes its fixed stages: start-state
noise, offset scan, warm start).

    .venv/bin/python bench/bench_identify.py [--reps 5] [--arm] [--iiwa]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from mujoco import sysid

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from support.synthetic import ARM3_GAINS, multisine, record_effort, record_position
from sysid_ros.core.bags import load_npz, save_npz
from sysid_ros.core.identify import identify, problem_from_dict, quiet_output
from sysid_ros.core.sim import FeedbackNoise, SimRobot, load_spec

PENDULUM_TRUTH = {"pole_mass": 1.3, "hinge_damping": 0.08, "hinge_frictionloss": 0.05}
ARM_TRUTH = {
    "link1_mass": 2.2,
    "link2_mass": 1.1,
    "link3_mass": 0.6,
    "shoulder_damping": 0.6,
    "elbow_damping": 0.25,
    "wrist_damping": 0.12,
}


def pendulum_data(path: Path) -> Path:
    """10 s, 500 Hz, five sines 0.2-3 Hz at 2.5 N m peak; 0.5 mrad and 5 mrad/s feedback noise."""
    robot = SimRobot(
        "pendulum",
        physics={"pole.mass": 1.3, "hinge.damping": 0.08, "hinge.frictionloss": 0.05},
        noise=FeedbackNoise(position_rad=5e-4, velocity_rad_s=5e-3),
        seed=1,
        start_time_ns=1_700_000_000_123_456_789,
    )
    t = np.arange(0, 10.0 + 1e-9, 0.002)
    u = multisine(t, [0.2, 0.7, 1.3, 2.1, 3.0], 2.5, seed=1)
    samples, commands = record_effort(robot, lambda ts: [u[int(round(ts / 0.002))]], 10.0)
    save_npz(path, samples, {"/effort_controller/commands": commands})
    return path


def arm_data(path: Path) -> Path:
    robot = SimRobot(
        "arm3",
        physics={k.replace("_", ".", 1): v for k, v in ARM_TRUTH.items()},
        noise=FeedbackNoise(position_rad=2e-4, velocity_rad_s=2e-3),
        seed=1,
        start_time_ns=5_000_000_017,
    )
    t = np.arange(0, 6.0 + 1e-9, 0.002)
    sp = np.column_stack(
        [a * multisine(t, [0.3, 0.7, 1.1, 1.7, 2.3], 1.0, seed=10 + j) for j, a in enumerate([0.8, 1.0, 1.2])]
    )
    save_npz(path, record_position(robot, lambda ts: sp[int(round(ts / 0.002))], 6.0, ARM3_GAINS))
    return path


def raw_pendulum(path: Path) -> dict[str, float]:
    """mujoco.sysid by hand on the same file: the docs/facts.md recipe, nothing from sysid_ros but the file reader."""
    samples, commands, _ = load_npz(path)
    cmd = commands["/effort_controller/commands"]
    spec = load_spec("pendulum")
    model = spec.compile()
    dt_ns = int(round(model.opt.timestep * 1e9))
    t0 = int(samples.time_ns[0])
    n = int((samples.time_ns[-1] - t0) // dt_ns) + 1
    grid = t0 + np.arange(n, dtype=np.int64) * dt_ns
    idx = np.searchsorted(cmd.time_ns, grid, side="right") - 1
    control = sysid.TimeSeries.from_control_names(np.arange(n) * dt_ns * 1e-9, cmd.values[idx], model)
    times = (samples.time_ns - t0).astype(np.float64) * 1e-9
    sensordata = sysid.TimeSeries.from_names(
        times, samples.position, model, names=[("hinge_qpos", sysid.SignalType.MjStateQPos)]
    )
    state = sysid.create_initial_state(model, samples.position[0], samples.velocity[0])
    ms = sysid.ModelSequences("pendulum", spec, "run", state, control, sensordata, allow_missing_sensors=True)
    body = spec.body("pole")
    m0, i0 = float(body.mass), np.array(body.inertia)

    def mass(s, p):
        s.body("pole").mass = p.value[0]
        s.body("pole").inertia = i0 * (p.value[0] / m0)

    params = sysid.ParameterDict()
    params.add(sysid.Parameter("pole_mass", 1.0, 0.2, 5.0, modifier=mass))
    params.add(
        sysid.Parameter(
            "hinge_damping", 0.02, 0.0, 1.0, modifier=lambda s, p: s.joint("hinge").damping.__setitem__(0, p.value[0])
        )
    )
    params.add(
        sysid.Parameter(
            "hinge_frictionloss",
            0.02,
            0.0,
            1.0,
            modifier=lambda s, p: setattr(s.joint("hinge"), "frictionloss", p.value[0]),
        )
    )
    residual_fn = counting(sysid.build_residual_fn(models_sequences=[ms]))
    opt, result = sysid.optimize(params, residual_fn, optimizer="mujoco", verbose=False, max_iters=100)
    res, _, _ = residual_fn(result.x, opt)
    sysid.calculate_intervals(res, result.jac)
    return {**{k: float(opt[k].value[0]) for k in PENDULUM_TRUTH}, "points": residual_fn.points}


def counting(fn):
    """Count the parameter points evaluated (each one rollout of every segment), independent of load."""

    def wrapped(x, params, **kw):
        wrapped.points += 1 if x.ndim == 1 else x.shape[1]
        return fn(x, params, **kw)

    wrapped.points = 0
    return wrapped


def pendulum_problem(path: Path, initial_state: str):
    return problem_from_dict(
        {
            "model": "pendulum",
            "joints": ["hinge"],
            "training": [str(path)],
            "initial_state": initial_state,
            "noise": {"position_rad": 5e-4},
            "parameters": [
                {"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0, "start": 1.0},
                {
                    "name": "hinge_damping",
                    "kind": "joint_damping",
                    "joint": "hinge",
                    "min": 0.0,
                    "max": 1.0,
                    "start": 0.02,
                },
                {
                    "name": "hinge_frictionloss",
                    "kind": "joint_frictionloss",
                    "joint": "hinge",
                    "min": 0.0,
                    "max": 1.0,
                    "start": 0.02,
                },
            ],
        }
    )


def raw_windows(
    path: Path,
    spec,
    joints: list[str],
    masses: dict[str, tuple[float, float, float]],
    dampings: dict[str, tuple[float, float, float]],
    max_iters: int = 50,
) -> dict[str, float]:
    """An arm by hand: 0.25 s windows from the measured state, default residual (recompiles per window, per-window
    norm). `masses` / `dampings`: target -> (start, min, max); parameters are named `<target>_mass|_damping`."""
    samples, _, _ = load_npz(path)
    samples = samples.select(joints)
    model = spec.compile()
    dt_ns = int(round(model.opt.timestep * 1e9))
    states, controls, sensors, names = [], [], [], []
    t = samples.time_ns
    starts = np.searchsorted(t, t[0] + np.arange(0, int(t[-1] - t[0]), 250_000_000, dtype=np.int64))
    for k, (a, b) in enumerate(zip(starts, list(starts[1:]) + [len(t) - 1])):
        b += 1
        t0 = int(t[a])
        n = int((t[b - 1] - t0) // dt_ns) + 1
        grid = t0 + np.arange(n, dtype=np.int64) * dt_ns
        idx = np.searchsorted(t, grid, side="right") - 1
        controls.append(sysid.TimeSeries.from_control_names(np.arange(n) * dt_ns * 1e-9, samples.effort[idx], model))
        sensors.append(
            sysid.TimeSeries.from_names(
                (t[a:b] - t0) * 1e-9,
                samples.position[a:b],
                model,
                names=[(f"{j}_qpos", sysid.SignalType.MjStateQPos) for j in joints],
            )
        )
        states.append(sysid.create_initial_state(model, samples.position[a], samples.velocity[a]))
        names.append(f"w{k}")
    ms = sysid.ModelSequences("arm", spec, names, states, controls, sensors, allow_missing_sensors=True)
    params = sysid.ParameterDict()
    for b, (start, lo, hi) in masses.items():
        body = spec.body(b)
        m0, i0 = float(body.mass), np.array(body.inertia)
        params.add(
            sysid.Parameter(
                f"{b}_mass",
                start,
                lo,
                hi,
                modifier=lambda s, p, b=b, m0=m0, i0=i0: (
                    setattr(s.body(b), "mass", p.value[0]),
                    setattr(s.body(b), "inertia", i0 * (p.value[0] / m0)),
                ),
            )
        )
    for j, (start, lo, hi) in dampings.items():
        params.add(
            sysid.Parameter(
                f"{j}_damping", start, lo, hi, modifier=lambda s, p, j=j: s.joint(j).damping.__setitem__(0, p.value[0])
            )
        )
    residual_fn = counting(sysid.build_residual_fn(models_sequences=[ms]))
    opt, result = sysid.optimize(params, residual_fn, optimizer="mujoco", verbose=False, max_iters=max_iters)
    res, _, _ = residual_fn(result.x, opt)
    sysid.calculate_intervals(res, result.jac)
    return {**{k: float(opt[k].value[0]) for k in opt.keys()}, "points": residual_fn.points}


def raw_arm(path: Path) -> dict[str, float]:
    return raw_windows(
        path,
        load_spec("arm3"),
        ["shoulder", "elbow", "wrist"],
        {"link1": (2.0, 0.05, 10.0), "link2": (1.2, 0.05, 10.0), "link3": (0.5, 0.05, 10.0)},
        {"shoulder": (0.5, 0.0, 3.0), "elbow": (0.3, 0.0, 3.0), "wrist": (0.1, 0.0, 3.0)},
    )


def arm_problem(path: Path):
    return problem_from_dict(
        {
            "model": "arm3",
            "joints": ["shoulder", "elbow", "wrist"],
            "training": [{"npz": str(path), "control": "effort"}],
            "segment_s": 0.25,
            "initial_state": "measured",
            "noise": {"position_rad": 2e-4},
            "warm_start": False,
            "optimizer": {"max_iters": 50},
            "parameters": [
                {"name": f"{b}_mass", "kind": "body_mass", "body": b, "min": 0.05, "max": 10.0}
                for b in ("link1", "link2", "link3")
            ]
            + [
                {"name": f"{j}_damping", "kind": "joint_damping", "joint": j, "min": 0.0, "max": 3.0}
                for j in ("shoulder", "elbow", "wrist")
            ],
        }
    )


def iiwa_data(folder: Path) -> tuple[Path, Path]:
    """The iiwa with a hidden 0.8 kg payload and joint damping (the model file: 0.5 kg, 0.5 N m s/rad), PID
    tracking of multisine setpoints; 0.2 mrad position noise, exact velocity (test_identify_iiwa_bags)."""
    from support.synthetic import iiwa_setpoints, record_iiwa
    from sysid_ros.core.identify import IIWA_JOINTS, Payload, iiwa_mjcf

    model = iiwa_mjcf(folder / "iiwa.xml", payload=Payload(0.5))
    hidden = {"payload.mass": 0.8, **{f"{j}.damping": d for j, d in zip(IIWA_JOINTS, IIWA_DAMPING)}}
    robot = SimRobot(
        str(model),
        physics=hidden,
        noise=FeedbackNoise(position_rad=2e-4),
        seed=1,
        initial_positions=list(iiwa_setpoints(1, 4.0)[0]),
    )
    return model, save_npz(folder / "iiwa.npz", record_iiwa(robot, 1, 4.0))


IIWA_DAMPING = (0.9, 0.7, 0.6, 0.5, 0.35, 0.25, 0.15)
IIWA_TRUTH = {
    **{f"lbr_iiwa_joint_{k + 1}_damping": d for k, d in enumerate(IIWA_DAMPING)},
    "payload_mass": 0.8,
    "flange_sum": 1.1,
}


def iiwa_problem(model: Path, path: Path):
    """The problem as test_identify_iiwa_bags writes it: defaults everywhere but window, noise and parameters."""
    from sysid_ros.core.identify import IIWA_JOINTS

    return problem_from_dict(
        {
            "model": str(model),
            "joints": list(IIWA_JOINTS),
            "training": [str(path)],
            "segment_s": 0.25,
            "noise": {"position_rad": 2e-4},
            "parameters": [
                {"name": f"{j}_damping", "kind": "joint_damping", "joint": j, "min": 0.0, "max": 3.0}
                for j in IIWA_JOINTS
            ]
            + [
                {"name": "payload_mass", "kind": "body_mass", "body": "payload", "min": 0.05, "max": 3.0},
                {
                    "name": "lbr_iiwa_link_7_mass",
                    "kind": "body_mass",
                    "body": "lbr_iiwa_link_7",
                    "min": 0.01,
                    "max": 2.0,
                },
            ],
        }
    )


def raw_iiwa(model: Path, path: Path) -> dict[str, float]:
    from sysid_ros.core.identify import IIWA_JOINTS

    out = raw_windows(
        path,
        load_spec(str(model)),
        list(IIWA_JOINTS),
        {"payload": (0.5, 0.05, 3.0), "lbr_iiwa_link_7": (0.3, 0.01, 2.0)},
        {j: (0.5, 0.0, 3.0) for j in IIWA_JOINTS},
    )
    return {**out, "flange_sum": out["payload_mass"] + out["lbr_iiwa_link_7_mass"]}


def one_blas_thread(fn):
    """Raw with BLAS limited as `identify` limits it during its run: what is left of the ratio is the pipeline's."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return fn()


def without_torque_check(fn):
    """`identify` with its held-out joint torque check (the friction regression, in every arm result) left out:
    shows that stage's share of the time, which raw has no counterpart of."""
    from sysid_ros.core.identify import pipeline

    check = pipeline._torque_check
    pipeline._torque_check = lambda *args, **kwargs: {}
    try:
        return fn()
    finally:
        pipeline._torque_check = check


def timed(fn):
    t, c = time.perf_counter(), time.process_time()
    with quiet_output():
        out = fn()
    return time.perf_counter() - t, time.process_time() - c, out


def compare(title: str, truth: dict[str, float], runs: dict[str, callable], reps: int) -> None:
    times: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    values: dict[str, dict[str, float]] = {}
    for _ in range(reps):
        for name, fn in runs.items():
            dt, dc, out = timed(fn)
            times[name].append(dt)
            cpu[name].append(dc)
            values[name] = (
                out
                if isinstance(out, dict)
                else {**{p.name: p.value[0] for p in out.parameters}, "points": out.metrics["parameter_points"]}
            )
            if "flange_sum" in truth and "flange_sum" not in values[name]:
                values[name]["flange_sum"] = values[name]["payload_mass"] + values[name]["lbr_iiwa_link_7_mass"]
    base = statistics.median(times["raw mujoco.sysid"])
    cpu_base = statistics.median(cpu["raw mujoco.sysid"])
    print(f"\n== {title} ({reps} alternating repetitions, median wall time; CPU time of all threads beside it)")
    for name, ts in times.items():
        med, cmed = statistics.median(ts), statistics.median(cpu[name])
        print(
            f"{name:34s} {med:7.3f} s   {med / base:5.2f}x raw   (min {min(ts):.3f}, max {max(ts):.3f})"
            f"   CPU {cmed:6.3f} s {cmed / cpu_base:5.2f}x"
            f"   {values[name]['points']:4d} parameter points, {1e3 * med / values[name]['points']:5.1f} ms each"
        )
    print(f"\n{'parameter':20s} {'truth':>9s} " + " ".join(f"{n[:24]:>26s}" for n in runs))
    for p, v in truth.items():
        cells = " ".join(f"{values[n][p]:12.6g} ({(values[n][p] / v - 1) * 100:+8.4f} %)" for n in runs)
        print(f"{p:20s} {v:9.4g} {cells}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--arm", action="store_true", help="also the 3-link arm from 0.25 s windows (slower)")
    ap.add_argument(
        "--iiwa", action="store_true", help="also the 7-joint iiwa with a hidden payload (slowest; needs pybullet)"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.iiwa:
            model, data = iiwa_data(Path(tmp))
            problem = iiwa_problem(model, data)
            compare(
                "KUKA iiwa, 4 s at 500 Hz, 16 windows of 0.25 s, hidden payload",
                IIWA_TRUTH,
                {
                    "raw mujoco.sysid": lambda: raw_iiwa(model, data),
                    "identify (defaults)": lambda: identify(problem),
                    "raw, one BLAS thread (as identify)": lambda: one_blas_thread(lambda: raw_iiwa(model, data)),
                    "identify without the torque check": lambda: without_torque_check(lambda: identify(problem)),
                },
                args.reps,
            )
        path = pendulum_data(Path(tmp) / "pendulum.npz")
        measured, estimated = pendulum_problem(path, "measured"), pendulum_problem(path, "estimate")
        compare(
            "pendulum, 10 s at 500 Hz, 0.5 mrad",
            PENDULUM_TRUTH,
            {
                "raw mujoco.sysid": lambda: raw_pendulum(path),
                "identify (measured start)": lambda: identify(measured),
                "identify (estimated start)": lambda: identify(estimated),
            },
            args.reps,
        )
        if args.arm:
            arm = arm_data(Path(tmp) / "arm.npz")
            problem = arm_problem(arm)
            compare(
                "3-link arm, 6 s, 24 windows of 0.25 s",
                ARM_TRUTH,
                {"raw mujoco.sysid": lambda: raw_arm(arm), "identify (cached compiles)": lambda: identify(problem)},
                max(1, args.reps // 3),
            )


if __name__ == "__main__":
    main()
