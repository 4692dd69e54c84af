"""Fleet identification of 12 pendulums (each its own hidden physics) serially, on a local process pool and
on Ray, side by side in one run; every engine's start-up reported apart; peak memory per worker.

Each robot records what a fleet would identify it from: three 10 s multisine tapes (the project's default
tape length) back to back for training, 30 s, and a fourth, 10 s, held out; 500 Hz, 0.5 mrad noise.

Every engine runs the same manifest into a fresh folder (no resume). `run_fleet` reports each engine's
start-up apart from its jobs: the workers' start (spawning processes, `ray.init`), their imports and
the compile of the shared model (the serial engine does the same in this process). The ratios compare
the wall time after start-up ("work": the jobs and the fleet summary), and then the whole run with its
start-up. Repetitions alternate the engines so that load on the shared cores hits all alike; medians are
compared. Goal: Ray within 10 % of the pool, both >= 1.7x serial on 2 cores. Parallel speed-up is only
meaningful on a quiet machine: the load average is printed before and after every run.

    .venv/bin/python bench/bench_fleet.py [--robots 12] [--workers 2] [--reps 1] [--train-s 30] [--val-s 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sysid_ros.core.bags.arrays_io import save_npz  # noqa: E402
from sysid_ros.core.fleet import run_fleet  # noqa: E402
from sysid_ros.core.identify.synthetic import EFFORT_TOPIC, record_pendulum  # noqa: E402

ENGINES = ("serial", "local", "ray")
PROBLEM = {
    "model": "pendulum", "joints": ["hinge"], "training": ["placeholder"],
    "noise": {"position_rad": 5e-4, "velocity_rad_s": 5e-3},
    "parameters": [
        {"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0, "start": 1.0},
        {"name": "hinge_damping", "kind": "joint_damping", "joint": "hinge", "min": 0.0, "max": 1.0, "start": 0.02},
        {"name": "hinge_frictionloss", "kind": "joint_frictionloss", "joint": "hinge", "min": 0.0, "max": 1.0,
         "start": 0.02}]}


def make_fleet(folder: Path, robots: int, train_s: float = 30.0, val_s: float = 10.0
               ) -> tuple[Path, dict[str, dict[str, float]]]:
    """Training and held-out .npz per robot (500 Hz, 0.5 mrad noise); the manifest; the truths."""
    rng = np.random.default_rng(0)
    entries, truths = [], {}
    for k in range(robots):
        name = f"p{k:02d}"
        truth = {"pole_mass": rng.uniform(1.0, 1.6), "hinge_damping": rng.uniform(0.04, 0.12),
                 "hinge_frictionloss": rng.uniform(0.03, 0.07)}
        physics = {"pole.mass": truth["pole_mass"], "hinge.damping": truth["hinge_damping"],
                   "hinge.frictionloss": truth["hinge_frictionloss"]}
        for role, seconds, seed in (("train", train_s, 2 * k + 1), ("val", val_s, 2 * k + 2)):
            samples, commands = record_pendulum(physics, seed, seconds)
            save_npz(folder / f"{name}_{role}.npz", samples, {EFFORT_TOPIC: commands})
        entries.append({"name": name, "train": [f"{name}_train.npz"], "validate": [f"{name}_val.npz"]})
        truths[name] = truth
    (folder / "problem.yaml").write_text(yaml.safe_dump(PROBLEM))
    manifest = folder / "manifest.yaml"
    manifest.write_text(yaml.safe_dump({"problem": "problem.yaml", "robots": entries}, sort_keys=False))
    return manifest, truths


def peak_per_worker(doc: dict) -> dict[int, float]:
    """Each worker process's peak resident memory (MB), from the provenance of the robots it ran."""
    peaks: dict[int, float] = {}
    for r in doc["robots"].values():
        prov = r["provenance"]
        peaks[prov["pid"]] = max(peaks.get(prov["pid"], 0.0), prov.get("peak_rss_mb", 0.0))
    return peaks


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", type=int, default=12)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--train-s", type=float, default=30.0, help="seconds of training record per robot")
    ap.add_argument("--val-s", type=float, default=10.0, help="seconds of held-out record per robot")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench_fleet_"))
    t0 = time.perf_counter()
    manifest, truths = make_fleet(root, args.robots, args.train_s, args.val_s)
    print(f"{args.robots} pendulum problems ({args.train_s:g} s training + {args.val_s:g} s held out at 500 Hz) "
          f"written in {time.perf_counter() - t0:.1f} s ({root}); {os.cpu_count()} cores", flush=True)

    total: dict[str, list[float]] = {e: [] for e in ENGINES}
    startup: dict[str, list[float]] = {e: [] for e in ENGINES}
    after: dict[str, list[float]] = {e: [] for e in ENGINES}
    docs: dict[str, dict] = {}
    for rep in range(args.reps):
        for engine in ENGINES if rep % 2 == 0 else ENGINES[::-1]:
            before = load()
            t = time.perf_counter()
            docs[engine] = run_fleet(manifest, root / f"out_{engine}_{rep}", engine=engine, workers=args.workers)
            total[engine].append(time.perf_counter() - t)
            startup[engine].append(docs[engine]["fleet"]["startup"]["seconds"])
            after[engine].append(total[engine][-1] - docs[engine]["fleet"]["seconds"])
            print(f"  rep {rep} {engine:<6} {total[engine][-1]:7.2f} s, of which start-up {startup[engine][-1]:5.2f} s"
                  f"   (load average 1/5/15 min before {before}, after {load()})", flush=True)

    med = {e: statistics.median(total[e]) for e in ENGINES}
    up = {e: statistics.median(startup[e]) for e in ENGINES}
    work = {e: statistics.median(a - b for a, b in zip(total[e], startup[e])) for e in ENGINES}
    print(f"\n== {args.robots} robots, {args.workers} workers, {args.reps} repetition(s), medians; "
          f"load average now {load()}")
    print(f"{'engine':<8} {'start-up':>9} {'work':>8} {'work vs serial':>15} {'total':>8} {'total vs serial':>16}")
    for e in ENGINES:
        print(f"{e:<8} {up[e]:8.2f}s {work[e]:7.2f}s {work['serial'] / work[e]:14.2f}x {med[e]:7.2f}s "
              f"{med['serial'] / med[e]:15.2f}x")
    print(f"after start-up: ray / local pool {work['ray'] / work['local']:.3f} (goal <= 1.10); local pool "
          f"{work['serial'] / work['local']:.2f}x and ray {work['serial'] / work['ray']:.2f}x serial (goal >= 1.7x)")
    cpu = {e: statistics.mean(r["provenance"]["cpu_seconds"] for r in docs[e]["robots"].values()) for e in ENGINES}
    print("CPU seconds per job (all threads of its worker; unlike wall time, little moved by load): " +
          ", ".join(f"{e} {cpu[e]:.2f}" for e in ENGINES))
    # the serial run is not one core: mujoco.sysid rolls batched points out on one thread per core, and BLAS
    # has threads of its own; no pool can beat the CPU its jobs need spread over its workers
    n, cores = len(docs["serial"]["robots"]), min(args.workers, os.cpu_count() or 1)
    print(f"the serial run kept {cpu['serial'] * n / work['serial']:.2f} cores busy on average; with the pool "
          f"workers' CPU per job, {cores} free cores allow at best {work['serial'] / (cpu['local'] * n / cores):.2f}x "
          f"serial (cores x the serial run's wall per job / the CPU per job; meaningful on a quiet machine)")
    print("parent after the jobs (fleet.yaml, fleet.html): " + ", ".join(
        f"{e} {statistics.median(after[e]):.2f} s" for e in ENGINES))
    for engine, doc in docs.items():
        peaks = peak_per_worker(doc)
        at_start = sum(w.get("models_compiled", 0) for w in doc["fleet"]["startup"]["workers"])
        in_jobs = sum(bool(r["provenance"].get("model_compiled")) for r in doc["robots"].values())
        ready = ", ".join(f"{w['cpu_seconds']:.1f}" for w in doc["fleet"]["startup"]["workers"]) + (
            " (this process so far, with writing the bags)" if engine == "serial" else "")
        cores = ", ".join(str(w["cores"]) for w in doc["fleet"]["startup"]["workers"])
        print(f"{engine:<8} peak RSS per worker: {', '.join(f'{v:.0f} MB' for v in peaks.values())}; rollout "
              f"threads per worker {cores}; CPU seconds to get ready {ready}; model compiled {at_start} time(s) "
              f"at start-up and {in_jobs} in {len(doc['robots'])} jobs on {len(peaks)} worker(s)")
    # the engines must agree exactly (same code, same data) and the results must hold their truths
    ref = docs["serial"]["robots"]
    worst_diff, covered, count = 0.0, 0, 0
    for engine, doc in docs.items():
        for name, r in doc["robots"].items():
            assert r["status"] == "ok", (engine, name, r.get("reason"))
            for p, d in r["parameters"].items():
                worst_diff = max(worst_diff, abs(d["value"] - ref[name]["parameters"][p]["value"]))
                if engine == "serial":
                    count += 1
                    covered += abs(d["value"] - truths[name][p]) <= d["half_width_95"]
    print(f"largest difference between engines: {worst_diff:.3g}; truths inside the 95 % intervals: "
          f"{covered}/{count}")


if __name__ == "__main__":
    main()
