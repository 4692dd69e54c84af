"""Fleet batch identification: many robots' bags in one job, on one machine or a Ray cluster, each result
with its provenance, and a fleet summary (median, spread, outliers, drift against an earlier run).

- `manifest`: which robots, each with its problem file and data.
- `run`: `run_fleet`, every robot through one engine, then `fleet.yaml` and `fleet.html` (`html`).
- `robot`: one robot's job (identify, write results with their `provenance`), on whichever worker.
- `engines`: `map_jobs`, serial, a local process pool or Ray (`ray_engine`); `workers`: their warm-up.
- `limits`: the memory limits (`ulimit -v`, cgroup) an engine runs under; Ray's object store sized to them.
- `statistics`: median, spread, robust-z outliers and drift over the robots identified ok.
"""

from .engines import ENGINES, map_jobs
from .manifest import Manifest, RobotJob, load_manifest
from .run import run_fleet

__all__ = ["ENGINES", "Manifest", "RobotJob", "load_manifest", "map_jobs", "run_fleet"]
