"""Fleet batch identification: many robots' bags in one job, on one machine or a Ray cluster, each result
with its provenance, and a fleet summary (median, spread, outliers, drift against an earlier run)."""

from .engines import ENGINES, map_jobs
from .manifest import Manifest, RobotJob, load_manifest
from .run import run_fleet

__all__ = ["ENGINES", "Manifest", "RobotJob", "load_manifest", "map_jobs", "run_fleet"]
