"""Routers of a request batch across heterogeneous instances (docs/formulations.md §5.4).

All requests of the batch are present at time 0 (the paper's rate = ∞ setting) and are routed in
batch order; no request completes while routing, so the completion hooks never fire and the
running lengths only grow ([R]: ``kvusage`` > 1 means queued work, as §5.4 allows).

* ``mapper`` (Alg. 2, [P*] fixes): ``w_r^s = T_r^s·exp(θ·kvusage(s))`` (Eq. 7), ``kvusage(s) =
  kv_token·Σ_running(I+Õ)/KVSize(s)`` (Eq. 8, GQA-correct bytes per token);
  ``c = argmin_s max(max_{s'≠s} L_{s'}, L_s + w_r^s)`` with the minimum initialised at +∞ (the
  printed 0 always picks instance 1) and ties broken by the smallest ``L_s + w_r^s``, then index.
* ``mb``: the mapper with θ = 2 and ``T_r^s ≡ 1`` (memory only).
* ``rr``: cyclic round robin (deterministic stand-in for the paper's "equal probability").
* ``wrr``: smooth weighted round robin; weights = estimated throughput per instance (Alg. 1 on the
  batch, tokens/s), or the instance file's ``wrr_weights`` (the paper's 4 : 1).
* ``si``: everything to the strongest instance (highest estimated throughput).

Every router skips instances whose KV cache cannot hold the request (``fits[r, s]``); a request that
fits nowhere is an input error caught when the problem is loaded.
"""

from __future__ import annotations

import numpy as np

from planner.core.work import WorkClock
from planner.deployment.problem import RoutingProblem
from planner.deployment.solution import RoutingSolution
from planner.deployment.throughput import static_throughput


def estimated_throughput(problem: RoutingProblem) -> np.ndarray:
    """Alg. 1 tokens/s of each instance on the batch (the instance alone: u = t)."""
    inputs = np.asarray(problem.inputs)
    outputs = np.asarray(problem.predicted_outputs)
    return np.array([
        static_throughput(inst.cost, kv_size=inst.kv_size_bytes, kv_per_token=problem.kv_per_token,
                          inputs=inputs, outputs=outputs, gpus_per_machine=inst.tensor_parallel,
                          max_batch=problem.max_batch).tokens_per_s_instance
        for inst in problem.instances
    ])


def _solution(problem: RoutingProblem, assignment: np.ndarray, method: str) -> RoutingSolution:
    return RoutingSolution.from_array(problem.request_ids, assignment, method,
                                      tuple(s.name for s in problem.instances))


def workload_mapper(problem: RoutingProblem, *, theta: float | None = None, memory_only: bool = False,
                    method: str = "mapper") -> RoutingSolution:
    """Alg. 2 (module docstring)."""
    theta = problem.theta if theta is None else theta
    times = np.ones_like(problem.processing_times) if memory_only else problem.processing_times
    fits = problem.fits
    kv_size = np.array([s.kv_size_bytes for s in problem.instances])
    loads = np.zeros(len(problem.instances))
    running = np.zeros(len(problem.instances))  # Σ (I + Õ) of requests routed to s
    assignment = np.empty(len(problem.request_ids), dtype=np.int64)
    for r, (i, o) in enumerate(zip(problem.inputs, problem.predicted_outputs)):
        usage = problem.kv_per_token * running / kv_size
        weight = times[r] * np.exp(theta * usage)
        candidate = loads + weight
        best, best_key = -1, (np.inf, np.inf)  # [P*] start at +∞
        for s in np.flatnonzero(fits[r]):
            others = np.max(np.delete(loads, s)) if len(loads) > 1 else 0.0
            key = (max(others, candidate[s]), candidate[s])  # [R] tie-break: smallest L_s + w
            if key < best_key:
                best, best_key = int(s), key
        assignment[r] = best
        loads[best] += weight[best]
        running[best] += i + o
    return _solution(problem, assignment, method)


def round_robin(problem: RoutingProblem) -> RoutingSolution:
    S = len(problem.instances)
    assignment = np.empty(len(problem.request_ids), dtype=np.int64)
    nxt = 0
    for r in range(len(assignment)):
        for step in range(S):
            s = (nxt + step) % S
            if problem.fits[r, s]:
                assignment[r] = s
                nxt = s + 1
                break
    return _solution(problem, assignment, "rr")


def weighted_round_robin(problem: RoutingProblem) -> RoutingSolution:
    """Smooth WRR (nginx): add each weight to its counter, pick the largest, subtract the total."""
    weights = np.asarray(problem.wrr_weights if problem.wrr_weights else estimated_throughput(problem), float)
    current = np.zeros_like(weights)
    assignment = np.empty(len(problem.request_ids), dtype=np.int64)
    for r in range(len(assignment)):
        allowed = problem.fits[r]
        current[allowed] += weights[allowed]
        masked = np.where(allowed, current, -np.inf)
        s = int(np.argmax(masked))
        current[s] -= weights[allowed].sum()
        assignment[r] = s
    return _solution(problem, assignment, "wrr")


