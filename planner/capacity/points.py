"""One capacity point: how many workers of one configuration serve arrival rate λ.

Three numbers per (configuration, rate), each relative to the configuration's Aladdin cost model:

1. **The answer** — the fewest workers whose *simulated* fleet meets the criterion (P-th percentile
   TTFT and TPOT within the SLOs, or an attainment fraction) on a seeded Poisson stream
   (`point_requests`): the fleet simulator `planner.fleet` (the batching family's iteration-level
   engine — the scenario's preset, chunked prefill, KV limit, recompute preemption — on every worker,
   behind the scenario's router), searched by `planner.fleet.fewest_workers` from the bound upwards
   (doubling, then bisection).  Requests arriving in the warm-up are simulated but not measured.
2. **The bound** — `planner.capacity.bound.instance_bound` on the measured requests: no scheduling
   policy on fewer workers of this configuration serves these requests meeting the criterion under
   this cost model.  When the answer equals the bound, the answer is proven fewest (status
   ``optimal``); `steady_state_bound` (λ·E[…] from the distribution) is reported beside it.
3. **The snapshot** (optional, ``simulation.snapshot``) — Aladdin's placement of a steady-state
   snapshot, described below.  It is a decode-only packing of one instant, not a fleet answer, and
   is shown for comparison only.

**Common random numbers.**  Every rate thins one master stream (rate λ_max, the scenario's window):
request i is kept at rate λ when u_i < λ/λ_max.  The stream at λ is then a Poisson stream of rate λ
and a subset of the stream at every higher rate, and every configuration sees the same requests.

**The snapshot at arrival rate λ (a nested steady-state snapshot).**  The fleet must hold, at any
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

from planner.capacity.bound import instance_bound, steady_state_bound
from planner.core.contract import RunOptions
from planner.core.types import GPUSpec, LLMSpec, PlannedRequest, SLOClass, SLOSet, WorkerConfig
from planner.costmodels.models import AladdinCostModel
from planner.errors import PlannerError
from planner.fleet import FleetRequests, WorkerSpec, fewest_workers, simulate_fleet
from planner.fleet.result import FleetResult
from planner.placement.bounds import lower_bound
from planner.placement.problem import PlacementOptions, PlacementProblem
from planner.placement.solution import PlacementSolution
from planner.placement.pipeline import PlacementKnobs, run_heuristic, solve_placement
from planner.placement.validator import validate_placement
from planner.workloads.lengths import LengthDistribution
from planner.workloads.streams import poisson_workload


def master_horizon_s(dist: LengthDistribution, atgt_s: float, cap: int) -> float:
    """H: the longest a request of the distribution can decode at the SLO pace (s)."""
    longest = max(b.output_quantiles[-1] for b in dist.bins)
    return float(min(longest, cap)) * atgt_s


def snapshot_requests(
    dist: LengthDistribution, *, rate: float, rate_max: float, atgt_s: float, cap: int, seed: int
) -> tuple[PlannedRequest, ...]:
    """The requests decoding at time H in the stream of rate ``rate`` (see the module docstring)."""
    if not 0 < rate <= rate_max:
        raise PlannerError(f"rate {rate} must be in (0, {rate_max}]")
    horizon = master_horizon_s(dist, atgt_s, cap)
    master = poisson_workload(dist, rate=rate_max, duration_s=horizon, seed=seed, max_total_tokens=cap, prefix="q")
    thin = np.random.default_rng([seed, 7]).random(len(master))
    keep: list[PlannedRequest] = []
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


def solve_snapshot(params: dict[str, Any]) -> dict[str, Any]:
    """The snapshot placement of one point (module docstring, 3): minimal workers for one instant."""
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
            exact = solve_placement(problem, RunOptions(solver=params.get("solver", "highs"), time_limit=params["time_limit_s"],
                                                        threads=1, seed=params["seed"]), PlacementKnobs(diagnose=False))
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


# ---------------------------------------------------------------------------------------------
# the simulated answer and the certified bound


def point_requests(params: dict[str, Any]) -> FleetRequests:
    """The seeded stream of one point: the master stream at ``rate_max`` over ``window_s`` thinned to
    ``rate`` (module docstring, common random numbers)."""
    rate, rate_max = params["rate"], params["rate_max"]
    if not 0 < rate <= rate_max:
        raise PlannerError(f"rate {rate} must be in (0, {rate_max}]")
    dist = LengthDistribution.model_validate(params["distribution"])
    model = LLMSpec.model_validate(params["model"])
    master = poisson_workload(dist, rate=rate_max, duration_s=params["window_s"], seed=params["seed"],
                              max_total_tokens=model.max_context_tokens, prefix="s")
    keep = np.random.default_rng([params["seed"], 11]).random(len(master)) < rate / rate_max
    if not keep.any():
        raise PlannerError(f"rate {rate:g}: no arrival in the {params['window_s']:g} s window")
    return FleetRequests(master.arrival_s[keep], master.input_tokens[keep], master.output_tokens[keep],
                         master.predicted_output_tokens[keep],
                         f"Poisson {rate:g} req/s × {params['window_s']:g} s, {dist.name} (seed {params['seed']})")


def point_worker(params: dict[str, Any]) -> tuple[WorkerSpec, AladdinCostModel]:
    """The worker of one point (`WorkerSpec.from_aladdin`: KV limit as placement computes it)."""
    model = LLMSpec.model_validate(params["model"])
    gpu = GPUSpec.model_validate(params["gpu"])
    cost = AladdinCostModel.model_validate(params["cost_model"])
    worker = WorkerConfig(gpu=gpu, tensor_parallel=params["tensor_parallel"])
    spec = WorkerSpec.from_aladdin(model, worker, cost, scheduler=params["scheduler"],
                                   kv_headroom=params["kv_headroom"], source=params.get("cost_model_path"))
    return spec, cost


def _criterion(params: dict[str, Any]) -> tuple[str, float]:
    """(criterion, alpha) of `instance_bound` for the scenario's percentile or attainment."""
    if params.get("attainment") is not None:
        return "attainment", float(params["attainment"])
    return "percentile", float(params["percentile"]) / 100.0


