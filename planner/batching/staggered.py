"""Start-together, decode-staggered schedules: a primal heuristic for the MIP's warm start.

The Table 1 presets never leave a running request idle: when the KV cache is full they evict (or,
eviction-free, hold requests back from starting).  Under the §3.2 cost model the biases of a batch
dominate for short requests, so a schedule that prefills *every* request in one batch and then lets
some running requests **idle** (hold their KV without decoding) while others decode can be much
cheaper: one prefill batch, no refill, and as few batches as the longest request needs.

**Lazy trajectories.**  Give request i a start batch s_i (its whole prompt is prefilled there) and
a last-token batch f_i.  Decoding as late as possible — idle, holding I_i KVs, until batch
f_i − O_i + 2, then one decode per batch — holds pointwise the least KV of every trajectory with
these (s_i, f_i), so a plan (s, f) is feasible for M iff its lazy trajectories are.  `lazy_plan`
picks (s, f) with a small MIP (binary y_{i,s,f}, one memory row per batch, fewest prefill batches);
``together=True`` fixes s_i = 1 (one prefill batch, no eviction).

`staggered_schedule(problem, N, together)` turns the plan into a schedule of ≤ N batches (batches
without a token dropped); `best_staggered` tries N = `bounds.min_batches` … upwards and keeps the
cheapest schedule the independent validator accepts.  It is a heuristic for the warm start — no
optimality claim — except that when its latency meets `bounds.latency_lower_bound` it is optimal.
`single_prefill_batch_impossible` proves (exactly, or answers False) that no schedule of ≤ J
batches has a single prefill batch: the fact behind the path model's ``cut_prefill_batches``.
"""

from __future__ import annotations

import time

import numpy as np

from planner.batching.bounds import latency_lower_bound, min_batches
from planner.batching.problem import BatchingProblem
from planner.batching.schedule import Schedule
from planner.batching.validator import validate_schedule
from planner.solver import ModelBuilder, SolveOptions, SolveStatus, solve


def lazy_plan(problem: BatchingProblem, N: int, together: bool = True,
              node_limit: int = 200, time_limit: float = 30.0, threads: int | None = None,
              info: dict | None = None, solver: str = "highs") -> tuple[np.ndarray, np.ndarray] | None:
    """Start batch s_i and last-token batch f_i of every request such that the lazy trajectories fit
    M within N batches, with the fewest prefill batches; None if there is none.  A small MIP over
    binary y_{i,s,f} (s = 1 when ``together``) and up_s::

        Σ_{s,f} y_{i,s,f} = 1,   Σ_f y_{i,s,f} ≤ up_s,   Σ y·kv_i(j; s, f) ≤ M (j = 1..N),  min Σ_s up_s

    with kv_i(j; s, f) = I_i + max(0, O_i − 1 − (f − j)) for s ≤ j ≤ f, else 0 (module docstring)."""
    I, O = problem.inputs.astype(np.int64), problem.outputs.astype(np.int64)
    options = [(i, s, f) for i in range(problem.n) for s in (range(1, 2) if together else range(1, N - int(O[i]) + 2))
               for f in range(s + int(O[i]) - 1, N + 1)]
    if not options:
        return None
    req, st, fin = (np.array(col) for col in zip(*options))
    mb = ModelBuilder(f"lazy-plan-{problem.name}", "min")
    y = mb.add_binaries("y", len(options))
    up = mb.add_binaries("up", N + 1, cost=1.0)
    mb.add_constraints("one_plan", problem.n, req, y.columns, np.ones(len(options)), lower=1.0, upper=1.0)
    keys, local = np.unique(req * (N + 1) + st, return_inverse=True)
    mb.add_constraints("start_batch", keys.size, np.concatenate([local, np.arange(keys.size)]),
                       np.concatenate([y.columns, up.col(keys % (N + 1))]),
                       np.concatenate([np.ones(len(options)), -np.ones(keys.size)]), upper=0.0)
    rows, cols, vals = [], [], []
    for k, (i, s, f) in enumerate(options):
        j = np.arange(s, f + 1)
        kv = I[i] + np.maximum(0, O[i] - 1 - (f - j))
        rows.append(j - 1), cols.append(np.full(j.size, y.col(k))), vals.append(kv.astype(float))
    mb.add_constraints("lazy_memory", N, np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
                       upper=float(problem.M))
    out = solve(mb.build(), solver, SolveOptions(time_limit=time_limit, node_limit=node_limit, threads=threads))
    if info is not None:
        info["stopped_on_time"] = stopped_on_time(out)
    if out.x is None:
        return None
    if out.status == SolveStatus.INFEASIBLE:
        return None
    chosen = np.flatnonzero(np.asarray(out.x)[y.columns] > 0.5)
    start, finish = np.zeros(problem.n, np.int64), np.zeros(problem.n, np.int64)
    start[req[chosen]], finish[req[chosen]] = st[chosen], fin[chosen]
    return start, finish