def strongest_instance(problem: RoutingProblem) -> RoutingSolution:
    order = np.argsort(-estimated_throughput(problem), kind="stable")
    assignment = np.array([next(int(s) for s in order if problem.fits[r, s]) for r in range(len(problem.request_ids))])
    return _solution(problem, assignment, "si")


ROUTERS = {
    "rr": round_robin,
    "wrr": weighted_round_robin,
    "si": strongest_instance,
    "mb": lambda p: workload_mapper(p, theta=2.0, memory_only=True, method="mb"),
    "mapper": workload_mapper,
}


def local_search(problem: RoutingProblem, assignment: np.ndarray, max_rounds: int = 100_000,
                 clock: WorkClock | None = None, share: float = 1.0, info: dict | None = None,
                 wall_reserve: float = 0.0) -> np.ndarray:
    """Improve a routing by moves and swaps off the most loaded instance t (makespan C = L_t).

    A move (request r from t to s) or a swap (r on t with q on s) is made only when both loads it
    changes end strictly below C; among those the one whose larger new load is least, moves first,
    swaps only when no move qualifies.  Each step lowers the loads sorted in decreasing order
    lexicographically (the makespan never rises; the instances at C lose one, or C drops), so the
    search cannot cycle and the routing returned is never worse than ``assignment``.  It stops at
    a local optimum or after ``max_rounds`` steps.

    ``clock`` (a `WorkClock`): every round is charged its nominal cost (`effort.local_search_seconds`
    of the cells it scans), and no round starts unless it ends within ``share`` of the clock's time
    limit — a deterministic stop, so the routing repeats run to run (the clock's wall-clock guard
    aside, which it records; ``wall_reserve`` = wall seconds kept for the caller's later phases).
    ``info`` receives ``rounds``, ``moves``, ``swaps`` and ``budget_stop``.
    """
    from planner.deployment import effort

    p, fits = problem.processing_times, problem.fits
    assign = np.array(assignment, dtype=np.int64, copy=True)
    R, S = p.shape
    rows = np.arange(R)
    loads = np.bincount(assign, weights=p[rows, assign], minlength=S).astype(float)
    masked = np.where(fits, p, np.inf)
    moves = swaps = rounds = 0
    budget_stop = False
    for _ in range(max_rounds):
        top = int(np.argmax(loads))
        cmax = float(loads[top])
        limit = cmax * (1.0 - 1e-12)
        mine = np.flatnonzero(assign == top)
        estimate = effort.local_search_seconds(mine.size * S, 0)
        if clock is not None and not clock.allows(estimate, share=share, wall_reserve=wall_reserve):
            budget_stop = True
            break
        rounds += 1
        if mine.size == 0 or S == 1:
            if clock is not None:
                clock.charge(estimate)
            break
        new_s = loads[None, :] + masked[mine]
        new_s[:, top] = np.inf
        worst = np.maximum(new_s, (cmax - p[mine, top])[:, None])
        k = int(np.argmin(worst))
        i, s = divmod(k, S)
        if worst[i, s] < limit:
            if clock is not None:
                clock.charge(estimate)
            r = int(mine[i])
            loads[top] -= p[r, top]
            loads[s] += p[r, s]
            assign[r] = s
            moves += 1
            continue
        swap_cells = 0
        best_value, best_swap = limit, None
        for s in range(S):
            if s == top:
                continue
            qs = np.flatnonzero((assign == s) & fits[:, top])
            rs = mine[fits[mine, s]]
            if not qs.size or not rs.size:
                continue
            swap_cells += rs.size * qs.size
            new_top = cmax - p[rs, top][:, None] + p[qs, top][None, :]
            new_other = loads[s] + p[rs, s][:, None] - p[qs, s][None, :]
            pair_worst = np.maximum(new_top, new_other)
            k = int(np.argmin(pair_worst))
            a, b = divmod(k, qs.size)
            if pair_worst[a, b] < best_value:
                best_value, best_swap = float(pair_worst[a, b]), (int(rs[a]), s, int(qs[b]))
        if clock is not None:
            clock.charge(effort.local_search_seconds(mine.size * S, swap_cells))
        if best_swap is None:
            break
        r, s, q = best_swap
        loads[top] += p[q, top] - p[r, top]
        loads[s] += p[r, s] - p[q, s]
        assign[r], assign[q] = s, top
        swaps += 1
    if info is not None:
        info.update(rounds=info.get("rounds", 0) + rounds, moves=info.get("moves", 0) + moves,
                    swaps=info.get("swaps", 0) + swaps, budget_stop=bool(info.get("budget_stop")) or budget_stop)
    return assign
