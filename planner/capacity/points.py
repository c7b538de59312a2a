"""One capacity point: the fewest workers of one configuration that hold the steady-state load.

**The load at arrival rate λ (a nested steady-state snapshot).**  The fleet must hold, at any
instant, every request that is decoding.  We take one snapshot of a Poisson stream in steady
state and place it with the placement family (decode-only mode: every request in the snapshot is
placed anew, as a planner may do):

1. a *master* stream: Poisson arrivals at the largest rate of the grid, λ_max, over the horizon
   H = (longest output of the distribution) × t_atgt, with lengths from the workload distribution
   (seeded, `poisson_workload`), and an independent uniform u_i per request;
2. the stream at rate λ keeps the requests with u_i < λ/λ_max (a thinned Poisson process of rate
   λ is a Poisson process of rate λ);
3. the snapshot at time H holds the kept requests still decoding at H, a request being assumed to
   decode at the SLO pace, one token per t_atgt (the slowest pace the SLO allows, so the longest
   a request can stay): request i is present when a_i + o_i·t_atgt > H, with g_i = ⌊(H − a_i)/t_atgt⌋
   tokens generated.  It is placed with context I_i + g_i and predicted remaining output
   ô_i − g_i, or, when the prediction is already passed, the Alg. 2 re-prediction
   E[o | o > g_i] − g_i.

Because every rate thins the same master stream, **the snapshot at λ is a subset of the snapshot
at λ' > λ**, and placement feasibility is closed under removing requests, so the optimal worker
count is non-decreasing in λ (and independent of the GPU type, so GPU types are compared on the
same requests).  A time-limited MIP or a heuristic may miss the optimum; `planner.capacity.run`
then restricts the plan of a higher rate to the lower rate's requests, an actual plan checked by
the independent validator, so the reported counts stay monotone without touching any number.

**What the count guarantees.**  ``bound_workers`` is a proof that no placement of this snapshot
uses fewer workers: the solver's dual bound when the MIP ran, else the combinatorial lower bound
of `planner.placement.bounds` (ATGT/KV volume, Martello–Toth L2).

**What a point reports.**  Besides the counts: ``solver`` (the engine of the kept plan: ``highs``
for the MIP, ``heuristic`` for best-fit), ``validation`` (the independent validator's verdict on
the kept plan, `ValidationReport.to_dict`: its ``objective`` is the recounted number of workers)
and ``seconds``, the point's wall time.

**Exact where tractable.**  Snapshots of at most ``exact_max_requests`` requests are solved by the
placement MIP (`solve_placement`, time-limited, HiGHS with one thread per point); larger ones use
best-fit (the constraint-aware heuristic) with the lower bound beside it.  Best-fit is always run
too, for the heuristic-vs-optimum gap.

TTFT is not a constraint of the snapshot (decode-only); it is checked per configuration: the
prefill of one request of the distribution's 99th-percentile input, k1·I + c1, must meet it.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from planner.core.types import GPUSpec, LLMSpec, Request, SLOClass, SLOSet, WorkerConfig
from planner.costmodels.models import AladdinCostModel
from planner.errors import PlannerError
from planner.placement.bounds import lower_bound
from planner.placement.problem import PlacementOptions, PlacementProblem
from planner.placement.solution import PlacementSolution
from planner.placement.solve import run_heuristic, solve_placement
from planner.placement.validator import validate_placement
from planner.workloads.lengths import LengthDistribution
from planner.workloads.streams import poisson_workload


def master_horizon_s(dist: LengthDistribution, atgt_s: float, cap: int) -> float:
    """H: the longest a request of the distribution can decode at the SLO pace (s)."""
    longest = max(b.output_quantiles[-1] for b in dist.bins)
    return float(min(longest, cap)) * atgt_s


def snapshot_requests(
    dist: LengthDistribution, *, rate: float, rate_max: float, atgt_s: float, cap: int, seed: int
) -> tuple[Request, ...]:
    """The requests decoding at time H in the stream of rate ``rate`` (see the module docstring)."""
    if not 0 < rate <= rate_max:
        raise PlannerError(f"rate {rate} must be in (0, {rate_max}]")
    horizon = master_horizon_s(dist, atgt_s, cap)
    master = poisson_workload(dist, rate=rate_max, duration_s=horizon, seed=seed, max_total_tokens=cap, prefix="q")
    thin = np.random.default_rng([seed, 7]).random(len(master))
    keep: list[Request] = []
    for request, u in zip(master.requests, thin):
        if u >= rate / rate_max:
            continue
        elapsed = horizon - request.arrival_s
        if request.arrival_s + request.output_tokens * atgt_s <= horizon:
            continue  # finished before the snapshot
        generated = min(int(math.floor(elapsed / atgt_s)), request.output_tokens - 1)
        remaining_prediction = request.predicted_output_tokens - generated
        if remaining_prediction < 1:
            remaining_prediction = math.ceil(dist.conditional_mean_output(request.input_tokens, generated) - generated)
        keep.append(request.model_copy(update={
            "arrival_s": 0.0,
            "input_tokens": request.input_tokens + generated,
            "output_tokens": request.output_tokens - generated,
            "predicted_output_tokens": max(int(remaining_prediction), 1),
        }))
    return tuple(keep)


def point_problem(params: dict[str, Any]) -> PlacementProblem:
    """The placement problem of one capacity point from its JSON parameters."""
    model = LLMSpec.model_validate(params["model"])
    gpu = GPUSpec.model_validate(params["gpu"])
    cost = AladdinCostModel.model_validate(params["cost_model"])
    dist = LengthDistribution.model_validate(params["distribution"])
    requests = snapshot_requests(dist, rate=params["rate"], rate_max=params["rate_max"], atgt_s=params["atgt_s"],
                                 cap=model.max_context_tokens, seed=params["seed"])
    if not requests:
        raise PlannerError(f"rate {params['rate']}: the snapshot holds no request")
    return PlacementProblem(
        name=f"capacity:{gpu.name}:tp{params['tensor_parallel']}:rate{params['rate']:g}",
        model=model, worker=WorkerConfig(gpu=gpu, tensor_parallel=params["tensor_parallel"]), cost=cost,
        slos=SLOSet(classes={"default": SLOClass(ttft_s=params["ttft_s"], atgt_s=params["atgt_s"])}),
        requests=requests,
        options=PlacementOptions(mode="decode_only", strictness=params["strictness"],
                                 kv_headroom=params["kv_headroom"]),
    )


def solve_capacity_point(params: dict[str, Any]) -> dict[str, Any]:
    """Sweep function of `planner capacity`: minimal workers at one (GPU, TP, rate)."""
    start = time.perf_counter()
    problem = point_problem(params)
    n = problem.num_requests
    bound = lower_bound(problem.arrays)
    heuristic = run_heuristic(problem, "best_fit", seed=params["seed"], bound=bound)
    if heuristic.solution is None:
        raise PlannerError(f"{problem.name}: best-fit found no plan ({heuristic.message})")
    plan, note = heuristic, ""
    if heuristic.objective <= bound.value:  # type: ignore[operator]
        note = "best-fit meets the lower bound: optimal without the MIP"
    elif n <= params["exact_max_requests"]:
        try:
            exact = solve_placement(problem, solver="highs", time_limit=params["time_limit_s"], threads=1,
                                    seed=params["seed"], diagnose=False)
        except Exception as exc:  # solver-layer trouble: keep the heuristic plan and say why
            exact, note = None, f"MIP failed ({type(exc).__name__}: {exc}); best-fit plan kept"
        if exact is not None and exact.solution is not None:
            plan, note = exact, exact.message
        elif exact is not None:
            note = f"MIP: {exact.status.value} {exact.message}; best-fit plan kept"
    else:
        note = f"{n} requests > exact_max_requests={params['exact_max_requests']}: best-fit + lower bound"
    report = plan.validation or validate_placement(problem, plan.solution)  # type: ignore[arg-type]
    if not report.feasible:
        raise PlannerError(f"{problem.name}: validator rejects the {plan.method} plan: {report.summary()}")
    solution: PlacementSolution = plan.solution  # type: ignore[assignment]
    workers = int(solution.workers_used)
    bound_workers = max(int(plan.bound if plan.bound is not None else bound.value), bound.value)
    return {
        "gpu": params["gpu"]["name"],
        "tensor_parallel": params["tensor_parallel"],
        "rate": params["rate"],
        "requests": n,
        "method": plan.method,
        "solver": plan.solver,
        "status": plan.status.value,
        "workers": workers,
        "bound_workers": min(bound_workers, workers),
        "bound_source": plan.bound_source or bound.source,
        "best_fit_workers": int(heuristic.objective),  # type: ignore[arg-type]
        "seconds": round(time.perf_counter() - start, 4),
        "note": note,
        "validation": report.to_dict(),
        "assignment": dict(zip(solution.request_ids, solution.assignment)),
    }
