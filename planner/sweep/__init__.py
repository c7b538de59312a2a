"""Resumable parameter sweeps: points → a results database, local process pool or Ray.

See `planner.sweep.engine` for the contract (what a point is, what is stored, how a re-run
skips finished points) and `planner.sweep.compare_all` for the cross-family compare harness.
"""

from planner.sweep.engine import SweepPoint, SweepSummary, run_sweep
from planner.sweep.store import ResultsStore

__all__ = ["ResultsStore", "SweepPoint", "SweepSummary", "run_sweep"]
