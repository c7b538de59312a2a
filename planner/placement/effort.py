"""Nominal seconds of the placement pipeline's phases (deterministic effort, `planner.core.work`).

`planner.placement.pipeline.solve_placement` spends its time limit on a `WorkClock` charged with these
estimates, computed from sizes and work counts only, so that the phases it runs or skips — the second
greedy heuristic, the repacking LNS's rounds, the MIP — are the same on every run with the same input,
seed and time limit:

* reading an instance: `LOAD_PER_REQUEST` per CSV row plus `LOAD_FIXED` (charged when the caller's
  call began before loading, ``started=``);
* the prechecks, the arrays and the lower bound: `SETUP_PER_REQUEST` per request plus `SETUP_FIXED`;
* a greedy heuristic (`heuristics.best_fit`, `heuristics.first_fit_decreasing`): its counted work,
  `GREEDY_PER_REQUEST` per new request plus `GREEDY_PER_ROW` per worker row checked on the scalar
  families (`state.LoadTable`);
* the independent validator: `VALIDATE_PER_REQUEST` per request plus `VALIDATE_PER_CELL` per
  (request, future iteration) cell of the workers' KV horizons;
* the MIP's build and warm start: `BUILD_PER_PAIR` per eligible (request, worker) pair,
  `BUILD_PER_WORKER` per worker slot and `BUILD_PER_REQUEST` per new request; handing the model to
  the solver (HiGHS: the model copy, the start, and the set-up a ``time_limit`` does not interrupt):
  `HANDOVER_PER_PAIR` per pair.  Before the build the pairs are bounded from sizes
  (`mip_pairs_upper`), so a model too large for the time left is never built;
* a pool size tried by a load balancer of `planner compare placement` (`heuristics._smallest_pool`):
  `POOL_PER_WORKER` per worker of the pool plus `POOL_PER_STEP` per request routed (JSQ:
  `POOL_PER_STEP_WORKER` more per request and worker, its scan for the shortest queue);
* a repacking round (`improve.repack`): `ROUND_FIXED`, plus `ROUND_PER_NONZERO` per nonzero of the
  sub-MIP (the sub-problem, its model and root), plus per branch-and-bound node `ROUND_PER_NODE` and
  `ROUND_PER_NONZERO_NODE` per nonzero (the node count is deterministic: a node limit, no time limit).

The constants are non-negative least-squares fits on this project's 2-core reference machine
(generated instances of 100–5,000 requests, 0–2,000 of them ongoing, colocated and decode-only;
greedy and validator fits on the relative error, the repacking rounds on the absolute error because
single sub-MIPs vary tenfold), rounded up by about a quarter so that the nominal clock runs ahead of
the wall clock there: the pipeline then stops on its nominal budget, not on the wall-clock guard, and
repeats run to run.  On another machine the same nominal budget takes more or less wall time.
"""

from __future__ import annotations

import numpy as np

from planner.placement.problem import PlacementArrays

LOAD_PER_REQUEST = 8.5e-5
LOAD_FIXED = 0.04
SETUP_PER_REQUEST = 2.0e-5
SETUP_FIXED = 0.006
GREEDY_PER_REQUEST = 1.2e-4
GREEDY_PER_ROW = 5.2e-8
VALIDATE_PER_REQUEST = 2.8e-5
VALIDATE_PER_CELL = 9.0e-9
BUILD_PER_PAIR = 1.4e-6
BUILD_PER_WORKER = 4.5e-5
BUILD_PER_REQUEST = 4.0e-5
HANDOVER_PER_PAIR = 9.5e-6
POOL_PER_WORKER = 3.0e-5
POOL_PER_STEP = 1.8e-5
POOL_PER_STEP_WORKER = 2.5e-7
ROUND_FIXED = 0.005
ROUND_PER_NONZERO = 2.7e-4
ROUND_PER_NODE = 3.1e-4
ROUND_PER_NONZERO_NODE = 1.8e-5


def load_seconds(num_requests: int) -> float:
    """Reading and validating an instance of ``num_requests`` rows."""
    return LOAD_FIXED + LOAD_PER_REQUEST * num_requests


def setup_seconds(num_requests: int) -> float:
    """Prechecks, derived arrays and the lower bound."""
    return SETUP_FIXED + SETUP_PER_REQUEST * num_requests


def greedy_seconds(num_new: int, work: dict) -> float:
    """One greedy heuristic with the work counts ``work`` (`heuristics._greedy`)."""
    return GREEDY_PER_REQUEST * num_new + GREEDY_PER_ROW * float(work.get("rows_checked", 0))


def validate_seconds(arrays: PlacementArrays, assignment: np.ndarray) -> float:
    """The validator on a plan: per request, plus per cell of each worker's KV horizon
    (its requests × its longest remaining decode)."""
    labels, inverse = np.unique(np.asarray(assignment), return_inverse=True)
    horizon = np.zeros(labels.size)
    np.maximum.at(horizon, inverse, arrays.remaining)
    cells = float((horizon * np.bincount(inverse, minlength=labels.size)).sum())
    return VALIDATE_PER_REQUEST * arrays.num_requests + VALIDATE_PER_CELL * cells


def mip_pairs_upper(num_new: int, ongoing_workers: int, candidates: int) -> int:
    """At most this many (request, worker) pairs: every new request on every ongoing worker, and the
    symmetry-broken candidates (candidate u takes the requests of rank ≥ u, `formulation.make_slots`)."""
    u = min(candidates, num_new)
    return ongoing_workers * num_new + u * num_new - u * (u - 1) // 2


def mip_build_seconds(pairs: int, slots: int, num_new: int) -> float:
    """Building the placement MIP and its warm start."""
    return BUILD_PER_PAIR * pairs + BUILD_PER_WORKER * slots + BUILD_PER_REQUEST * num_new


def mip_handover_seconds(pairs: int) -> float:
    """Handing a built model of ``pairs`` assignment columns to the solver, before its time limit counts."""
    return HANDOVER_PER_PAIR * pairs


def repack_round_seconds(nonzeros: int, nodes: int) -> float:
    """One repacking round whose sub-MIP has ``nonzeros`` nonzeros and explored ``nodes`` nodes."""
    return ROUND_FIXED + ROUND_PER_NONZERO * nonzeros + (ROUND_PER_NODE + ROUND_PER_NONZERO_NODE * nonzeros) * nodes


def pool_attempt_seconds(method: str, workers: int, routed: int) -> float:
    """One pool size tried by a load balancer (`heuristics._smallest_pool`): ``workers`` worker loads,
    ``routed`` requests routed (JSQ scans every worker per request)."""
    per_step = POOL_PER_STEP + (POOL_PER_STEP_WORKER * workers if method == "jsq" else 0.0)
    return POOL_PER_WORKER * workers + per_step * routed
