"""Cost plans: heuristics, the MILP (min $/h, or max servable load when the load does not fit), validation.

`solve_cost_plan` first solves the min-cost MILP.  If it is infeasible (the inventory cannot serve
the load) it answers "with only this inventory, what is the most load I can serve?": the max-load
MILP gives the largest common scale s* of all rates, then a second MILP finds the cheapest plan
serving s*·λ.  The result then has status ``infeasible`` (for the requested load), the plan for s*,
and the message names s*.  Never a crash.
"""

from __future__ import annotations

import time

import numpy as np

from planner.core.result import Result
from planner.deployment.cost_formulation import build_cost_model, build_max_load_model
from planner.deployment.problem import CostPlanProblem
from planner.deployment.solution import CostPlanSolution
from planner.deployment.validator import validate_cost_plan
from planner.solver import SolveOptions, SolveStatus, solve

FAMILY = "deployment"


def _labels(problem: CostPlanProblem) -> tuple[str, ...]:
    return tuple(problem.option_label(k) for k in range(len(problem.options)))


def greedy_cheapest(problem: CostPlanProblem) -> CostPlanSolution | None:
    """Per model (largest rate first), add the option with the lowest $/h per req/s until served."""
    counts = np.zeros(len(problem.options), dtype=np.int64)
    free = np.array([inv.gpus for inv in problem.inventory])
    price = problem.option_price
    for m in sorted(range(len(problem.demands)), key=lambda m: -problem.demands[m].rate):
        need = problem.demands[m].rate
        ks = sorted((k for k, o in enumerate(problem.options) if o.model_index == m),
                    key=lambda k: (price[k] / problem.options[k].capacity, k))
        for k in ks:
            o = problem.options[k]
            while need > 1e-12 and free[o.gpu_index] >= o.tensor_parallel:
                counts[k] += 1
                free[o.gpu_index] -= o.tensor_parallel
                need -= o.capacity
        if need > 1e-12:
            return None
    return CostPlanSolution.from_array(counts, "greedy", _labels(problem))


def single_type(problem: CostPlanProblem) -> CostPlanSolution | None:
    """The cheapest plan that uses one GPU type for everything (each model on its cheapest TP there)."""
    best, best_cost = None, np.inf
    price = problem.option_price
    for g, inv in enumerate(problem.inventory):
        counts = np.zeros(len(problem.options), dtype=np.int64)
        used = 0
        ok = True
        for m, demand in enumerate(problem.demands):
            ks = [k for k, o in enumerate(problem.options) if o.model_index == m and o.gpu_index == g]
            if not ks:
                ok = False
                break
            per_k = {k: int(np.ceil(demand.rate / problem.options[k].capacity - 1e-9)) for k in ks}
            k = min(ks, key=lambda k: (per_k[k] * price[k], k))
            counts[k] = per_k[k]
            used += per_k[k] * problem.options[k].tensor_parallel
        if ok and used <= inv.gpus:
            cost = float(counts @ price)
            if cost < best_cost:
                best, best_cost = counts, cost
    return None if best is None else CostPlanSolution.from_array(best, "single-type", _labels(problem))


HEURISTICS = {"greedy": greedy_cheapest, "single-type": single_type}


def run_cost_heuristic(problem: CostPlanProblem, method: str) -> Result[CostPlanSolution]:
    start = time.perf_counter()
    solution = HEURISTICS[method](problem)
    seconds = time.perf_counter() - start
    if solution is None:
        return Result(FAMILY, method, "heuristic", SolveStatus.NO_SOLUTION, None, None, seconds, None,
                      message=f"{method} found no plan within the inventory")
    report = validate_cost_plan(problem, solution)
    return Result(FAMILY, method, "heuristic", SolveStatus.FEASIBLE if report.feasible else SolveStatus.ERROR,
                  report.objective, None, seconds, solution, validation=report,
                  message="" if report.feasible else f"validator: {report.summary()}")


def _options(time_limit: float | None, threads: int | None, seed: int) -> SolveOptions:
    return SolveOptions(time_limit=time_limit, threads=threads, seed=seed)


