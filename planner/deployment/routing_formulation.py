"""Exact makespan routing: R||Cmax with KV limits (the yardstick for the routers of §5.4).

Data: processing time ``p_{rs}`` = Eq. 6's per-request time of request r on instance s (at Eq. 5's
batch size), ``fits_{rs}`` = request r alone fits in the KV cache of s (``kv_token·(I_r+Õ_r) ≤ KVSize(s)``).

* ``x_{rs} ∈ {0,1}`` for the pairs that fit (pairs that do not fit get no column: the KV limit);
  ``C ≥ 0`` the makespan.
* assign (per request):  ``Σ_s x_{rs} = 1``
* makespan (per instance):  ``Σ_r p_{rs}·x_{rs} − C ≤ 0``
* symmetry (per pair of identical consecutive instances s, s+1):  ``Σ_r p_{rs}x_{rs} ≥ Σ_r p_{r,s+1}x_{r,s+1}``
  (identical = same p column and fits column; any optimum can be permuted to satisfy it)
* objective:  ``min C``
"""

from __future__ import annotations

import numpy as np

from planner.deployment.problem import RoutingProblem
from planner.solver import LinearModel, ModelBuilder, VarBlock


def pair_index(problem: RoutingProblem) -> tuple[np.ndarray, np.ndarray]:
    """(request, instance) of every pair that fits, in request-major order."""
    r, s = np.nonzero(problem.fits)
    return r, s


def define_assignment(builder: ModelBuilder, problem: RoutingProblem, pairs: tuple[np.ndarray, np.ndarray]) -> VarBlock:
    """Assignment (rows ``assign``): ``Σ_s x_{rs} = 1`` per request, over the instances whose KV cache fits
    it (Eq. 5's KV limit: a pair that does not fit has no column)."""
    r, _ = pairs
    x = builder.add_binaries("x", len(r))
    R = len(problem.request_ids)
    builder.add_constraints("assign", R, r, x.columns, np.ones(len(r)), lower=1.0, upper=1.0,
                            label=lambda k: f"assign[request={problem.request_ids[k]}]")
    return x


def define_makespan(builder: ModelBuilder, problem: RoutingProblem, pairs, x: VarBlock) -> VarBlock:
    """Makespan (rows ``makespan``, objective ``min C``): ``Σ_r p_{rs}·x_{rs} − C ≤ 0`` per instance, with
    ``p_{rs}`` Eq. 6's per-request time of r on s."""
    r, s = pairs
    S = len(problem.instances)
    upper = float(problem.processing_times.max(axis=1).sum())
    cmax = builder.add_variables("makespan", 1, lower=0.0, upper=upper, cost=1.0)
    rows = np.concatenate([s, np.arange(S)])
    cols = np.concatenate([x.columns, np.full(S, int(cmax.col(0)))])
    vals = np.concatenate([problem.processing_times[r, s], -np.ones(S)])
    builder.add_constraints("makespan", S, rows, cols, vals, upper=0.0,
                            label=lambda k: f"makespan[instance={problem.instances[k].name}]")
    return cmax


def identical_successors(problem: RoutingProblem) -> list[int]:
    """The instances s whose successor s+1 is identical to s (same p column and fits column)."""
    p, fits = problem.processing_times, problem.fits
    return [k for k in range(len(problem.instances) - 1)
            if np.array_equal(p[:, k], p[:, k + 1]) and np.array_equal(fits[:, k], fits[:, k + 1])]


def symmetric_order(problem: RoutingProblem, assignment: np.ndarray) -> np.ndarray:
    """``assignment`` (instance of each request) with the request sets of identical instances permuted so
    that the symmetry rows hold: within each run of consecutive identical instances, the loads are
    non-increasing (ties keep their order).  The makespan and every other row are unchanged: identical
    instances have the same p and fits columns, so a request set keeps its load and its KV fit wherever
    it moves in the run."""
    assignment = np.asarray(assignment, dtype=np.int64)
    loads = np.zeros(len(problem.instances))
    np.add.at(loads, assignment, problem.processing_times[np.arange(len(assignment)), assignment])
    target = np.arange(len(problem.instances))
    following = set(identical_successors(problem))
    start = 0
    for k in range(len(problem.instances)):
        if k in following:
            continue  # the run goes on to k + 1
        run = np.arange(start, k + 1)
        target[run[np.argsort(-loads[run], kind="stable")]] = run  # the i-th largest load moves to run[i]
        start = k + 1
    return target[assignment]


def define_symmetry(builder: ModelBuilder, problem: RoutingProblem, pairs, x: VarBlock) -> None:
    """Symmetry (rows ``symmetry``): identical consecutive instances s, s+1 (same p and fits columns) carry
    non-increasing loads, ``Σ_r p_{rs}x_{rs} ≥ Σ_r p_{r,s+1}x_{r,s+1}`` (`symmetric_order` puts any
    routing in this order)."""
    r, s = pairs
    p = problem.processing_times
    identical = identical_successors(problem)
    if not identical:
        return
    rows, cols, vals = [], [], []
    for row, k in enumerate(identical):
        for sign, inst in ((1.0, k), (-1.0, k + 1)):
            sel = np.flatnonzero(s == inst)
            rows.append(np.full(len(sel), row))
            cols.append(x.columns[sel])
            vals.append(sign * p[r[sel], inst])
    builder.add_constraints("symmetry", len(identical), np.concatenate(rows), np.concatenate(cols),
                            np.concatenate(vals), lower=0.0,
                            label=lambda j: f"symmetry[{problem.instances[identical[j]].name}]")


def build_routing_model(problem: RoutingProblem) -> tuple[LinearModel, VarBlock, tuple[np.ndarray, np.ndarray]]:
    builder = ModelBuilder(f"routing:{problem.name}", sense="min")
    pairs = pair_index(problem)
    x = define_assignment(builder, problem, pairs)
    define_makespan(builder, problem, pairs, x)
    define_symmetry(builder, problem, pairs, x)
    return builder.build(), x, pairs
