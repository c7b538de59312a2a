"""Nominal seconds of the routing and cost-plan pipelines (deterministic effort, `planner.core.work`).

`planner.deployment.routing_solve.solve_routing` and `planner.deployment.cost_solve.solve_cost_plan`
spend a time limit on a `WorkClock` charged with these estimates, computed from sizes and work counts
only, so the phases that run, the local search's rounds and the MILPs' node limits are the same on
every run with the same input, seed and time limit:

* reading an instance: routing `ROUTING_LOAD_FIXED` plus `ROUTING_LOAD_PER_CELL` per (request,
  instance) pair (the generated requests, Eq. 5–6 per pair); cost plans `COST_LOAD_FIXED` plus
  `COST_LOAD_PER_OPTION` per (model, GPU type, degree) option (the YAML parser dominates);
* the makespan bound (`routing_bound`): `BOUND_PER_CELL` per pair per ascent step;
* the guided greedy: `GREEDY_PER_REQUEST` per request;
* the routing local search: `SEARCH_ROUND` per round plus `SEARCH_MOVE_CELL` per (request, instance)
  move cell scanned and `SEARCH_SWAP_CELL` per (request, request) swap pair;
* the routing validator (Eq. 4 summed step by step, in Python): `VALIDATE_PER_REQUEST`;
* a router of `planner compare routing`: `ROUTER_FIXED` plus `ROUTER_MAPPER_PER_CELL` per (request,
  instance) pair for the mapper and MB, `ROUTER_PER_REQUEST` per request for the others;
* a MILP (routing or cost plan): `MILP_BUILD_PER_NONZERO` per nonzero to build and hand over,
  then the root (presolve, LP, cuts, heuristics) `MILP_ROOT_FIXED` + `MILP_ROOT_PER_NONZERO` per
  nonzero + `MILP_ROOT_PER_NONZERO_SQUARED` per squared nonzero (the routing root grows faster than
  its size: 1.1–2.5 s at 1,300–7,800 nonzeros, 66 s at 26,000, 96 s at 52,000), then per
  branch-and-bound node `MILP_NODE_FIXED` + `MILP_NODE_PER_NONZERO` per nonzero.  The MILP gets a
  node limit, never a time limit of its own: HiGHS with a node limit repeats exactly.  Cost-plan
  MILPs (few rows, general integers) have their own root and node constants (`COST_ROOT_*`,
  `COST_NODE_*`: the 6 types × 60 models plans, 2,900 nonzeros, took 6–15 s at the root and 10–50 ms
  per node), and their LP relaxation `COST_LP_*`; the heuristics `COST_HEURISTICS_PER_OPTION`.

The constants are upper envelopes of timings on this project's 2-core reference machine while it
was shared (load average 2–6), rounded up so that the nominal clock runs ahead of the wall clock:
the pipeline then stops on its nominal budget, not on the wall-clock guard, and repeats run to run.
On another machine the same nominal budget takes more or less wall time; when the wall-clock guard
decides instead, the result says the run may not repeat (``stats.wall_cut``).
"""

from __future__ import annotations

ROUTING_LOAD_FIXED = 0.05
ROUTING_LOAD_PER_CELL = 2.0e-6
COST_LOAD_FIXED = 0.05
COST_LOAD_PER_OPTION = 1.2e-3
BOUND_PER_CELL = 6.0e-8
GREEDY_PER_REQUEST = 1.2e-5
SEARCH_ROUND = 1.5e-4
SEARCH_MOVE_CELL = 2.0e-8
SEARCH_SWAP_CELL = 1.5e-8
VALIDATE_PER_REQUEST = 2.0e-4
ROUTER_FIXED = 0.02
ROUTER_PER_REQUEST = 2.0e-5
ROUTER_MAPPER_PER_CELL = 4.0e-5
MILP_BUILD_PER_NONZERO = 2.0e-6
MILP_ROOT_FIXED = 3.0
MILP_ROOT_PER_NONZERO = 3.0e-4
MILP_ROOT_PER_NONZERO_SQUARED = 1.0e-7
MILP_NODE_FIXED = 2.0e-3
COST_LP_FIXED = 0.02
COST_LP_PER_NONZERO = 2.0e-5
COST_HEURISTICS_PER_OPTION = 2.0e-5
COST_VALIDATE_PER_OPTION = 2.0e-5
COST_ROOT_FIXED = 1.0
COST_ROOT_PER_NONZERO = 5.0e-3
COST_NODE_FIXED = 5.0e-3
COST_NODE_PER_NONZERO = 1.0e-5
MILP_NODE_PER_NONZERO = 2.0e-5


