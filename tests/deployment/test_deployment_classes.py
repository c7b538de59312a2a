"""Mixed fleets for request classes (`planner.deployment.classes`): hand-solved and brute-forced optima,
the independent validator, Mélange's example against a faithful re-implementation of its slice ILP,
and the instance form's one-line errors."""

from __future__ import annotations

import itertools
import json
import sys

import numpy as np
import pytest
import yaml
from scipy.optimize import linprog

from support import REPO, assert_one_line, run_cli
from planner.deployment.classes import (
    ClassPlanProblem,
    ClassPlanSolution,
    Configuration,
    GPUType,
    RequestClass,
    greedy_classes,
    single_configuration,
    solve_class_plan,
)
from planner.deployment.classes_validator import validate_class_plan
from planner.deployment.instance import load_deployment_instance
from planner.solver import SolveStatus

sys.path.insert(0, str(REPO / "benchmarks"))
from melange_compare import MELANGE_EXAMPLE, melange_problem, melange_slice_ilp  # noqa: E402

EXAMPLE = REPO / "instances/deployment/melange-example.yaml"


def _problem(gpus, classes, configs, models=("m",)) -> ClassPlanProblem:
    return ClassPlanProblem("t", tuple(models), tuple(gpus), tuple(classes), tuple(configs))


# ---- a hand-solved case -----------------------------------------------------------------------------

def _tiny() -> ClassPlanProblem:
    # Two classes: short (rate 10 req/s) and long (rate 3 req/s).  Two configurations:
    #   small GPU $1/h, tp1: μ_short = 5, μ_long = 1      ($/h per req/s: 0.2 and 1.0)
    #   big GPU   $3/h, tp1: μ_short = 10, μ_long = 6     ($/h per req/s: 0.3 and 0.5)
    return _problem([GPUType("small", 1.0, memory_gb=24), GPUType("big", 3.0, memory_gb=80)],
                    [RequestClass(0, "short", 10.0), RequestClass(0, "long", 3.0)],
                    [Configuration("small-tp1", 0, 0, 1, ((0, 5.0), (1, 1.0))),
                     Configuration("big-tp1", 0, 1, 1, ((0, 10.0), (1, 6.0)))])


def test_hand_solved_two_classes_two_configurations():
    # Plans by (n_small, n_big):
    #   (0, 2) $6: big load 10/10 + 3/6 = 1.5 ≤ 2.  (0, 1) cannot: 1.5 > 1.
    #   (1, 1) $4: small takes 5 short (load 1), big takes 5 short + 3 long = 0.5 + 0.5 = 1 ≤ 1.  Feasible.
    #   (k, 0): all long on small needs 3 + 2 = 5 instances = $5.
    #   $3 or less: (3,0) needs 2 + 3 = 5 > 3; (0,1) above; (1,0),(2,0) too small.  So $4 is optimal, and
    #   the only $4 plans are (1, 1) and (4, 0) ((4,0): 10/5 + 3/1 = 5 > 4, infeasible) -> (1, 1).
    result = solve_class_plan(_tiny())
    assert result.status == SolveStatus.OPTIMAL and result.validation.feasible
    assert result.objective == pytest.approx(4.0) and result.gap <= 1e-6
    assert result.solution.counts == (1, 1)
    routed = {(k, c): r for k, c, r in result.solution.routes}
    assert routed[(1, 1)] == pytest.approx(3.0)  # every long request on the big GPU
    assert routed[(0, 0)] == pytest.approx(5.0) and routed[(0, 1)] == pytest.approx(5.0)
    fractions = result.solution.to_dict()["routing_fractions"]
    assert fractions["m/short"] == pytest.approx({"m on small-tp1": 0.5, "m on big-tp1": 0.5})
    # greedy: short on small (0.2 $/req/s), long on big (0.5): small 10/5 = 2 instances, big 3/6 → 1: $5
    assert validate_class_plan(_tiny(), greedy_classes(_tiny())).objective == pytest.approx(5.0)
    # one configuration for everything: small 10/5 + 3/1 = 5 → $5; big 1 + 0.5 → 2 → $6: $5
    assert validate_class_plan(_tiny(), single_configuration(_tiny())).objective == pytest.approx(5.0)