def max_servable_load(problem: CostPlanProblem, *, solver: str = "highs", time_limit: float | None = None,
                      threads: int | None = None, seed: int = 0) -> tuple[float | None, float | None, object]:
    """(s*, bound on s, outcome) of the max-load MILP."""
    model, _, scale = build_max_load_model(problem)
    outcome = solve(model, solver, _options(time_limit, threads, seed))
    if not outcome.status.has_solution:
        return None, outcome.bound, outcome
    return float(scale.values(outcome.x)[0]), outcome.bound, outcome


def _stats(model) -> dict:
    return {"variables": model.num_cols, "integer_variables": model.num_integer,
            "constraints": model.num_rows, "nonzeros": model.num_nonzeros}


def solve_cost_plan(problem: CostPlanProblem, *, solver: str = "highs", time_limit: float | None = None,
                    threads: int | None = None, seed: int = 0) -> Result[CostPlanSolution]:
    """The cost-minimal plan with its optimality gap, or the max servable load when the load does not fit."""
    build_start = time.perf_counter()
    model, n = build_cost_model(problem)
    build = time.perf_counter() - build_start
    outcome = solve(model, solver, _options(time_limit, threads, seed))
    stats = {**_stats(model), "options": len(problem.options)}
    if outcome.status.has_solution:
        solution = CostPlanSolution.from_array(n.values(outcome.x), "milp", _labels(problem))
        report = validate_cost_plan(problem, solution)
        message = outcome.message if outcome.status != SolveStatus.OPTIMAL else ""
        if not report.feasible:
            message = f"validator: {report.summary()}"
        return Result(FAMILY, "milp", outcome.solver, outcome.status, report.objective, outcome.bound,
                      outcome.seconds, solution, build, message, report, "MILP dual bound", stats)
    if outcome.status != SolveStatus.INFEASIBLE:
        return Result(FAMILY, "milp", outcome.solver, outcome.status, None, outcome.bound, outcome.seconds, None,
                      build, outcome.message or "no plan found within the limits", None, "MILP dual bound", stats)
    # The requested load does not fit: answer with the most load this inventory can serve.
    scale, scale_bound, max_outcome = max_servable_load(problem, solver=solver, time_limit=time_limit,
                                                        threads=threads, seed=seed)
    seconds = outcome.seconds + max_outcome.seconds
    if scale is None or scale <= 1e-12:
        return Result(FAMILY, "milp", outcome.solver, SolveStatus.INFEASIBLE, None, None, seconds,
                      CostPlanSolution.from_array(np.zeros(len(problem.options)), "milp", _labels(problem),
                                                  load_scale=0.0, mode="max_load"),
                      build, "no load can be served: some model has no instance option within the inventory",
                      None, "", {**stats, "max_load_scale": 0.0})
    scaled = problem.model_copy(update={"demands": tuple(
        d.model_copy(update={"rate": d.rate * scale * (1 - 1e-9)}) for d in problem.demands)})
    cheap_model, cheap_n = build_cost_model(scaled)
    cheap = solve(cheap_model, solver, _options(time_limit, threads, seed))
    seconds += cheap.seconds
    counts = cheap_n.values(cheap.x) if cheap.status.has_solution else np.zeros(len(problem.options))
    solution = CostPlanSolution.from_array(counts, "milp", _labels(problem), load_scale=scale * (1 - 1e-9),
                                           mode="max_load")
    report = validate_cost_plan(problem, solution)
    proven = "proven" if max_outcome.status == SolveStatus.OPTIMAL else f"bound {scale_bound:.4g}"
    message = (f"the load does not fit the inventory: at most {scale:.4g}x the requested rates can be served "
               f"({proven}); the plan below serves that load at {report.objective:.4g} $/h")
    return Result(FAMILY, "milp", outcome.solver, SolveStatus.INFEASIBLE, None, None, seconds, solution, build,
                  message, report, "", {**stats, "max_load_scale": scale, "max_load_scale_bound": scale_bound,
                                        "max_load_cost_per_hour": report.objective})