def routing_load_seconds(num_requests: int, num_instances: int) -> float:
    return ROUTING_LOAD_FIXED + ROUTING_LOAD_PER_CELL * num_requests * num_instances


def cost_load_seconds(num_options: int) -> float:
    return COST_LOAD_FIXED + COST_LOAD_PER_OPTION * num_options


def bound_seconds(cells: int, steps: int) -> float:
    """The makespan bound's start (two weightings) and ``steps`` ascent steps over ``cells`` pairs."""
    return BOUND_PER_CELL * cells * (steps + 2)


def greedy_seconds(num_requests: int) -> float:
    return GREEDY_PER_REQUEST * num_requests


def local_search_seconds(move_cells: int, swap_cells: int) -> float:
    """One round of the routing local search that scanned these cells."""
    return SEARCH_ROUND + SEARCH_MOVE_CELL * move_cells + SEARCH_SWAP_CELL * swap_cells


def router_seconds(method: str, num_requests: int, num_instances: int) -> float:
    """One router of `planner.deployment.routing` (the mapper and MB loop over instances per request in
    Python; the others estimate throughput once and route in one pass)."""
    if method in ("mapper", "mb"):
        return ROUTER_FIXED + ROUTER_MAPPER_PER_CELL * num_requests * num_instances
    return ROUTER_FIXED + ROUTER_PER_REQUEST * num_requests


def validate_seconds(num_requests: int) -> float:
    return VALIDATE_PER_REQUEST * num_requests


def cost_lp_seconds(nonzeros: int) -> float:
    """The LP relaxation of a cost-plan MILP (simplex)."""
    return COST_LP_FIXED + COST_LP_PER_NONZERO * nonzeros


def cost_heuristics_seconds(num_options: int, num_models: int) -> float:
    """The cost-plan heuristics (greedy, single type, LP rounding) and their validation."""
    return COST_HEURISTICS_PER_OPTION * num_options * (1 + num_models / 10)


def cost_validate_seconds(num_options: int) -> float:
    return COST_VALIDATE_PER_OPTION * num_options


def cost_milp_root_seconds(nonzeros: int) -> float:
    return COST_ROOT_FIXED + COST_ROOT_PER_NONZERO * nonzeros


def cost_milp_node_seconds(nonzeros: int) -> float:
    return COST_NODE_FIXED + COST_NODE_PER_NONZERO * nonzeros


def cost_milp_nodes_within(seconds: float, nonzeros: int) -> int:
    """Branch-and-bound nodes of a cost-plan MILP that fit in ``seconds`` after its build and root."""
    left = seconds - milp_build_seconds(nonzeros) - cost_milp_root_seconds(nonzeros)
    return max(int(left / cost_milp_node_seconds(nonzeros)), 0)


def milp_build_seconds(nonzeros: int) -> float:
    return MILP_BUILD_PER_NONZERO * nonzeros


def milp_root_seconds(nonzeros: int) -> float:
    return MILP_ROOT_FIXED + MILP_ROOT_PER_NONZERO * nonzeros + MILP_ROOT_PER_NONZERO_SQUARED * nonzeros ** 2


def milp_node_seconds(nonzeros: int) -> float:
    return MILP_NODE_FIXED + MILP_NODE_PER_NONZERO * nonzeros


def milp_nodes_within(seconds: float, nonzeros: int) -> int:
    """Branch-and-bound nodes that fit in ``seconds`` after the build and the root (0: the root only fits or less)."""
    left = seconds - milp_build_seconds(nonzeros) - milp_root_seconds(nonzeros)
    return max(int(left / milp_node_seconds(nonzeros)), 0)
