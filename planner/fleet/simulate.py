"""Trace-driven fleet simulation: N iteration-level engines behind a router.

``simulate_fleet(requests, workers, n_workers=..., router=...) -> FleetResult``

**Engines.**  Each worker runs the decision rule of `planner.batching.scheduler.simulate` (InferMax
Algorithm 1; presets of `PRESETS`: prefill or decode priority, hybrid batches, chunked prefill under
the P limit, token budget C, KV limit M in tokens, R_max, recompute eviction LIFO, eviction-free
``-ef`` variants that reserve I + O − 1 at admission) under its `LinearBatchCost` (or `BatchTimeCost`:
`planner.fleet.costs`), in a compiled
kernel (`planner.fleet._kernel`).  With one worker and the presets' limits it reproduces
``simulate``'s schedule (per-request first-token and finish times, batch count; tests/fleet/test_fleet_engine.py).
Stretches of identical pure-decode batches (no waiting request, nothing can change the batch before
the next completion, KV exhaustion or routing instant) are run in one pass with the same arithmetic as
one by one (bit-identical to ``fuse_decodes=False``); ``simulate`` fuses its own stretches differently
(a cumulative sum), so the two agree to rounding, not bit for bit (the tests require 1e-9 s).

**Time.**  Requests are taken in arrival order (ties: input index).  Before request r (arrival a) is
routed, every worker runs all its batches that *start* before a (a batch that starts before a and
ends after it has run: its requests' state is the state after it); then the router picks a worker
and r joins the tail of that worker's waiting queue.  A worker forms its next batch at its clock
(the end of its previous batch), admitting requests whose arrival ≤ clock — exactly ``simulate``'s
rule.  A worker that has nothing to run, or cannot form a batch, sleeps until the next request is
routed to it (its clock jumps to that arrival), as ``simulate`` jumps to the next arrival.  After the
last arrival every worker runs to completion; a worker that still cannot form a batch (a request
that can never be admitted) is reported in one line.

**Routers** (deterministic; ties go to the lowest worker index; a worker whose M is below a request's
final KV I + O − 1 is never chosen):

* ``round_robin`` — the k-th arrival goes to worker k mod N (skipping ineligible workers);
* ``jsq`` — fewest requests held (waiting + running) at the routing instant;
* ``least_kv`` — fewest KV tokens held or reserved (Σ alloc) at the routing instant;
* ``aladdin`` — the placement family's online rule (`planner.placement.state.WorkerLoad.fits`,
  ``best_fit``) used per arrival.  With ô the predicted output (``predicted_output``, else the real
  one), g tokens generated so far, λ = ``strictness``: each held request has decode load
  ``k3·(I + g + λ·max(ô − g, 0)) + k2`` (M2), with k2 = tok + dn, k3 = dk, c2 = base + db of the
  worker's `LinearBatchCost`.  The load of a worker is the sum over the requests it holds; workers
  are tried most loaded first and the request goes to the first where (M2) c2 + load + its own
  load ≤ ``tpot_s``, (M3, only with ``ttft_s``) c1 + k1·(prompt tokens not yet prefilled there + I)
  ≤ ``ttft_s`` with k1 = tok + pt, c1 = base + pb (the quadratic and per-request prefill terms are
  not counted), and (M5) the KV footprint max over future decode iterations t < ô of
  Σ_j (I_j + g_j + t)[r_j > t] + I + t ≤ M with r_j = max(ô_j − g_j, 1); if no worker passes, the
  least-loaded one.  Aladdin's fleet is elastic and batches a heartbeat at a time; here the fleet
  is fixed and each request is routed on arrival.

**Groups** (class-aware routing).  With ``request_groups`` (one whole number per request, −1 = any
worker) and ``worker_groups`` (one per worker), a request of group g ≥ 0 may only go to the workers
of group g: every router above applies its rule among them (round robin keeps one turn per group,
so the k-th request of group g goes to g's workers in turn).  The caller decides the groups, e.g.
`planner.capacity.classes` pre-assigns each request to a configuration by its class's routed-rate
split; JSQ among that configuration's workers then balances the load.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from planner.errors import InfeasibleError, PlannerError
from planner.fleet.costs import cost_matrix
from planner.fleet.inputs import FleetRequests, WorkerSpec
from planner.fleet.result import FleetResult

ROUTERS = ("round_robin", "jsq", "least_kv", "aladdin")
#: Most workers one simulation takes (the kernel's per-arrival work is linear in N).
MAX_WORKERS = 100_000


def simulate_fleet(
    requests: FleetRequests,
    workers: WorkerSpec | Sequence[WorkerSpec],
    *,
    n_workers: int | None = None,
    router: str = "jsq",
    ttft_s: float | None = None,
    tpot_s: float | None = None,
    strictness: float = 0.5,
    fuse_decodes: bool = True,
    request_groups: Sequence[int] | np.ndarray | None = None,
    worker_groups: Sequence[int] | np.ndarray | None = None,
) -> FleetResult:
    """Simulate the fleet (module docstring).  ``workers``: one `WorkerSpec` repeated ``n_workers`` times,
    or a list of specs (a mixed fleet; ``n_workers`` must then be None or its length).  ``ttft_s`` /
    ``tpot_s``: the SLOs (used by the ``aladdin`` router and as the result's default SLOs).
    ``fuse_decodes``: run stretches of identical pure-decode batches in one pass (`_kernel._fused_decodes`;
    bit-identical results, tests/fleet/test_fleet_engine.py checks it); False forms every batch with the full rule.
    ``request_groups`` / ``worker_groups``: restrict each request to its group's workers (module docstring,
    Groups); give both or neither."""
    from planner.fleet._kernel import ALADDIN, JSQ, LEAST_KV, ROUND_ROBIN, run_fleet  # lazy: numba

    specs = _specs(workers, n_workers)
    if router not in ROUTERS:
        raise PlannerError(f"unknown router {router!r} (expected one of: {', '.join(ROUTERS)})")
    for name, value in (("ttft_s", ttft_s), ("tpot_s", tpot_s)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise PlannerError(f"{name} must be a positive finite number of seconds, got {value}")
    if not 0 <= strictness <= 1:
        raise PlannerError(f"strictness must be in [0, 1], got {strictness}")
    if not isinstance(requests, FleetRequests):
        raise PlannerError("requests must be a FleetRequests (arrays of arrivals and token counts)")
    resolved = [s.resolved() for s in specs]
    Q = np.array([[int(v) for v in r] for r in resolved], dtype=np.int64)
    K = cost_matrix([s.cost for s in specs])
    I, O = requests.input_tokens, requests.output_tokens
    n, N = requests.n, len(specs)
    rgroup, wgroup = _groups(request_groups, worker_groups, n, N)
    _check_servable(I, O, Q, specs)
    if request_groups is not None:
        for g in np.unique(rgroup[rgroup >= 0]):
            members = np.flatnonzero(wgroup == g)
            mine = rgroup == g
            _check_servable(I[mine], O[mine], Q[members], [specs[w] for w in members], f" of group {int(g)}",
                            np.flatnonzero(mine))
    order = np.lexsort((np.arange(n), requests.arrival_s)).astype(np.int64)
    worker_of = np.full(n, -1, np.int64)
    first, first_sched, finish = (np.full(n, np.nan) for _ in range(3))
    evictions = np.zeros(n, np.int64)
    W = np.zeros((N, 10), np.int64)
    Tm = np.zeros((N, 2))
    code = {"round_robin": ROUND_ROBIN, "jsq": JSQ, "least_kv": LEAST_KV, "aladdin": ALADDIN}[router]
    max_iterations = 50 * int((I + O).sum()) + 1000
    start = time.perf_counter()
    status, w, r = run_fleet(order, requests.arrival_s, I, O, np.maximum(requests.predicted, 1).astype(np.int64),
                             code, Q, K, float(strictness), float(ttft_s or np.inf), float(tpot_s or np.inf),
                             max_iterations, worker_of, first, first_sched, finish, evictions, W, Tm,
                             bool(fuse_decodes), rgroup, wgroup)
    wall = time.perf_counter() - start
    if status == 1:
        raise InfeasibleError(f"request {r} (I={I[r]}, O={O[r]}) fits no worker's KV limit")
    if status == 2:
        C, P, M, R = Q[w, :4]
        raise InfeasibleError(f"worker {w} ({specs[w].label}, {specs[w].scheduler}) is stuck: a request can never "
                              f"be admitted (C={C}, P={P}, M={M}, R_max={R})")
    if status == 3:
        raise PlannerError(f"worker {w} did not finish within {max_iterations:,} iterations")
    return FleetResult(
        arrival_s=requests.arrival_s, input_tokens=I, output_tokens=O, worker=worker_of, first_token_s=first,
        first_scheduled_s=first_sched, finish_s=finish, preemptions=evictions, busy_s=Tm[:, 1].copy(),
        iterations=W[:, 8].copy(), worker_labels=tuple(s.label for s in specs),
        worker_gpus=np.array([s.gpus for s in specs], dtype=np.int64), router=router,
        schedulers=tuple(s.scheduler for s in specs), cost_sources=tuple(s.cost.source for s in specs),
        slo_ttft_s=ttft_s, slo_tpot_s=tpot_s, wall_seconds=wall, source=requests.source,
    )


def _specs(workers: WorkerSpec | Sequence[WorkerSpec], n_workers: int | None) -> list[WorkerSpec]:
    if isinstance(workers, WorkerSpec):
        if n_workers is None:
            n_workers = 1
        if isinstance(n_workers, bool) or not isinstance(n_workers, (int, np.integer)) or n_workers < 1:
            raise PlannerError(f"the fleet needs at least 1 worker, got {n_workers!r}")
        if n_workers > MAX_WORKERS:
            raise PlannerError(f"at most {MAX_WORKERS:,} workers, got {n_workers:,}")
        return [workers] * int(n_workers)
    specs = list(workers)
    if not specs:
        raise PlannerError("the fleet needs at least 1 worker, got an empty list")
    if any(not isinstance(s, WorkerSpec) for s in specs):
        raise PlannerError("every worker must be a WorkerSpec")
    if n_workers is not None and n_workers != len(specs):
        raise PlannerError(f"n_workers={n_workers} but {len(specs)} worker specs were given")
    if len(specs) > MAX_WORKERS:
        raise PlannerError(f"at most {MAX_WORKERS:,} workers, got {len(specs):,}")
    return specs


def _groups(request_groups, worker_groups, n: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's (request group, worker group) arrays; −1 everywhere without groups; one-line errors."""
    if (request_groups is None) != (worker_groups is None):
        raise PlannerError("give request_groups and worker_groups together (or neither)")
    if request_groups is None:
        return np.full(n, -1, np.int64), np.full(N, -1, np.int64)
    arrays = []
    for name, values, size, low in (("request_groups", request_groups, n, -1), ("worker_groups", worker_groups, N, 0)):
        a = np.asarray(values)
        if a.shape != (size,):
            raise PlannerError(f"{name} has shape {a.shape}, expected ({size},): one per "
                               f"{'request' if size == n and name.startswith('request') else 'worker'}")
        if a.size and (not np.issubdtype(a.dtype, np.integer) or a.min() < low):
            raise PlannerError(f"{name} must hold whole numbers ≥ {low}")
        arrays.append(a.astype(np.int64))
    rgroup, wgroup = arrays
    missing = np.setdiff1d(np.unique(rgroup[rgroup >= 0]), wgroup)
    if missing.size:
        r = int(np.flatnonzero(rgroup == missing[0])[0])
        raise PlannerError(f"request {r} is in group {int(missing[0])}, which has no worker")
    return rgroup, wgroup


