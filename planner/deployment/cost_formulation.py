"""Cost-minimal GPU plan as a MILP (the family's exact method; Mélange-style mix, with a proven gap).

Sets: inventory GPU types g, models m, options k = (g, t, m) with t dividing the machine size of g.
Data: capacity ``cap_k`` (requests/s one instance serves within the SLOs), price ``π_g`` ($ per
GPU-hour), rate ``λ_m`` (requests/s), inventory ``G_g`` = machines·GPUs per machine.

Variables: ``n_k ∈ ℤ≥0`` instances of option k; in max-load mode also the load scale ``s ≥ 0``.

* min-cost mode:  ``min Σ_k t_k·π_{g(k)}·n_k``
* demand  (per model m):  ``Σ_{k: m(k)=m} cap_k·n_k ≥ s·λ_m``  with s = 1 (min-cost) or variable (max-load)
* inventory (per GPU type g):  ``Σ_{k: g(k)=g} t_k·n_k ≤ G_g``
* max-load mode:  ``max s``  (the largest common scale of every model's rate the inventory can serve)

Packing: the inventory row counts GPUs.  When the candidate degrees of a type divide one another
(1, 2, 4, 8 on machines of 8) instances of ``Σ t·n ≤ machines·size`` GPUs always pack onto the
machines without splitting an instance (first-fit decreasing on divisible sizes); the validator
checks the packing independently.
"""

from __future__ import annotations

import numpy as np

from planner.deployment.problem import CostPlanProblem
from planner.solver import LinearModel, ModelBuilder, VarBlock


def define_instance_counts(builder: ModelBuilder, problem: CostPlanProblem, *, min_cost: bool) -> VarBlock:
    """``n_k ∈ ℤ≥0``, at most what the inventory allows; cost ``t_k·π_g`` per instance in min-cost mode."""
    upper = np.array([problem.inventory[o.gpu_index].gpus // o.tensor_parallel for o in problem.options], float)
    cost = problem.option_price if min_cost else 0.0
    return builder.add_variables("instances", len(problem.options), lower=0.0, upper=upper, integer=True, cost=cost)


def define_demand(builder: ModelBuilder, problem: CostPlanProblem, n: VarBlock, scale: VarBlock | None) -> None:
    """``Σ_{k: m(k)=m} cap_k·n_k − s·λ_m ≥ 0`` (s = 1: right-hand side λ_m)."""
    M = len(problem.demands)
    rows = [o.model_index for o in problem.options]
    cols = list(n.columns)
    vals = [o.capacity for o in problem.options]
    lower = np.array([d.rate for d in problem.demands])
    if scale is not None:
        rows += list(range(M))
        cols += [int(scale.col(0))] * M
        vals += [-d.rate for d in problem.demands]
        lower = np.zeros(M)
    builder.add_constraints("demand", M, np.array(rows), np.array(cols), np.array(vals), lower=lower,
                            label=lambda r: f"demand[model={problem.demands[r].model}]")


def define_inventory(builder: ModelBuilder, problem: CostPlanProblem, n: VarBlock) -> None:
    """``Σ_{k: g(k)=g} t_k·n_k ≤ G_g``."""
    G = len(problem.inventory)
    rows = np.array([o.gpu_index for o in problem.options], dtype=np.int64)
    vals = np.array([o.tensor_parallel for o in problem.options], float)
    upper = np.array([inv.gpus for inv in problem.inventory], float)
    builder.add_constraints("inventory", G, rows, n.columns, vals, upper=upper,
                            label=lambda r: f"inventory[gpu={problem.inventory[r].gpu.name}]")


def build_cost_model(problem: CostPlanProblem) -> tuple[LinearModel, VarBlock]:
    """min Σ price·n  s.t. demand, inventory."""
    builder = ModelBuilder(f"deployment-cost:{problem.name}", sense="min")
    n = define_instance_counts(builder, problem, min_cost=True)
    define_demand(builder, problem, n, scale=None)
    define_inventory(builder, problem, n)
    return builder.build(), n


def build_max_load_model(problem: CostPlanProblem) -> tuple[LinearModel, VarBlock, VarBlock]:
    """max s  s.t. demand scaled by s, inventory."""
    builder = ModelBuilder(f"deployment-max-load:{problem.name}", sense="max")
    n = define_instance_counts(builder, problem, min_cost=False)
    scale = builder.add_variables("load_scale", 1, lower=0.0, cost=1.0)
    define_demand(builder, problem, n, scale=scale)
    define_inventory(builder, problem, n)
    return builder.build(), n, scale