def test_two_models_share_an_inventory_of_the_big_gpu():
    # Model a: 6 req/s, big μ = 6 ($3), small μ = 1 ($1).  Model b: 6 req/s, big μ = 3, small μ = 2.
    # Without a limit: a on 1 big ($3), b on 2 big ($6) or 3 small ($3) -> $6.  With 1 big GPU in all:
    # a on the big one (else 6 small = $6), b on 3 small: $6 still; with 0 big: a 6 small + b 3 small = $9.
    def build(available):
        return _problem([GPUType("small", 1.0, memory_gb=24), GPUType("big", 3.0, available=available, memory_gb=80)],
                        [RequestClass(0, "x", 6.0), RequestClass(1, "x", 6.0)],
                        [Configuration("small", 0, 0, 1, ((0, 1.0),)), Configuration("big", 0, 1, 1, ((0, 6.0),)),
                         Configuration("small", 1, 0, 1, ((1, 2.0),)), Configuration("big", 1, 1, 1, ((1, 3.0),))],
                        models=("a", "b"))
    for available, cost in ((None, 6.0), (1, 6.0), (0, 9.0)):
        result = solve_class_plan(build(available))
        assert result.status == SolveStatus.OPTIMAL and result.validation.feasible, result.message
        assert result.objective == pytest.approx(cost)
        if available is not None:
            assert result.validation.details["gpus_used"]["big"] <= available


def test_an_inventory_too_small_for_the_rates_is_infeasible_not_a_crash():
    problem = _problem([GPUType("g", 1.0, available=2)], [RequestClass(0, "x", 10.0)],
                       [Configuration("g", 0, 0, 1, ((0, 1.0),))])
    result = solve_class_plan(problem)
    assert result.status == SolveStatus.INFEASIBLE and result.solution is None and "inventory" in result.message


# ---- brute force on random tiny instances ------------------------------------------------------------

def _lp_routable(problem: ClassPlanProblem, counts) -> bool:
    """Is there a routing x ≥ 0 with Σ_c x_kc = λ_k and Σ_k x_kc/μ_kc ≤ n_c (scipy linprog, independent)?"""
    pairs = [(k, c, mu) for c, conf in enumerate(problem.configurations) for k, mu in conf.capacity]
    K, C = len(problem.classes), len(problem.configurations)
    a_eq = np.zeros((K, len(pairs)))
    a_ub = np.zeros((C, len(pairs)))
    for p, (k, c, mu) in enumerate(pairs):
        a_eq[k, p] = 1.0
        a_ub[c, p] = 1.0 / mu
    res = linprog(np.zeros(len(pairs)), A_ub=a_ub, b_ub=np.asarray(counts, float) + 1e-9, A_eq=a_eq,
                  b_eq=[cl.rate for cl in problem.classes], bounds=(0, None), method="highs")
    return res.status == 0


def _random_problem(rng) -> ClassPlanProblem:
    G = int(rng.integers(1, 3))
    gpus = [GPUType(f"g{g}", float(rng.choice([0.5, 1.0, 1.7, 3.0])),
                    available=None if rng.random() < 0.5 else int(rng.integers(2, 5)), memory_gb=24) for g in range(G)]
    models = ("a", "b")[: int(rng.integers(1, 3))]
    classes, configs = [], []
    for m in range(len(models)):
        first = len(classes)
        for k in range(int(rng.integers(1, 4))):
            classes.append(RequestClass(m, f"c{k}", float(rng.uniform(0.2, 3.0))))
        for g in range(G):
            for tp in (1, 2)[: int(rng.integers(1, 3))]:
                cap = tuple((k, float(rng.uniform(0.5, 4.0) * tp)) for k in range(first, len(classes))
                            if rng.random() < 0.8)
                if cap:
                    configs.append(Configuration(f"g{g}-tp{tp}", m, g, tp, cap))
        served = {k for conf in configs for k, _ in conf.capacity}
        for k in range(first, len(classes)):
            if k not in served:
                configs.append(Configuration(f"g0-extra{k}", m, 0, 1, ((k, 2.0),)))
    return _problem(gpus, classes, configs, models)