def _check_servable(I: np.ndarray, O: np.ndarray, Q: np.ndarray, specs: list[WorkerSpec], where: str = "",
                    ids: np.ndarray | None = None) -> None:
    """One line for a request no worker (``where``: of its group) can ever serve: its final KV (I + O − 1)
    exceeds every M, or its prompt exceeds the prefill budget min(C, P) of every non-chunked worker that
    could hold it.  ``ids``: the requests' indices in the stream (when I, O are a subset)."""
    ids = np.arange(I.size) if ids is None else ids
    need = I + O - 1
    M = Q[:, 2]
    bad = np.flatnonzero(need > M.max())
    if bad.size:
        r = int(bad[0])
        more = f" (and {bad.size - 1} more)" if bad.size > 1 else ""
        raise InfeasibleError(f"request {int(ids[r])} needs {need[r]:,} KV tokens (I+O-1) but the largest worker KV limit{where} is "
                              f"M = {int(M.max()):,}{more}")
    budget = np.where(Q[:, 6] != 0, np.iinfo(np.int64).max, np.minimum(Q[:, 0], Q[:, 1]))
    for r in np.flatnonzero(I > budget.min()):
        ok = (need[r] <= M) & (I[r] <= budget)
        if not ok.any():
            w = int(np.flatnonzero(need[r] <= M)[0])
            raise InfeasibleError(f"request {int(ids[r])}: prompt of {I[r]:,} tokens exceeds the prefill budget "
                                  f"min(C, P) = {int(budget[w]):,} of the non-chunked scheduler {specs[w].scheduler!r}{where}")