def simulate_point(params: dict[str, Any], workers: int) -> FleetResult:
    """The point's stream on ``workers`` workers (the simulation behind the answer)."""
    spec, _ = point_worker(params)
    return simulate_fleet(point_requests(params), spec, n_workers=workers, router=params["router"],
                          ttft_s=params["ttft_s"], tpot_s=params["atgt_s"], strictness=params["strictness"])


def meets(params: dict[str, Any], result: FleetResult) -> bool:
    """Does a simulated fleet meet the scenario's criterion (measured requests only)?"""
    if params.get("attainment") is not None:
        return bool(result.meets_attainment(params["attainment"], warmup_s=params["warmup_s"]))
    return bool(result.meets(percentile=params["percentile"], warmup_s=params["warmup_s"]))


class BoundViolation(PlannerError):
    """A simulated fleet met the criterion with fewer workers than the certified bound allows: the bound,
    the simulator or the cost model's use disagree — a defect, never a result."""


def _check_bound(bound_workers: int, tried: dict[int, bool], params: dict[str, Any]) -> None:
    met = sorted(n for n, ok in tried.items() if ok and n < bound_workers)
    if met:
        raise BoundViolation(f"{params['gpu']['name']} TP {params['tensor_parallel']} at {params['rate']:g} req/s: "
                             f"{met[0]} simulated workers meet the criterion but the certified bound says at least "
                             f"{bound_workers}; please report this (a bound or simulator defect)")