@pytest.mark.parametrize("seed", range(12))
def test_optimum_equals_brute_force_over_small_integer_fleets(seed):
    rng = np.random.default_rng(seed)
    problem = _random_problem(rng)
    price = [problem.gpus[c.gpu_index].price_per_gpu_hour * c.tensor_parallel for c in problem.configurations]
    best = None  # the cheapest fleet with at most 4 instances per configuration whose LP routing exists
    fleets = sorted(itertools.product(range(5), repeat=len(problem.configurations)),
                    key=lambda counts: sum(p * n for p, n in zip(price, counts)))
    for counts in fleets:
        used = {}
        for c, n in zip(problem.configurations, counts):
            used[c.gpu_index] = used.get(c.gpu_index, 0) + n * c.tensor_parallel
        if any(g.available is not None and used.get(i, 0) > g.available for i, g in enumerate(problem.gpus)):
            continue
        if _lp_routable(problem, counts):
            best = sum(p * n for p, n in zip(price, counts))
            break
    result = solve_class_plan(problem, threads=1)
    if best is None:  # nothing within 4 instances per configuration: the solver must not find cheaper
        assert result.status in (SolveStatus.INFEASIBLE, SolveStatus.OPTIMAL)
        if result.status == SolveStatus.OPTIMAL:
            assert max(result.solution.counts) > 4
        return
    assert result.status == SolveStatus.OPTIMAL, result.message
    assert result.validation.feasible
    assert result.validation.objective == pytest.approx(result.objective, rel=1e-9)
    if max(result.solution.counts) <= 4:
        assert result.objective == pytest.approx(best, rel=1e-6, abs=1e-9)
    else:
        assert result.objective <= best + 1e-9


# ---- the validator ------------------------------------------------------------------------------------

def test_validator_rejects_a_plan_that_breaks_each_row():
    problem = _tiny()
    good = solve_class_plan(problem).solution
    assert validate_class_plan(problem, good).feasible
    routes = list(good.routes)

    def bad(counts=good.counts, routes=tuple(routes)):
        report = validate_class_plan(problem, ClassPlanSolution(tuple(counts), tuple(routes), "edited"))
        assert not report.feasible
        return {v.constraint for v in report.violations}

    assert "configuration_load" in bad(counts=(0, 1))  # the small GPU's 5 req/s have no instance
    short = [(k, c, r * 0.5) if (k, c) == (1, 1) else (k, c, r) for k, c, r in routes]
    assert "class_rate" in bad(routes=short)  # half the long requests are not served
    assert "route" in bad(routes=[*routes, (1, 0, -1.0)])
    limited = ClassPlanProblem("t", problem.models, (problem.gpus[0], GPUType("big", 3.0, available=0)),
                               problem.classes, problem.configurations)
    report = validate_class_plan(limited, good)
    assert not report.feasible and {v.constraint for v in report.violations} == {"gpu_inventory"}
    assert "integrality" in bad(counts=(1, -1))
    # a route to a configuration with no capacity for that class (short requests on small)
    no_cap = _problem(problem.gpus, problem.classes, [Configuration("small-tp1", 0, 0, 1, ((1, 1.0),)),
                                                      problem.configurations[1]])
    report = validate_class_plan(no_cap, good)
    assert not report.feasible and "route" in {v.constraint for v in report.violations}


# ---- Mélange's example -----------------------------------------------------------------------------

