"""Every ``define_*`` of the deployment family checked on a hand-solved tiny case.

Equations: docs/formulations.md §5.4 (routing MILP, R||Cmax with KV limits), §5.5 (cost-minimal GPU plan)
and §5.6 (Mélange's mixed fleet for request classes), and the module docstrings of
`planner/deployment/routing_formulation.py`, `cost_formulation.py` and `classes.py`.  Each test builds
the model through the family's own build function, picks the rows by their row-block name and compares
them with the dense matrix written out (and derived) in the test.
"""

from __future__ import annotations

import math

import numpy as np

from support import TOY_MODEL
from support.rows import family

from planner.core.types import GPUSpec
from planner.costmodels.models import HeteroCostModel
from planner.deployment.classes import ClassPlanProblem, Configuration, GPUType, RequestClass, build_class_plan_model
from planner.deployment.cost_formulation import build_cost_model, build_max_load_model
from planner.deployment.problem import (
    CostPlanProblem,
    GPUInventory,
    InstanceOption,
    ModelDemand,
    RoutingProblem,
    ServingInstance,
)
from planner.deployment.routing_formulation import build_routing_model


def var_block(model, name):
    (blk,) = [b for b in model.var_blocks if b.name == name]
    sl = slice(blk.start, blk.start + blk.size)
    return blk, model.col_lower[sl], model.col_upper[sl], model.cost[sl], model.integrality[sl]


# ---- routing: R||Cmax with KV limits (§5.4) ---------------------------------------------------------

def routing_problem():
    """Three requests (I = 10; O = 10, 20, 100) on three instances, max_batch 1 (so b = 1, Eq. 6: p = T_prefill + T_decode).

    Hetero model with only p4 (prefill constant) and p8 (per decode step), in seconds: p = p4 + p8·O.
    s0, s1: p4 = 1, p8 = 0.1 → p = 2, 3, 11 (identical instances: a symmetry row);
    s2: p4 = 1, p8 = 0.2 → p = 3, 5, 21, with a KV cache of 30 tokens: r2 (110 tokens) does not fit.
    Pairs in request-major order: x0..x2 = r0 on s0..s2, x3..x5 = r1 on s0..s2, x6, x7 = r2 on s0, s1.
    """
    kv_tok = TOY_MODEL.kv_bytes_per_token

    def model(p8):
        return HeteroCostModel(model="toy", gpu="g", tensor_parallel=1, time_unit="s",
                               p1=0, p2=0, p3=0, p4=1.0, p5=0, p6=0, p7=0, p8=p8)

    big, small = kv_tok * 1000, kv_tok * 30
    return RoutingProblem(
        name="tiny", model=TOY_MODEL, max_batch=1,
        instances=(ServingInstance(name="s0", gpu="g", tensor_parallel=1, kv_size_bytes=big, cost=model(0.1)),
                   ServingInstance(name="s1", gpu="g", tensor_parallel=1, kv_size_bytes=big, cost=model(0.1)),
                   ServingInstance(name="s2", gpu="g", tensor_parallel=1, kv_size_bytes=small, cost=model(0.2))),
        request_ids=("r0", "r1", "r2"), inputs=(10, 10, 10), predicted_outputs=(10, 20, 100),
    )


def test_routing_define_assignment_over_fitting_instances():
    """assign: Σ_s x_rs = 1 per request, over the instances whose KV cache fits r (Eq. 5's KV limit)."""
    model, x, pairs = build_routing_model(routing_problem())
    assert pairs[0].tolist() == [0, 0, 0, 1, 1, 1, 2, 2] and pairs[1].tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    A, lo, hi = family(model, "assign")
    #           x0 x1 x2 x3 x4 x5 x6 x7  C
    expected = [[1, 1, 1, 0, 0, 0, 0, 0, 0],
                [0, 0, 0, 1, 1, 1, 0, 0, 0],
                [0, 0, 0, 0, 0, 0, 1, 1, 0]]  # r2 has no column on s2
    np.testing.assert_allclose(A, expected)
    np.testing.assert_allclose(lo, 1.0)
    np.testing.assert_allclose(hi, 1.0)
    assert x.integer and x.size == 8


def test_routing_define_makespan_rows():
    """makespan: Σ_r p_rs·x_rs − C ≤ 0 per instance (Eq. 6 times p), objective min C."""
    model, x, _ = build_routing_model(routing_problem())
    A, lo, hi = family(model, "makespan")
    #           x0 x1 x2 x3 x4 x5  x6  x7   C
    expected = [[2, 0, 0, 3, 0, 0, 11, 0, -1],
                [0, 2, 0, 0, 3, 0, 0, 11, -1],
                [0, 0, 3, 0, 0, 5, 0, 0, -1]]
    np.testing.assert_allclose(A, expected, rtol=1e-12)
    np.testing.assert_allclose(hi, 0.0)
    _, clo, cup, cost, integer = var_block(model, "makespan")
    # C's upper bound must admit every assignment's makespan (a warm start may be any of them): the worst
    # puts all three requests on s0 (2 + 3 + 11 = 16).
    assert (clo[0], cost[0], bool(integer[0])) == (0.0, 1.0, False) and cup[0] >= 16
    # Hand optimum: r2 alone on s0 (11), r0 + r1 on s1 (5) — C = 11 satisfies every row; C = 10.9 does not.
    point = np.zeros(model.num_cols)
    point[[6, 1, 4]] = 1.0
    point[-1] = 11.0
    assert np.all(A @ point <= hi + 1e-12)
    point[-1] = 10.9
    assert (A @ point)[0] > 0


