"""The fewest workers of one configuration whose simulated fleet meets the SLOs.

``fewest_workers(requests, spec, ...)``: simulate N = start, then double N until the fleet meets the
target, then bisect between the last failing and the first meeting N.  The target is the P-th
percentile of TTFT ≤ ``ttft_s`` and of TPOT ≤ ``tpot_s`` (`FleetResult.meets`), or, with
``attainment``, a fraction ≥ ``attainment`` of the requests meeting both (`FleetResult.meets_attainment`).

The bisection assumes that meeting the target is monotone in N.  Under a fixed router on a fixed
trace it usually is but need not be (adding a worker changes every later routing decision); every
simulated point is returned, so a caller can check that no N below the answer met the target.
``start`` (e.g. a certified lower bound on the worker count) must be ≥ 1; N never exceeds
``max_workers`` (a `PlannerError` when even that many do not meet the target).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import PlannerError
from planner.fleet.inputs import FleetRequests, WorkerSpec
from planner.fleet.result import FleetResult
from planner.fleet.simulate import MAX_WORKERS, simulate_fleet


@dataclass(frozen=True)
class WorkerSearch:
    workers: int  # the answer: fewest N found meeting the target
    result: FleetResult  # its simulation
    tried: dict[int, bool]  # every simulated N → met the target
    percentile_ttft: dict[int, float]
    percentile_tpot: dict[int, float]


def fewest_workers(requests: FleetRequests, spec: WorkerSpec, *, ttft_s: float, tpot_s: float,
                   percentile: float = 99.0, attainment: float | None = None, router: str = "jsq",
                   start: int = 1, max_workers: int = 4096, warmup_s: float = 0.0,
                   strictness: float = 0.5) -> WorkerSearch:
    """See the module docstring."""
    if not isinstance(start, int) or start < 1:
        raise PlannerError(f"start must be a whole number ≥ 1, got {start!r}")
    if not 1 <= max_workers <= MAX_WORKERS:
        raise PlannerError(f"max_workers must be between 1 and {MAX_WORKERS:,}, got {max_workers}")
    tried: dict[int, bool] = {}
    p_ttft: dict[int, float] = {}
    p_tpot: dict[int, float] = {}
    results: dict[int, FleetResult] = {}

    def ok(n: int) -> bool:
        res = simulate_fleet(requests, spec, n_workers=n, router=router, ttft_s=ttft_s, tpot_s=tpot_s,
                             strictness=strictness)
        met = (res.meets_attainment(attainment, warmup_s=warmup_s) if attainment is not None
               else res.meets(percentile=percentile, warmup_s=warmup_s))
        tried[n], results[n] = met, res
        p_ttft[n] = res.percentile("ttft_s", percentile, warmup_s)
        p_tpot[n] = res.percentile("tpot_s", percentile, warmup_s)
        return met

    hi = min(start, max_workers)
    lo = 0
    while not ok(hi):
        if hi >= max_workers:
            raise PlannerError(f"{max_workers} workers of {spec.label} do not meet the SLOs under router {router}")
        lo, hi = hi, min(2 * hi, max_workers)
    while hi - lo > 1 and (lo + hi) // 2 >= start:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return WorkerSearch(hi, results[hi], tried, p_ttft, p_tpot)