def single_prefill_batch_impossible(problem: BatchingProblem, J: int, time_limit: float = 20.0,
                                    threads: int | None = None, node_limit: int | None = None,
                                    info: dict | None = None, solver: str = "highs") -> bool:
    """True only if it is *proven* that no schedule of ≤ J batches starts every request together with no
    eviction (the lazy-plan MIP with s = 1 is infeasible; C, P and R_max are relaxed).  ``node_limit``
    stops the proof attempt after that many nodes (False: nothing proven); ``info["stopped_on_time"]``
    says whether the time limit ended it."""
    I, O = problem.inputs.astype(np.int64), problem.outputs.astype(np.int64)
    if int(I.sum()) > problem.M or J < int(O.max()):
        return True
    if time_limit <= 0:  # no time to prove anything
        return False
    options = [(i, f) for i in range(problem.n) for f in range(int(O[i]), J + 1)]
    mb = ModelBuilder(f"together-{problem.name}", "min")
    y = mb.add_binaries("y", len(options))
    req = np.array([i for i, _ in options])
    mb.add_constraints("one_plan", problem.n, req, y.columns, np.ones(len(options)), lower=1.0, upper=1.0)
    rows, cols, vals = [], [], []
    for k, (i, f) in enumerate(options):
        j = np.arange(1, f + 1)
        rows.append(j - 1), cols.append(np.full(j.size, y.col(k))), vals.append((I[i] + np.maximum(0, O[i] - 1 - (f - j))).astype(float))
    mb.add_constraints("lazy_memory", J, np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
                       upper=float(problem.M))
    out = solve(mb.build(), solver, SolveOptions(time_limit=time_limit, threads=threads, node_limit=node_limit))
    if info is not None:
        info["stopped_on_time"] = stopped_on_time(out)
    return out.status == SolveStatus.INFEASIBLE


def staggered_schedule(problem: BatchingProblem, N: int, together: bool = True,
                       threads: int | None = None, time_limit: float = 30.0,
                       info: dict | None = None, solver: str = "highs") -> Schedule | None:
    """The lazy schedule of `lazy_plan` (token-free batches dropped), or None."""
    I, O = problem.inputs.astype(np.int64), problem.outputs.astype(np.int64)
    if problem.online or problem.n > problem.running_limit or N < int(O.max()):
        return None
    plan = lazy_plan(problem, N, together, threads=threads, time_limit=time_limit, info=info, solver=solver)
    if plan is None:
        return None
    start, finish = plan
    batches: list[dict[int, int]] = [{} for _ in range(N)]
    for i in range(problem.n):  # prefill at s_i, decode in the O_i − 1 batches ending at f_i
        batches[start[i] - 1][i] = int(I[i])
        for j in range(finish[i] - O[i] + 2, finish[i] + 1):
            batches[j - 1][i] = 1
    batches = [b for b in batches if b]
    return Schedule.from_batches(batches, None, tuple(r.request_id for r in problem.requests))


#: Time limit of one lazy-plan MIP (a safety net: they stop at a node limit first).
PLAN_TIME_LIMIT = 30.0
#: Node limit of one lazy-plan MIP.
PLAN_NODE_LIMIT = 200


