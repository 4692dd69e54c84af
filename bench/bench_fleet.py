"""Fleet identification of 12 pendulums (each its own hidden physics) serially, on a local process pool and
on Ray, side by side in one run; Ray's start-up reported separately; peak memory per worker.

Each engine runs the same manifest into a fresh folder (no resume). Ray is started before its timed run
(`start_ray`) so that its start-up is measured on its own; the pool's time includes starting its workers
(spawn + imports), as a user pays it. Repetitions alternate the engines so that load on the shared cores
hits all alike; medians are compared. Goal: Ray within 10 % of the pool, both >= 1.7x serial on 2 cores.

    .venv/bin/python bench/bench_fleet.py [--robots 12] [--workers 2] [--reps 1]
"""

from __future__ import annotations

import argparse
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
from sysid_ros.core.fleet.engines import start_ray  # noqa: E402
from sysid_ros.core.identify.synthetic import EFFORT_TOPIC, record_pendulum  # noqa: E402

PROBLEM = {
    "model": "pendulum", "joints": ["hinge"], "training": ["placeholder"],
    "noise": {"position_rad": 5e-4, "velocity_rad_s": 5e-3},
    "parameters": [
        {"name": "pole_mass", "kind": "body_mass", "body": "pole", "min": 0.2, "max": 5.0, "start": 1.0},
        {"name": "hinge_damping", "kind": "joint_damping", "joint": "hinge", "min": 0.0, "max": 1.0, "start": 0.02},
        {"name": "hinge_frictionloss", "kind": "joint_frictionloss", "joint": "hinge", "min": 0.0, "max": 1.0,
         "start": 0.02}]}


def make_fleet(folder: Path, robots: int) -> tuple[Path, dict[str, dict[str, float]]]:
    """10 s training and 5 s held-out .npz per robot (500 Hz, 0.5 mrad noise); the manifest; the truths."""
    rng = np.random.default_rng(0)
    entries, truths = [], {}
    for k in range(robots):
        name = f"p{k:02d}"
        truth = {"pole_mass": rng.uniform(1.0, 1.6), "hinge_damping": rng.uniform(0.04, 0.12),
                 "hinge_frictionloss": rng.uniform(0.03, 0.07)}
        physics = {"pole.mass": truth["pole_mass"], "hinge.damping": truth["hinge_damping"],
                   "hinge.frictionloss": truth["hinge_frictionloss"]}
        for role, seconds, seed in (("train", 10.0, 2 * k + 1), ("val", 5.0, 2 * k + 2)):
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", type=int, default=12)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reps", type=int, default=1)
    args = ap.parse_args()
    import ray

    root = Path(tempfile.mkdtemp(prefix="bench_fleet_"))
    t0 = time.perf_counter()
    manifest, truths = make_fleet(root, args.robots)
    print(f"{args.robots} pendulum problems written in {time.perf_counter() - t0:.1f} s ({root})")

    times: dict[str, list[float]] = {"serial": [], "local": [], "ray": []}
    startup: list[float] = []
    docs: dict[str, dict] = {}
    for rep in range(args.reps):
        order = ["serial", "local", "ray"] if rep % 2 == 0 else ["ray", "local", "serial"]
        for engine in order:
            out = root / f"out_{engine}_{rep}"
            if engine == "ray":
                t = time.perf_counter()
                start_ray(args.workers)
                ray.get(ray.remote(lambda: 0).remote())  # the first task: a worker is up
                startup.append(time.perf_counter() - t)
            t = time.perf_counter()
            docs[engine] = run_fleet(manifest, out, engine=engine, workers=args.workers)
            times[engine].append(time.perf_counter() - t)
            if engine == "ray":
                ray.shutdown()
            print(f"  rep {rep} {engine:<6} {times[engine][-1]:7.2f} s", flush=True)

    serial = statistics.median(times["serial"])
    print(f"\n== {args.robots} robots, {args.workers} workers, {args.reps} repetition(s), median wall time")
    for engine, ts in times.items():
        med = statistics.median(ts)
        print(f"{engine:<8} {med:7.2f} s   {serial / med:5.2f}x serial   (min {min(ts):.2f}, max {max(ts):.2f})")
    pool, on_ray = statistics.median(times["local"]), statistics.median(times["ray"])
    print(f"ray / local pool: {on_ray / pool:.3f} (goal <= 1.10); local pool {serial / pool:.2f}x and ray "
          f"{serial / on_ray:.2f}x serial (goal >= 1.7x)")
    print(f"ray start-up (init + first task), not in the times above: median {statistics.median(startup):.2f} s; "
          f"ray including it: {serial / (on_ray + statistics.median(startup)):.2f}x serial")
    for engine, doc in docs.items():
        peaks = peak_per_worker(doc)
        compiled = sum(bool(r["provenance"].get("model_compiled")) for r in doc["robots"].values())
        print(f"{engine:<8} peak RSS per worker: {', '.join(f'{v:.0f} MB' for v in peaks.values())}; "
              f"model compiled {compiled} time(s) for {len(doc['robots'])} robots on {len(peaks)} worker(s)")
    # the engines must agree exactly (same code, same data) and the results must hold their truths
    ref = docs["serial"]["robots"]
    worst_diff, covered, total = 0.0, 0, 0
    for engine, doc in docs.items():
        for name, r in doc["robots"].items():
            assert r["status"] == "ok", (engine, name, r.get("reason"))
            for p, d in r["parameters"].items():
                worst_diff = max(worst_diff, abs(d["value"] - ref[name]["parameters"][p]["value"]))
                if engine == "serial":
                    total += 1
                    covered += abs(d["value"] - truths[name][p]) <= d["half_width_95"]
    print(f"largest difference between engines: {worst_diff:.3g}; truths inside the 95 % intervals: "
          f"{covered}/{total}")


if __name__ == "__main__":
    main()