def test_melange_example_optimum_is_below_its_own_slice_answer():
    # Mélange's answer from its faithful slice ILP (slice factor 1, as in its example.json): its README
    # prints {"A10G": 3, "A100-80GB": 1, "cost": 6.7}.
    slice1 = melange_slice_ilp(MELANGE_EXAMPLE, 1)
    assert slice1["status"] == "optimal" and slice1["counts"] == {"A10G": 3, "A100-80GB": 1}
    shipped = solve_class_plan(load_deployment_instance(EXAMPLE))
    direct = solve_class_plan(melange_problem(MELANGE_EXAMPLE))
    assert shipped.status == direct.status == SolveStatus.OPTIMAL and shipped.validation.feasible
    assert shipped.objective == pytest.approx(direct.objective)  # the YAML holds Mélange's numbers
    assert shipped.gap <= 1e-6
    for sf in (1, 2, 3, 4):
        sliced = melange_slice_ilp(MELANGE_EXAMPLE, sf)
        assert sliced["status"] == "optimal"
        assert shipped.objective <= sliced["cost"] + 1e-9  # continuous routing is the slice factor's limit
    assert shipped.objective < slice1["cost"] - 1.0
    # brute force over small fleets with scipy's LP for the routing agrees with the optimum
    problem = melange_problem(MELANGE_EXAMPLE)
    costs = [n0 * 1.01 + n1 * 3.67 for n0, n1 in itertools.product(range(13), range(3))
             if _lp_routable(problem, (n0, n1))]
    assert shipped.objective == pytest.approx(min(costs))


def test_melange_own_cbc_path_agrees_with_the_highs_reimplementation():
    # Mélange's model as Mélange runs it (PuLP + bundled CBC); needs the `bench` extra.
    pytest.importorskip("pulp")
    from melange_compare import melange_cbc

    for sf in (1, 2, 4):
        cbc, highs = melange_cbc(MELANGE_EXAMPLE, sf, time_limit=30), melange_slice_ilp(MELANGE_EXAMPLE, sf)
        assert cbc["status"] == "Optimal"
        assert cbc["cost"] == pytest.approx(highs["cost"]) and cbc["counts"] == highs["counts"]
    assert melange_cbc(MELANGE_EXAMPLE, 1)["cost"] == pytest.approx(6.70)  # Mélange's README answer


# ---- instance files and the CLI --------------------------------------------------------------------