def stopped_on_time(outcome) -> bool:
    """Whether a solver outcome ended on its (wall-clock) time limit."""
    return "time limit" in (outcome.message or "").lower()


def lazy_plan_nonzeros(problem: BatchingProblem, N: int, together: bool) -> int:
    """Nonzeros of the `lazy_memory` rows of `lazy_plan` (its bulk): Σ over options (i, s, f) of f − s + 1."""
    total = 0
    for o in problem.outputs.tolist():
        for s in (range(1, 2) if together else range(1, N - o + 2)):
            k = N - (s + o - 1) + 1  # f = s+o−1 … N
            if k > 0:
                total += k * o + k * (k - 1) // 2  # Σ_{f} (f − s + 1), f − s + 1 = o … o+k−1
    return total

#: Free-start plans (y_{i,s,f}) grow as n·N³; beyond this many requests only start-together plans are tried.
MAX_FREE_START_REQUESTS = 10


def best_staggered(problem: BatchingProblem, extra: int = 6, extra_free: int = 2,
                   threads: int | None = None, max_batches: int | None = None,
                   deadline: float | None = None, clock=None,
                   share: float | None = None, solver: str = "highs") -> tuple[Schedule, float] | None:
    """Cheapest valid lazy schedule, with its latency (the validator's replay), or None: start-together
    plans for N = N_min … N_min+extra, then (n ≤ `MAX_FREE_START_REQUESTS`) free starts for
    N = N_min … N_min+extra_free (fewer batches than the best so far only).  Stops at the combinatorial lower bound.  Deterministic: the
    plan MIPs stop at a node limit (their 30 s time limit is a safety net only).  ``threads`` must be the
    main MIP's: HiGHS fixes its thread count once per process.  ``max_batches`` caps N (the caller's
    `formulation.batch_count_bound` of a known incumbent: more batches cannot beat it).  ``deadline``
    (a `time.perf_counter` value, from the caller's time limit): no plan MIP starts after it and each
    one's time limit is cut to what is left (then the result can depend on timing).  ``clock`` (a
    `planner.core.work.WorkClock`): a plan MIP starts only if its nominal seconds
    (`effort.plan_mip_seconds` of its size at `PLAN_NODE_LIMIT` nodes) fit within ``share`` (default
    `effort.HEURISTIC_SHARE`) of the clock's limit, and is charged them; its wall time limit is what the
    clock has left (a guard: a plan MIP stopped by it sets ``clock.wall_cut``).  ``solver``: the backend of the
    plan MIPs (the run's solver, `planner.solver.solve`)."""
    from planner.batching import effort
    if problem.online:
        return None
    best = None
    floor = latency_lower_bound(problem)
    start = max(min_batches(problem), int(problem.outputs.max()))
    phases = [(True, start + extra)] + ([(False, start + extra_free)] if problem.n <= MAX_FREE_START_REQUESTS else [])
    for together, last in phases:
        if max_batches is not None:
            last = min(last, max_batches)
        for N in range(start, last + 1):
            if best is not None and N >= best[0].num_batches + (0 if together else 1):
                break
            limit = PLAN_TIME_LIMIT
            if deadline is not None:
                limit = min(limit, deadline - time.perf_counter())
                if limit <= 0:
                    return best
            if clock is not None and clock.time_limit is not None:
                nominal = effort.plan_mip_seconds(lazy_plan_nonzeros(problem, N, together), PLAN_NODE_LIMIT)
                if not clock.allows(nominal, share=effort.HEURISTIC_SHARE if share is None else share):
                    return best
                clock.charge(nominal)
                limit = min(limit, clock.wall_left())
            info: dict = {}
            schedule = staggered_schedule(problem, N, together, threads, time_limit=limit, info=info, solver=solver)
            if clock is not None and info.get("stopped_on_time"):
                clock.wall_cut = True
            if schedule is None:
                continue
            report = validate_schedule(problem, schedule)
            if report.feasible and (best is None or report.objective < best[1]):
                best = (schedule, float(report.objective))
            if best is not None and best[1] <= floor * (1 + 1e-9):
                return best
            if best is not None and not together:
                break
    return best