def criterion_check(params: dict[str, Any], result: FleetResult, workers: int) -> dict[str, Any]:
    """Recount the criterion from the per-request times (first token, finish) with numpy alone — not
    through `FleetResult.meets` — as the answer's independent check: ``feasible`` and the worker count."""
    arrival = np.asarray(result.arrival_s, float)
    first = np.asarray(result.first_token_s, float)
    finish = np.asarray(result.finish_s, float)
    out = np.asarray(result.output_tokens, float)
    keep = arrival >= params["warmup_s"]
    ttft = (first - arrival)[keep]
    many = keep & (out >= 2)
    tpot = (finish - first)[many] / (out[many] - 1)
    violations = []
    if params.get("attainment") is not None:
        ok_t = (first - arrival) <= params["ttft_s"] + 1e-12
        ok_d = np.ones_like(ok_t)
        ok_d[out >= 2] = (finish - first)[out >= 2] / (out[out >= 2] - 1) <= params["atgt_s"] + 1e-12
        got = float((ok_t & ok_d)[keep].mean())
        if got < params["attainment"]:
            violations.append({"where": "attainment", "value": got, "limit": params["attainment"]})
    else:
        q = params["percentile"]
        for name, values, limit in (("TTFT", ttft, params["ttft_s"]), ("TPOT", tpot, params["atgt_s"])):
            if values.size and float(np.percentile(values, q)) > limit + 1e-12:
                violations.append({"where": f"P{q:g} {name}", "value": float(np.percentile(values, q)),
                                   "limit": limit})
    return {"feasible": not violations, "objective": int(workers), "violations": violations,
            "checked": "criterion recounted from per-request first-token and finish times"}


def solve_capacity_point(params: dict[str, Any]) -> dict[str, Any]:
    """Sweep function of `planner capacity`: bound, simulated answer (and snapshot) at one (GPU, TP, rate)."""
    start = time.perf_counter()
    requests = point_requests(params)
    spec, cost = point_worker(params)
    ttft_s, tpot_s, warmup_s = params["ttft_s"], params["atgt_s"], params["warmup_s"]
    measured = requests.arrival_s >= warmup_s
    if not measured.any():
        raise PlannerError(f"rate {params['rate']:g}: no request arrives after the {warmup_s:g} s warm-up")
    criterion, alpha = _criterion(params)
    bound = instance_bound(requests.arrival_s[measured], requests.input_tokens[measured],
                           requests.output_tokens[measured], cost, spec.M, ttft_s, tpot_s,
                           alpha=alpha, criterion=criterion)
    steady = steady_state_bound(LengthDistribution.model_validate(params["distribution"]), params["rate"], cost,
                                spec.M, ttft_s, tpot_s, alpha=alpha, criterion=criterion, sample_size=50_000,
                                seed=params["seed"], max_total_tokens=params["model"]["max_context_tokens"])
    if not bound.feasible:
        raise PlannerError(f"no number of workers meets the criterion: {bound.reason} {bound.relative_to}")
    # start one below the bound: that fleet must fail (the bound is valid), which `_check_bound` verifies
    search = fewest_workers(requests, spec, ttft_s=ttft_s, tpot_s=tpot_s, percentile=params["percentile"] or 99.0,
                            attainment=params.get("attainment"), router=params["router"],
                            start=max(1, bound.workers - 1),
                            warmup_s=warmup_s, strictness=params["strictness"])
    res = search.result
    pct = params["percentile"] or 99.0
    summary = {
        "requests": int(len(requests.arrival_s)),
        "measured_requests": int(measured.sum()),
        "workers": int(search.workers),
        "bound_workers": int(bound.workers),
        "bound_real": float(bound.workers_real),
        "bound_binding": bound.binding,
        "steady_bound_workers": steady.workers,
        "steady_bound_real": float(steady.workers_real) if steady.feasible else None,
        "tried": {str(n): bool(ok) for n, ok in sorted(search.tried.items())},
        "curve": {str(n): [float(search.percentile_ttft[n]), float(search.percentile_tpot[n])]
                  for n in sorted(search.tried)},
        "p_ttft_s": float(res.percentile("ttft_s", pct, warmup_s)),
        "p_tpot_s": float(res.percentile("tpot_s", pct, warmup_s)),
        "attainment": float(res.attainment(warmup_s=warmup_s)),
        "utilisation": float(np.mean(res.utilisation)),
        "bound": bound.to_dict(),
    }
    _check_bound(bound.workers, search.tried, params)
    summary["check"] = criterion_check(params, res, search.workers)
    snapshot = None
    if params.get("snapshot", True):
        try:
            snapshot = solve_snapshot(params)
        except PlannerError as exc:
            snapshot = {"error": str(exc)}
    return {
        "gpu": params["gpu"]["name"],
        "tensor_parallel": params["tensor_parallel"],
        "rate": params["rate"],
        **summary,
        "seconds": round(time.perf_counter() - start, 4),
        "snapshot": snapshot,
    }