def test_cli_solves_the_shipped_example_and_json_is_one_object(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "solve", "deployment", str(EXAMPLE), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "optimal" and result["validation"]["feasible"]
    fractions = result["solution"]["routing_fractions"]
    assert all(sum(f.values()) == pytest.approx(1.0) for f in fractions.values())
    code, out, err = run_cli(monkeypatch, capsys, "solve", "deployment", str(EXAMPLE))
    assert code == 0 and "optimal" in out and "A10G" in out and "not from the catalog" in out


def test_same_input_and_time_limit_give_the_same_plan(monkeypatch, capsys):
    outs = []
    for _ in range(2):
        code, out, err = run_cli(monkeypatch, capsys, "solve", "deployment", str(EXAMPLE), "--json", "--time-limit", "5")
        assert code == 0, err
        outs.append(json.loads(out)["solution"])
    assert outs[0] == outs[1]


def _write(tmp_path, mutate) -> str:
    data = yaml.safe_load(EXAMPLE.read_text())
    mutate(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _set(path, value):
    def mutate(data):
        target = data
        for part in path[:-1]:
            target = target[part]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return mutate


BAD = {
    "negative_rate": (_set(("models", 0, "classes", 1, "rate"), -3.0),
                      ["bad.yaml: models[0].classes[1].rate", "non-negative"]),
    "mu_zero": (_set(("models", 0, "configurations", 0, "requests_per_s", "in0-out1"), 0),
                ["models[0].configurations[0].requests_per_s.in0-out1", "positive"]),
    "mu_negative": (_set(("models", 0, "configurations", 1, "requests_per_s", "in1-out1"), -2),
                    ["models[0].configurations[1].requests_per_s.in1-out1"]),
    "unknown_class": (_set(("models", 0, "configurations", 0, "requests_per_s", "in9-out9"), 3.0),
                      ["models[0].configurations[0].requests_per_s.in9-out9: unknown class"]),
    "price_missing": (_set(("gpus", 1, "price_per_gpu_hour"), KeyError), ["gpus[1].price_per_gpu_hour: required"]),
    "alias_not_rewritten": (lambda d: d["gpus"][1].pop("memory_gb"),
                            ["gpus[1].name", "'A100-80GB' is not a catalog GPU name", "A100-80GB-PCIe", "A100-80GB-SXM"]),
    "unknown_gpu_without_specs": (lambda d: d["gpus"][0].pop("memory_gb"), ["gpus[0].name", "'A10G' is not in the GPU catalog"]),
    "gpu_not_listed": (_set(("models", 0, "configurations", 0, "gpu"), "L4"), ["configurations[0].gpu", "'L4' is not in gpus"]),
    "class_nobody_serves": (lambda d: [c["requests_per_s"].pop("in1-out1") for c in d["models"][0]["configurations"]],
                            ["models[0].classes[3]", "no configuration"]),
    "both_forms": (_set(("inventory",), []), ["give gpus and models", "not both"]),
    "unknown_key": (_set(("models", 0, "classes", 0, "rte"), 1), ["models[0].classes[0].rte: unknown field"]),
    "rate_text": (_set(("models", 0, "classes", 0, "rate"), "6 req/s"), ["models[0].classes[0].rate"]),
    "duplicate_class": (_set(("models", 0, "classes", 1, "name"), "in0-out0"), ["models[0].classes", "in0-out0"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_naming_file_and_field(case, tmp_path, monkeypatch, capsys):
    mutate, needles = BAD[case]
    code, _, err = run_cli(monkeypatch, capsys, "solve", "deployment", _write(tmp_path, mutate))
    assert_one_line(code, err, *needles)


def test_a_catalog_gpu_by_its_exact_name_and_an_alias_refused_in_cost_plans(tmp_path, monkeypatch, capsys):
    data = yaml.safe_load(EXAMPLE.read_text())
    data["gpus"][1] = {"name": "A100-80GB-SXM", "price_per_gpu_hour": 3.67, "available": 4}
    for conf in data["models"][0]["configurations"]:
        conf["gpu"] = "A100-80GB-SXM" if conf["gpu"] == "A100-80GB" else conf["gpu"]
    path = tmp_path / "exact.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, err = run_cli(monkeypatch, capsys, "solve", "deployment", str(path), "--json")
    assert code == 0, err
    assert "A100-80GB-SXM-tp1" in json.dumps(json.loads(out)["solution"])
    # the older cost-plan form refuses the alias too, instead of reading it as the SXM part
    cost = yaml.safe_load((REPO / "instances/deployment/cost-two-models.yaml").read_text())
    cost["inventory"][0]["gpu"] = "A100-80GB"
    path = tmp_path / "cost.yaml"
    path.write_text(yaml.safe_dump(cost))
    code, _, err = run_cli(monkeypatch, capsys, "solve", "deployment", str(path))
    assert_one_line(code, err, "inventory[0].gpu", "'A100-80GB' is not a catalog GPU name", "A100-80GB-PCIe")


def test_catalog_lookup_without_aliases_names_the_candidates():
    from planner.catalog import find_gpu, gpu_alias_problem

    assert find_gpu("A100-80GB").name == "A100-80GB-SXM"  # the alias table itself is unchanged
    assert find_gpu("A100-80GB", aliases=False) is None
    assert find_gpu("a100-80gb-pcie", aliases=False).name == "A100-80GB-PCIe"  # letter case only
    assert gpu_alias_problem("A100-80GB-SXM") is None and gpu_alias_problem("A10G") is None
    assert "H100-80GB-PCIe" in gpu_alias_problem("H100") and "H100-NVL-94GB" in gpu_alias_problem("H100")


def test_solve_deployment_takes_request_classes_but_not_max_load(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "solve", "deployment", str(EXAMPLE), "--json")
    assert code == 0, err
    assert json.loads(out)["validation"]["feasible"]
    code, _, err = run_cli(monkeypatch, capsys, "solve", "deployment", str(EXAMPLE), "--max-load")
    assert_one_line(code, err, "melange-example.yaml: models: --max-load answers cost plans")


def test_the_compare_harness_runs_request_classes_under_every_method():
    from planner.sweep.compare_all import run_compare_point

    rows = {m: run_compare_point({"family": "deployment", "path": str(EXAMPLE), "method": m, "solver": "highs",
                                  "time_limit": 5.0, "threads": 1, "seed": 0}) for m in ("greedy", "single-type", "milp")}
    assert rows["milp"]["status"] == "optimal" and rows["milp"]["validated"] is True
    for m in ("greedy", "single-type"):
        assert rows[m]["validated"] is True and rows[m]["objective"] >= rows["milp"]["objective"] - 1e-9
    # greedy: every bucket's cheapest $/h per req/s is the A100 (3.67/20 < 1.01/2, ...): 2 A100 = $7.34
    assert rows["greedy"]["objective"] == pytest.approx(7.34)


def test_dominated_configurations_are_left_out_without_changing_the_optimum():
    from planner.deployment.classes import dominated_configurations

    # g-tp2 serves each class at most 2× g-tp1 (1.5× and 2×): two tp1 instances do all a tp2 one does, on the
    # same GPUs at the same price, so tp2 is dominated.  g-tp4 serves class b at 5 > 4 × 1: not dominated.
    # h-tp1 is another GPU type: never compared with g's configurations.
    gpus = [GPUType("g", 1.0, available=6), GPUType("h", 2.5)]
    classes = [RequestClass(0, "a", 7.0), RequestClass(0, "b", 2.5)]
    configs = [Configuration("g-tp1", 0, 0, 1, ((0, 2.0), (1, 1.0))),
               Configuration("g-tp2", 0, 0, 2, ((0, 3.0), (1, 2.0))),
               Configuration("g-tp4", 0, 0, 4, ((0, 6.0), (1, 5.0))),
               Configuration("h-tp1", 0, 1, 1, ((0, 6.0), (1, 2.0)))]
    problem = _problem(gpus, classes, configs)
    assert dominated_configurations(problem) == [1]
    result = solve_class_plan(problem)
    assert result.stats["dominated_configurations"] == 1 and result.validation.feasible
    assert len(result.solution.counts) == 4 and result.solution.counts[1] == 0
    price = [1.0, 2.0, 4.0, 2.5]
    best = min(sum(p * n for p, n in zip(price, counts))
               for counts in itertools.product(range(7), range(4), range(2), range(4))
               if counts[0] + 2 * counts[1] + 4 * counts[2] <= 6 and _lp_routable(problem, counts))
    assert result.objective == pytest.approx(best)


def test_models_that_compete_for_the_inventory_are_solved_jointly():
    # Alone: a (4 req/s) on 1 big ($3, μ 4) rather than 4 small ($4, μ 1); b (4 req/s) on 1 big ($3) or
    # ⌈4/1.5⌉ = 3 small ($3), a tie.  With ONE big GPU in all, a keeps it and b takes 3 small: $3 + $3 = $6;
    # giving it to b instead costs $4 + $3 = $7.
    gpus = [GPUType("small", 1.0), GPUType("big", 3.0, available=1)]
    classes = [RequestClass(0, "x", 4.0), RequestClass(1, "x", 4.0)]
    configs = [Configuration("small", 0, 0, 1, ((0, 1.0),)), Configuration("big", 0, 1, 1, ((0, 4.0),)),
               Configuration("small", 1, 0, 1, ((1, 1.5),)), Configuration("big", 1, 1, 1, ((1, 4.0),))]
    problem = _problem(gpus, classes, configs, models=("a", "b"))
    result = solve_class_plan(problem)
    assert result.status == SolveStatus.OPTIMAL and result.validation.feasible
    assert result.objective == pytest.approx(6.0) and result.solution.counts == (0, 1, 3, 0)
    assert solve_class_plan(problem, decompose=False).objective == pytest.approx(6.0)
