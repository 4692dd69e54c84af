"""Fleet batch identification: many robots' bags in one job, on one machine or a Ray cluster, each result
with its provenance, and a fleet summary (median, spread, outliers, drift against an earlier run).

- `manifest`: which robots, each with its problem file and data.
- `run`: `run_fleet`, every robot through one engine, then `fleet.yaml` and `fleet.html` (`html`).
- `robot`: one robot's job (identify, write results with their `provenance`), on whichever worker.
- `engines`: `map_jobs`, serial, a local process pool or Ray (`ray_engine`); `workers`: their warm-up.
- `limits`: the memory limits (`ulimit -v`, cgroup) an engine runs under; Ray's object store sized to them.
- `statistics`: median, spread, robust-z outliers and drift over the robots identified ok.
"""

from .. import front_door

EXPORTS = {
    "ENGINES": ".engines",
    "GIB": ".limits",
    "Manifest": ".manifest",
    "MemoryLimit": ".limits",
    "RobotJob": ".manifest",
    "cgroup_memory_limit": ".limits",
    "data_files": ".provenance",
    "drift": ".statistics",
    "fleet_statistics": ".statistics",
    "identify_robot": ".robot",
    "load_manifest": ".manifest",
    "local_workers": ".engines",
    "longest_first": ".run",
    "map_jobs": ".engines",
    "ray_object_store_bytes": ".limits",
    "robot_problem": ".robot",
    "run_fleet": ".run",
}
"""Name -> the module that defines it, imported on first use (callers pay only for what they use)."""

__getattr__, __dir__, __all__ = front_door(__name__, EXPORTS, eager=())
