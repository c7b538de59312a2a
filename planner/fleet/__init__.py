"""Trace-driven fleet simulator: N iteration-level engines (the batching family's Algorithm 1) behind a
router, on one cost model per worker.  See `planner.fleet.simulate` for the semantics.

Public API::

    from planner.fleet import FleetRequests, WorkerSpec, LinearBatchCost, simulate_fleet
    requests = FleetRequests.from_trace(path, "azure", window_s=3600, max_total_tokens=4096)
    spec = WorkerSpec.from_aladdin(llm, WorkerConfig(gpu=gpu, tensor_parallel=2), cost, scheduler="sarathi")
    spec = WorkerSpec.from_batchtime(llm, WorkerConfig(gpu=gpu, tensor_parallel=2), batchtime_model)  # or this
    result = simulate_fleet(requests, spec, n_workers=8, router="jsq", ttft_s=1.0, tpot_s=0.05)
    result.summary(); result.meets(percentile=99); result.to_frame()
    fewest_workers(requests, spec, ttft_s=1.0, tpot_s=0.05, start=bound).workers
    # class-aware routing: request r only reaches the workers w with worker_groups[w] == request_groups[r]
    simulate_fleet(requests, [a100, a100, h100], router="jsq", request_groups=groups, worker_groups=[0, 0, 1])
"""

from planner.fleet.costs import BatchTimeCost, LinearBatchCost
from planner.fleet.inputs import FleetRequests, WorkerSpec
from planner.fleet.result import FleetResult
from planner.fleet.search import WorkerSearch, fewest_workers
from planner.fleet.simulate import ROUTERS, simulate_fleet

__all__ = ["BatchTimeCost", "FleetRequests", "FleetResult", "LinearBatchCost", "ROUTERS", "WorkerSearch", "WorkerSpec",
           "fewest_workers", "simulate_fleet"]
