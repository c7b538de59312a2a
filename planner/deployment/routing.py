"""Routers of a request batch across heterogeneous instances (FORMULATIONS.md §5.4).

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

import time

import numpy as np

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


def local_search(problem: RoutingProblem, assignment: np.ndarray, max_rounds: int = 300,
                 deadline: float | None = None) -> np.ndarray:
    """Improve a routing by moves and swaps off the most loaded instance while the makespan drops.

    Used as the MILP's warm start (a near-optimal incumbent lets the solver stop once the bound meets it).
    Stops early (keeping the routing found so far) once ``time.perf_counter()`` passes ``deadline``.
    """
    p, fits = problem.processing_times, problem.fits
    assign = assignment.copy()
    S = p.shape[1]
    loads = np.zeros(S)
    np.add.at(loads, assign, p[np.arange(len(assign)), assign])
    for _ in range(max_rounds):
        if deadline is not None and time.perf_counter() > deadline:
            break
        top = int(np.argmax(loads))
        cmax = loads[top]
        mine = np.flatnonzero(assign == top)
        best_gain, best_move = 1e-12, None
        if mine.size and S > 1:  # move r from top to s (all r at once; first best r wins, as one by one)
            new_s = loads[None, :] + p[mine]
            new_s[~fits[mine]] = np.inf
            new_s[:, top] = np.inf
            dest = np.argmin(new_s, axis=1)
            rest = loads.copy()
            rest[top] = -np.inf
            order = np.argsort(-rest, kind="stable")
            first, second = rest[order[0]], (rest[order[1]] if S > 2 else -np.inf)
            others = np.where(dest == order[0], second, first) if S > 2 else np.zeros(len(mine))
            others = np.maximum(others, 0.0) if S > 2 else others
            new_max = np.maximum(np.maximum(loads[top] - p[mine, top], new_s[np.arange(len(mine)), dest]), others)
            gains = cmax - new_max
            k = int(np.argmax(gains))
            if gains[k] > best_gain:
                best_gain, best_move = gains[k], ("move", int(mine[k]), int(dest[k]), None)
        if best_move is None:  # swaps: r on top with q on s
            for r in mine:
                if deadline is not None and time.perf_counter() > deadline:
                    break
                for s in range(S):
                    if s == top or not fits[r, s]:
                        continue
                    qs = np.flatnonzero((assign == s) & fits[:, top])
                    if not qs.size:
                        continue
                    top_new = loads[top] - p[r, top] + p[qs, top]
                    s_new = loads[s] + p[r, s] - p[qs, s]
                    others = np.max(np.delete(loads, [top, s])) if S > 2 else 0.0
                    new_max = np.maximum(np.maximum(top_new, s_new), others)
                    k = int(np.argmin(new_max))
                    if cmax - new_max[k] > best_gain:
                        best_gain, best_move = cmax - new_max[k], ("swap", r, s, int(qs[k]))
        if best_move is None:
            break
        kind, r, s, q = best_move
        loads[top] -= p[r, top]
        loads[s] += p[r, s]
        assign[r] = s
        if kind == "swap":
            loads[s] -= p[q, s]
            loads[top] += p[q, top]
            assign[q] = top
    return assign