def test_routing_define_symmetry_identical_instances():
    """symmetry: identical consecutive instances s, s+1 carry non-increasing loads Σ_r p_rs·x_rs ≥ Σ_r p_r,s+1·x_r,s+1."""
    model, _, _ = build_routing_model(routing_problem())
    A, lo, hi = family(model, "symmetry")  # s0 ≡ s1; s1 ≢ s2 (other p and fits)
    np.testing.assert_allclose(A, [[2, -2, 0, 3, -3, 0, 11, -11, 0]], rtol=1e-12)
    assert lo.tolist() == [0.0] and hi.tolist() == [np.inf]


# ---- cost-minimal GPU plan (§5.5) --------------------------------------------------------------------

def cost_problem():
    """GPU A: 1 machine × 4 GPUs at $2/GPU-h; GPU B: 2 machines × 2 GPUs at $1/GPU-h.  Models m0 (10 req/s), m1 (3 req/s).

    Options k = (g, t, m, cap): k0 (A, 1, m0, 4), k1 (A, 2, m0, 9), k2 (B, 2, m1, 2), k3 (B, 1, m0, 1.5).
    """
    inv = (GPUInventory(gpu=GPUSpec(name="A", memory_gb=80), machines=1, gpus_per_machine=4, price_per_gpu_hour=2.0),
           GPUInventory(gpu=GPUSpec(name="B", memory_gb=24), machines=2, gpus_per_machine=2, price_per_gpu_hour=1.0))
    demands = (ModelDemand(model="m0", rate=10.0), ModelDemand(model="m1", rate=3.0))
    options = (InstanceOption(gpu_index=0, tensor_parallel=1, model_index=0, capacity=4.0),
               InstanceOption(gpu_index=0, tensor_parallel=2, model_index=0, capacity=9.0),
               InstanceOption(gpu_index=1, tensor_parallel=2, model_index=1, capacity=2.0),
               InstanceOption(gpu_index=1, tensor_parallel=1, model_index=0, capacity=1.5))
    return CostPlanProblem(name="tiny", inventory=inv, demands=demands, options=options)


def test_cost_define_instance_counts_bounds_and_prices():
    """n_k ∈ ℤ≥0, n_k ≤ G_g(k) // t_k; cost t_k·π_g in min-cost mode, 0 in max-load mode."""
    model, n = build_cost_model(cost_problem())
    _, lo, up, cost, integer = var_block(model, "instances")
    assert up.tolist() == [4, 2, 2, 4]        # A: 4 GPUs / (1, 2); B: 4 GPUs / (2, 1)
    assert cost.tolist() == [2, 4, 2, 1]      # t·π: 1·2, 2·2, 2·1, 1·1
    assert lo.tolist() == [0] * 4 and integer.all()
    model, _, s = build_max_load_model(cost_problem())
    _, _, _, cost, _ = var_block(model, "instances")
    assert cost.tolist() == [0] * 4
    _, slo, sup, scost, _ = var_block(model, "load_scale")
    assert (slo[0], sup[0], scost[0], model.sense) == (0.0, math.inf, 1.0, "max")


def test_cost_define_demand_min_cost_and_max_load():
    """demand: Σ_{k: m(k)=m} cap_k·n_k ≥ λ_m (min cost), or Σ cap_k·n_k − s·λ_m ≥ 0 (max load)."""
    model, _ = build_cost_model(cost_problem())
    A, lo, hi = family(model, "demand")
    np.testing.assert_allclose(A, [[4, 9, 0, 1.5], [0, 0, 2, 0]])
    assert lo.tolist() == [10.0, 3.0] and hi.tolist() == [np.inf, np.inf]
    model, _, _ = build_max_load_model(cost_problem())
    A, lo, hi = family(model, "demand")
    #           n0 n1 n2  n3    s
    np.testing.assert_allclose(A, [[4, 9, 0, 1.5, -10], [0, 0, 2, 0, -3]])
    assert lo.tolist() == [0.0, 0.0]
    # Hand check of max load: all of A as one tp2 + two tp1 instances (9 + 8 = 17 req/s for m0), B as two tp2
    # for m1 (4 req/s): s = min(17/10, 4/3) = 4/3 satisfies the rows, s = 1.4 violates m1's.
    point = np.array([2, 1, 2, 0, 4 / 3])
    assert np.all(A @ point >= lo - 1e-12)
    point[-1] = 1.4
    assert (A @ point)[1] < 0


def test_cost_define_inventory_counts_gpus():
    """inventory: Σ_{k: g(k)=g} t_k·n_k ≤ G_g (GPUs of each type)."""
    model, _ = build_cost_model(cost_problem())
    A, lo, hi = family(model, "inventory")
    np.testing.assert_allclose(A, [[1, 2, 0, 0], [0, 0, 2, 1]])
    assert hi.tolist() == [4.0, 4.0]


# ---- Mélange mixed fleet for request classes (§5.6) ---------------------------------------------------

def class_problem(inventory_a=4):
    """GPU A ($2/GPU-h, ``inventory_a`` GPUs), GPU B ($1/GPU-h, no limit).  Classes k0 = m0/short (3 req/s),
    k1 = m0/long (1 req/s), k2 = m1/all (2 req/s).  Configurations:
    c0 = m0 on A tp1 (μ: k0 2, k1 0.5); c1 = m0 on B tp2 (μ: k0 4); c2 = m1 on A tp2 (μ: k2 1).
    Pairs, configuration-major: x0 = (k0, c0), x1 = (k1, c0), x2 = (k0, c1), x3 = (k2, c2).
    """
    return ClassPlanProblem(
        name="tiny", models=("m0", "m1"),
        gpus=(GPUType("A", 2.0, available=inventory_a), GPUType("B", 1.0)),
        classes=(RequestClass(0, "short", 3.0), RequestClass(0, "long", 1.0), RequestClass(1, "all", 2.0)),
        configurations=(Configuration("A-tp1", 0, 0, 1, ((0, 2.0), (1, 0.5))),
                        Configuration("B-tp2", 0, 1, 2, ((0, 4.0),)),
                        Configuration("A-tp2", 1, 0, 2, ((2, 1.0),))),
    )


def test_classes_define_instances_and_routed_rates_bounds():
    """n_c ∈ ℤ≥0 with cost π_g·t_c, n_c ≤ ⌊G_g/t_c⌋ with an inventory; 0 ≤ x_kc ≤ λ_k."""
    model, n, x = build_class_plan_model(class_problem())
    _, lo, up, cost, integer = var_block(model, "instances")
    assert up.tolist() == [4, math.inf, 2] and cost.tolist() == [2, 2, 4] and integer.all()
    _, lo, up, cost, integer = var_block(model, "routed_rate")
    assert up.tolist() == [3, 1, 3, 2] and lo.tolist() == [0] * 4 and not integer.any() and not cost.any()


def test_classes_define_class_rates():
    """class_rate: Σ_c x_kc = λ_k for every class (Mélange's demand row)."""
    model, n, x = build_class_plan_model(class_problem())
    A, lo, hi = family(model, "class_rate")
    cols = x.columns
    assert not np.delete(A, cols, axis=1).any()
    np.testing.assert_allclose(A[:, cols], [[1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]])
    assert lo.tolist() == hi.tolist() == [3.0, 1.0, 2.0]


def test_classes_define_configuration_load():
    """configuration_load: Σ_k x_kc/μ_kc − n_c ≤ 0 (instance-seconds per second, Mélange's load row)."""
    model, n, x = build_class_plan_model(class_problem())
    A, lo, hi = family(model, "configuration_load")
    cols = np.concatenate([x.columns, n.columns])
    #                 x0   x1  x2    x3 | n0  n1  n2
    np.testing.assert_allclose(A[:, cols], [[0.5, 2.0, 0.0, 0.0, -1, 0, 0],
                                            [0.0, 0.0, 0.25, 0.0, 0, -1, 0],
                                            [0.0, 0.0, 0.0, 1.0, 0, 0, -1]])
    np.testing.assert_allclose(hi, 0.0)
    # Hand plan: all of k0 and k1 on c0 needs 3/2 + 1/0.5 = 3.5 instance-s/s: n0 = 4 fits, n0 = 3 does not.
    point = np.zeros(model.num_cols)
    point[x.columns] = [3, 1, 0, 2]
    point[n.columns] = [4, 0, 2]
    assert np.all(A @ point <= 1e-12)
    point[n.col(0)] = 3
    assert (A @ point)[0] > 0


def test_classes_define_gpu_inventory_only_limited_types():
    """gpu_inventory: Σ_{c: g(c)=g} t_c·n_c ≤ G_g for each type with an inventory (shared by all models)."""
    model, n, _ = build_class_plan_model(class_problem())
    A, lo, hi = family(model, "gpu_inventory")  # A only; B has no limit
    assert not np.delete(A, n.columns, axis=1).any()
    np.testing.assert_allclose(A[:, n.columns], [[1, 0, 2]])
    assert hi.tolist() == [4.0]
    model, _, _ = build_class_plan_model(class_problem(inventory_a=None))
    assert "gpu_inventory" not in model.families
