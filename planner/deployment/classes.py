"""Cost-minimal mixed fleet for request classes (Mélange's model, solved exactly, with several models).

Sets: models m; request classes k (size buckets or SLO classes), each of one model m(k); GPU types g;
configurations c = (model m(c), GPU type g(c), TP degree t_c); pairs p = (k, c) with m(k) = m(c) and a
capacity μ_{k,c} > 0 (the requests/s one instance of c sustains within the SLOs when it serves class k
alone).  A class without a capacity on c cannot be routed to c.

Data: rate λ_k ≥ 0 (requests/s), price π_g ($ per GPU-hour), optional inventory G_g (GPUs of type g).

Variables: routed rates ``x_{k,c} ≥ 0`` (continuous: any class's load may be split over any
configuration), instances ``n_c ∈ ℤ≥0``.

* objective:        ``min Σ_c π_{g(c)}·t_c·n_c``   ($/h)
* class rates:      ``Σ_c x_{k,c} = λ_k``           for every class k
* configuration load: ``Σ_k x_{k,c} / μ_{k,c} ≤ n_c``  for every configuration c (one load row per
  configuration: instance-seconds of work per second; the reading of μ is that a class-k request takes
  ``1/μ_{k,c}`` of one instance's time, so a mix of classes fits when the time shares add to ≤ 1 per
  instance, which is Mélange's load row)
* GPU inventory:    ``Σ_{c: g(c)=g} t_c·n_c ≤ G_g``   for every type g with an inventory (shared by
  every model)

Reading choices: the load row is the fluid (time-share) model of Mélange (arXiv 2404.14527, §5): it
ignores that one instance's capacity for a mix can differ from the time-weighted mix of its per-class
capacities; its answer is checked by the fleet simulator, not assumed.  Mélange itself discretises each
bucket's rate into ``slice_factor`` equal slices and assigns every slice wholly to one GPU type
(binaries); with continuous x_{k,c} the model above is its limit as the slice factor grows, so its
optimum is never above Mélange's for any slice factor.

The solve (`solve_class_plan`, the phases `CLASS_PHASES`: ``per_model``, ``build``, ``lp``, ``heuristics``,
``milp``, ``milp_plan``, ``answer``): with several models, each model alone with the whole inventory first
(`_by_model`: the sum of their bounds bounds the joint problem, and their plans side by side, when they
fit the inventory, are optimal together); configurations dominated by another of the same model and
GPU type left out (`dominated_configurations`, optimum unchanged); the LP relaxation (bound; infeasible
⇒ no fleet serves the rates within the inventory); plans without the MILP (`lp_ceiling`,
`greedy_classes`, `single_configuration`); then, unless one already meets the bound, the MILP
warm-started from the cheapest valid one, with a node budget from its nominal cost
(`class_milp_root_seconds`, `class_milp_node_seconds`) under a time limit.  Every plan goes through
`planner.deployment.classes_validator` (no code shared with this module); a MILP objective that
disagrees with the validator is never reported optimal (`planner.deployment.plan_pipeline`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from planner.core import plan_fields as pf
from planner.core.phases import Phase, run_phases
from planner.core.result import Result
from planner.core.work import WorkClock
from planner.deployment import effort
from planner.deployment.plan_pipeline import PlanState, best_valid, final_answer, take_milp_outcome, with_phases
from planner.deployment.solution import MAX_PLAN_COUNT
from planner.solver import LinearModel, ModelBuilder, SolveOptions, SolveStatus, VarBlock, solve

FAMILY = "deployment"


# ---- data ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GPUType:
    """One accelerator type of the fleet: its price, optional inventory, and where its specs come from."""

    name: str
    price_per_gpu_hour: float
    available: int | None = None  # GPUs that may be used; None: no limit
    memory_gb: float | None = None
    source: str = "given"  # "catalog" (looked up by its exact catalog name) or "given" (specs in the file)


@dataclass(frozen=True)
class RequestClass:
    """Requests of one model in one size bucket (or SLO class), arriving at ``rate`` requests/s."""

    model_index: int
    name: str
    rate: float


@dataclass(frozen=True)
class Configuration:
    """``tensor_parallel`` GPUs of type ``gpu_index`` running one instance of model ``model_index``;
    ``capacity``: (class index, μ) pairs, μ = requests/s one instance sustains for that class alone."""

    name: str
    model_index: int
    gpu_index: int
    tensor_parallel: int
    capacity: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class ClassPlanProblem:
    """Route every class's rate over configurations and choose instance counts at least $/h."""

    name: str
    models: tuple[str, ...]
    gpus: tuple[GPUType, ...]
    classes: tuple[RequestClass, ...]
    configurations: tuple[Configuration, ...]
    #: where the capacities and prices come from (printed with every answer)
    provenance: str = ""

    @cached_property
    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(class index, configuration index, μ) of every routable pair, configuration-major."""
        ks, cs, mus = [], [], []
        for c, conf in enumerate(self.configurations):
            for k, mu in conf.capacity:
                ks.append(k)
                cs.append(c)
                mus.append(mu)
        return np.array(ks, np.int64), np.array(cs, np.int64), np.array(mus, float)

    @cached_property
    def instance_price(self) -> np.ndarray:
        """$/h of one instance of each configuration: ``π_{g(c)}·t_c``."""
        return np.array([self.gpus[c.gpu_index].price_per_gpu_hour * c.tensor_parallel for c in self.configurations])

    @property
    def rates(self) -> np.ndarray:
        return np.array([k.rate for k in self.classes])

    def class_label(self, k: int) -> str:
        return f"{self.models[self.classes[k].model_index]}/{self.classes[k].name}"

    def config_label(self, c: int) -> str:
        conf = self.configurations[c]
        return f"{self.models[conf.model_index]} on {conf.name}"


@dataclass(frozen=True)
class ClassPlanSolution:
    """``counts[c]`` instances of configuration c; ``routes``: (class k, configuration c, requests/s)."""

    counts: tuple[int, ...]
    routes: tuple[tuple[int, int, float], ...]
    method: str
    config_labels: tuple[str, ...] = ()
    class_labels: tuple[str, ...] = ()
    class_rates: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        label = lambda seq, i: seq[i] if seq else str(i)  # noqa: E731
        routing: dict[str, dict[str, float]] = {}
        for k, c, r in self.routes:
            rate = self.class_rates[k] if self.class_rates else 0.0
            routing.setdefault(label(self.class_labels, k), {})[label(self.config_labels, c)] = \
                r / rate if rate > 0 else 0.0
        return {
            "kind": "class_plan",
            "method": self.method,
            "instances": [{"configuration": label(self.config_labels, c), "count": n}
                          for c, n in enumerate(self.counts) if n],
            "routed_rps": [{"class": label(self.class_labels, k), "configuration": label(self.config_labels, c),
                            "requests_per_s": r} for k, c, r in self.routes],
            "routing_fractions": routing,
        }

    @classmethod
    def from_dict(cls, problem: "ClassPlanProblem", data: Any) -> "ClassPlanSolution":
        """The plan in ``data`` (the mapping `to_dict` writes, or one written by hand)::

            {"kind": "class_plan", "method": "current",
             "instances": [{"configuration": "llama2-7b on A10G-tp1", "count": 2}],
             "routed_rps": [{"class": "llama2-7b/short", "configuration": "llama2-7b on A10G-tp1",
                             "requests_per_s": 8.0}]}

        A configuration is named by its label ``<model> on <configuration name>``, a class by
        ``<model>/<class name>``.  ``instances`` gives each configuration's count (a whole number ≥ 0, at
        most `MAX_PLAN_COUNT`; one left out has none; listed twice is refused).  The routes are
        ``routed_rps`` (requests/s per class and configuration, ≥ 0) or, when that key is absent,
        ``routing_fractions`` (``{class: {configuration: share of the class's rate}}``).  A route the
        instance cannot serve (another model, no capacity) or rates not adding up to the class's rate are
        read as written: the validator reports them."""
        data = pf.mapping(data, "", allowed=("kind", "method", "instances", "routed_rps", "routing_fractions"),
                          required=("instances",))
        pf.kind(data, ("class_plan",), "class_plan")
        method = pf.name(data.get("method", "plan"), "method")
        configs = tuple(problem.config_label(c) for c in range(len(problem.configurations)))
        classes = tuple(problem.class_label(k) for k in range(len(problem.classes)))
        config_index = {name: c for c, name in enumerate(configs)}
        class_index = {name: k for k, name in enumerate(classes)}
        counts = [0] * len(configs)
        listed: dict[int, int] = {}
        for e, entry in enumerate(pf.items(data["instances"], "instances")):
            field = pf.join("instances", e)
            entry = pf.mapping(entry, field, allowed=("configuration", "count"), required=("configuration", "count"))
            c = pf.lookup(entry["configuration"], config_index, pf.join(field, "configuration"), "configuration")
            if c in listed:
                pf.refuse(field, f"configuration {configs[c]!r} is listed twice "
                                 f"(instances[{listed[c]}] and instances[{e}])")
            listed[c] = e
            counts[c] = pf.whole(entry["count"], pf.join(field, "count"), maximum=MAX_PLAN_COUNT)
        routes: list[tuple[int, int, float]] = []
        if "routed_rps" in data:
            for e, entry in enumerate(pf.items(data["routed_rps"], "routed_rps")):
                field = pf.join("routed_rps", e)
                entry = pf.mapping(entry, field, allowed=("class", "configuration", "requests_per_s"),
                                   required=("class", "configuration", "requests_per_s"))
                k = pf.lookup(entry["class"], class_index, pf.join(field, "class"), "class")
                c = pf.lookup(entry["configuration"], config_index, pf.join(field, "configuration"), "configuration")
                routes.append((k, c, pf.number(entry["requests_per_s"], pf.join(field, "requests_per_s"))))
        elif "routing_fractions" in data:
            for class_name, shares in pf.mapping(data["routing_fractions"], "routing_fractions").items():
                field = pf.join("routing_fractions", class_name)
                k = pf.lookup(class_name, class_index, field, "class")
                for config_name, share in pf.mapping(shares, field).items():
                    c = pf.lookup(config_name, config_index, pf.join(field, config_name), "configuration")
                    routes.append((k, c, pf.number(share, pf.join(field, config_name)) * problem.classes[k].rate))
        else:
            pf.refuse("routed_rps", "required key is missing (or give routing_fractions)")
        return cls(tuple(counts), tuple(routes), method, configs, classes,
                   tuple(float(cl.rate) for cl in problem.classes))


def make_solution(problem: ClassPlanProblem, counts: np.ndarray, routed: np.ndarray, method: str) -> ClassPlanSolution:
    """A solution from counts per configuration and routed rates per pair (`ClassPlanProblem.pairs` order);
    rates below 1e-12 of their class's rate are dropped (solver round-off)."""
    ks, cs, _ = problem.pairs
    rates = problem.rates
    routes = tuple((int(k), int(c), float(r)) for k, c, r in zip(ks, cs, np.maximum(routed, 0.0))
                   if r > 1e-12 * max(rates[k], 1e-300))
    return ClassPlanSolution(tuple(int(round(n)) for n in counts), routes, method,
                             tuple(problem.config_label(c) for c in range(len(problem.configurations))),
                             tuple(problem.class_label(k) for k in range(len(problem.classes))),
                             tuple(float(r) for r in rates))


# ---- formulation -----------------------------------------------------------------------------------

def define_instances(builder: ModelBuilder, problem: ClassPlanProblem) -> VarBlock:
    """``n_c ∈ ℤ≥0`` with cost ``π_{g(c)}·t_c``; ``n_c ≤ ⌊G_{g(c)} / t_c⌋`` when the type has an inventory."""
    upper = np.array([math.inf if problem.gpus[c.gpu_index].available is None
                      else problem.gpus[c.gpu_index].available // c.tensor_parallel for c in problem.configurations])
    return builder.add_variables("instances", len(problem.configurations), lower=0.0, upper=upper, integer=True,
                                 cost=problem.instance_price)


def define_routed_rates(builder: ModelBuilder, problem: ClassPlanProblem) -> VarBlock:
    """``0 ≤ x_{k,c} ≤ λ_k`` for every routable pair (k, c)."""
    ks, _, _ = problem.pairs
    return builder.add_variables("routed_rate", len(ks), lower=0.0, upper=problem.rates[ks])


def define_class_rates(builder: ModelBuilder, problem: ClassPlanProblem, x: VarBlock) -> None:
    """``Σ_c x_{k,c} = λ_k`` for every class k (every request is served somewhere)."""
    ks, _, _ = problem.pairs
    rates = problem.rates
    builder.add_constraints("class_rate", len(problem.classes), ks, x.columns, np.ones(len(ks)), lower=rates,
                            upper=rates, label=lambda r: f"class_rate[{problem.class_label(r)}]")


def define_configuration_load(builder: ModelBuilder, problem: ClassPlanProblem, x: VarBlock, n: VarBlock) -> None:
    """``Σ_k x_{k,c} / μ_{k,c} − n_c ≤ 0`` for every configuration c (instance-seconds per second)."""
    ks, cs, mus = problem.pairs
    C = len(problem.configurations)
    rows = np.concatenate([cs, np.arange(C)])
    cols = np.concatenate([x.columns, n.columns])
    vals = np.concatenate([1.0 / mus, -np.ones(C)])
    builder.add_constraints("configuration_load", C, rows, cols, vals, upper=0.0,
                            label=lambda r: f"configuration_load[{problem.config_label(r)}]")


def define_gpu_inventory(builder: ModelBuilder, problem: ClassPlanProblem, n: VarBlock) -> None:
    """``Σ_{c: g(c)=g} t_c·n_c ≤ G_g`` for every GPU type g with an inventory (all models share it)."""
    limited = [g for g, gpu in enumerate(problem.gpus) if gpu.available is not None]
    if not limited:
        return
    row_of = {g: r for r, g in enumerate(limited)}
    cols = [c for c, conf in enumerate(problem.configurations) if conf.gpu_index in row_of]
    rows = [row_of[problem.configurations[c].gpu_index] for c in cols]
    vals = [float(problem.configurations[c].tensor_parallel) for c in cols]
    upper = np.array([float(problem.gpus[g].available) for g in limited])
    builder.add_constraints("gpu_inventory", len(limited), np.array(rows, np.int64), n.col(np.array(cols, np.int64)),
                            np.array(vals), upper=upper,
                            label=lambda r: f"gpu_inventory[{problem.gpus[limited[r]].name}]")


def dominated_configurations(problem: ClassPlanProblem) -> list[int]:
    """Configurations an optimal plan can do without: c' is dominated by c when both run the same model
    on the same GPU type, ``r = t_{c'} / t_c`` is an integer, c serves every class c' serves, and
    ``μ_{k,c'} ≤ r·μ_{k,c}`` for each of them (on equality, the later index is the dominated one).

    Proof: replace each instance of c' by r instances of c: the same GPUs of the same type (``r·t_c =
    t_{c'}``), hence the same cost and inventory use; the rate ``x_{k,c'}`` moved to c needs
    ``x_{k,c'}/μ_{k,c} ≤ r·x_{k,c'}/μ_{k,c'}`` instance-s/s, so c's load row holds with the r·n_{c'}
    extra instances.  Removing dominated configurations one at a time (each by one that is kept: the
    relation is transitive and the tie rule acyclic) keeps an optimal plan.  ∎"""
    caps = [dict(conf.capacity) for conf in problem.configurations]
    out = []
    for j, cj in enumerate(problem.configurations):
        for i, ci in enumerate(problem.configurations):
            if i == j or ci.model_index != cj.model_index or ci.gpu_index != cj.gpu_index:
                continue
            if cj.tensor_parallel % ci.tensor_parallel or not caps[j].keys() <= caps[i].keys():
                continue
            r = cj.tensor_parallel // ci.tensor_parallel
            if all(mu <= r * caps[i][k] for k, mu in caps[j].items()):
                equal = r == 1 and caps[i] == caps[j]
                if not equal or i < j:
                    out.append(j)
                    break
    return out


def without_dominated(problem: ClassPlanProblem) -> tuple[ClassPlanProblem, list[int]]:
    """(the problem without `dominated_configurations`, the kept configurations' original indices)."""
    drop = set(dominated_configurations(problem))
    keep = [c for c in range(len(problem.configurations)) if c not in drop]
    if not drop:
        return problem, keep
    return replace(problem, configurations=tuple(problem.configurations[c] for c in keep)), keep


def build_class_plan_model(problem: ClassPlanProblem) -> tuple[LinearModel, VarBlock, VarBlock]:
    """min Σ price·n  s.t. class rates, configuration load, GPU inventory."""
    builder = ModelBuilder(f"deployment-classes:{problem.name}", sense="min")
    n = define_instances(builder, problem)
    x = define_routed_rates(builder, problem)
    define_class_rates(builder, problem, x)
    define_configuration_load(builder, problem, x, n)
    define_gpu_inventory(builder, problem, n)
    return builder.build(), n, x


# ---- plans without the MILP ------------------------------------------------------------------------

def _counts_for(problem: ClassPlanProblem, routed: np.ndarray) -> np.ndarray:
    """The fewest instances carrying ``routed``: ``n_c = ⌈Σ_k x_{k,c}/μ_{k,c}⌉`` (1e-9 slack for round-off)."""
    _, cs, mus = problem.pairs
    load = np.bincount(cs, weights=routed / mus, minlength=len(problem.configurations))
    return np.ceil(np.maximum(load - 1e-9, 0.0)).astype(np.int64)


def greedy_classes(problem: ClassPlanProblem) -> ClassPlanSolution | None:
    """Classes by decreasing rate (lowest index on ties), each routed over its configurations in order
    of $/h per request/s (``π_c / μ_{k,c}``, lowest index on ties): first into the spare time of
    instances already open (``n_c − load_c`` instance-s/s), then into new instances while the GPU
    inventory has room.  None when some class's rate does not fit."""
    ks, cs, mus = problem.pairs
    score = problem.instance_price[cs] / mus
    free = [math.inf if g.available is None else float(g.available) for g in problem.gpus]
    counts = np.zeros(len(problem.configurations), dtype=np.int64)
    load = np.zeros(len(problem.configurations))
    routed = np.zeros(len(ks))
    for k in sorted(range(len(problem.classes)), key=lambda k: (-problem.classes[k].rate, k)):
        left = problem.classes[k].rate
        idx = np.flatnonzero(ks == k)
        for i in idx[np.lexsort((idx, score[idx]))]:
            if left <= 1e-12 * max(problem.classes[k].rate, 1.0):
                break
            c, mu = int(cs[i]), float(mus[i])
            conf = problem.configurations[c]
            room = (counts[c] - load[c]) * mu  # requests/s the open instances still take
            wanted = math.ceil(max(left - room, 0.0) / mu - 1e-9)
            opened = int(min(wanted, free[conf.gpu_index] // conf.tensor_parallel))
            counts[c] += opened
            free[conf.gpu_index] -= opened * conf.tensor_parallel
            take = min(left, (counts[c] - load[c]) * mu)
            if take > 0:
                routed[i] += take
                load[c] += take / mu
                left -= take
        if left > 1e-9 * max(problem.classes[k].rate, 1.0):
            return None
    return make_solution(problem, counts, routed, "greedy")


def single_configuration(problem: ClassPlanProblem) -> ClassPlanSolution | None:
    """Per model, one configuration serving all its classes (a homogeneous fleet): the one with the least
    ``π_c·⌈Σ_k λ_k/μ_{k,c}⌉``; None when no configuration of some model serves every class with a rate."""
    ks, cs, mus = problem.pairs
    routed = np.zeros(len(ks))
    for m in range(len(problem.models)):
        needed = {k for k, cl in enumerate(problem.classes) if cl.model_index == m and cl.rate > 0}
        best, best_cost = None, math.inf
        for c, conf in enumerate(problem.configurations):
            if conf.model_index != m or not needed <= {k for k, _ in conf.capacity}:
                continue
            idx = np.flatnonzero((cs == c) & np.isin(ks, list(needed)))
            load = float(sum(problem.classes[int(ks[i])].rate / mus[i] for i in idx))
            cost = math.ceil(load - 1e-9) * problem.instance_price[c]
            if cost < best_cost - 1e-12:
                best, best_cost = idx, cost
        if best is None:
            if needed:
                return None
            continue
        routed[best] = [problem.classes[int(ks[i])].rate for i in best]
    return make_solution(problem, _counts_for(problem, routed), routed, "single-type")


def lp_ceiling(problem: ClassPlanProblem, lp_routed: np.ndarray) -> ClassPlanSolution:
    """The LP relaxation's routing with its instance counts rounded up (may exceed an inventory: the
    validator decides)."""
    routed = np.maximum(np.asarray(lp_routed, float), 0.0)
    return make_solution(problem, _counts_for(problem, routed), routed, "lp-ceiling")


HEURISTICS = {"greedy": greedy_classes, "single-type": single_configuration}


def run_class_heuristic(problem: ClassPlanProblem, method: str) -> Result[ClassPlanSolution]:
    """The heuristic ``method`` (`HEURISTICS`), validated (`planner.deployment.runner.run_heuristic`: an
    invalid plan is an error with the plan kept)."""
    from planner.deployment.classes_validator import validate_class_plan
    from planner.deployment.runner import run_heuristic

    return run_heuristic(problem, method, HEURISTICS[method], validate_class_plan, family=FAMILY,
                         none_message=f"{method}: no configuration serves every class of a model")


def class_cost_lower_bound(problem: ClassPlanProblem) -> float:
    """``Σ_k λ_k · min_c π_c / μ_{k,c}`` ($/h), a bound on every plan's cost.

    Proof: the load row gives ``n_c ≥ Σ_k x_{k,c}/μ_{k,c}``, so ``Σ_c π_c·n_c ≥ Σ_k Σ_c (π_c/μ_{k,c})·x_{k,c}
    ≥ Σ_k (min_c π_c/μ_{k,c})·Σ_c x_{k,c} = Σ_k λ_k·min_c π_c/μ_{k,c}``.  ∎"""
    ks, cs, mus = problem.pairs
    best = np.full(len(problem.classes), math.inf)
    np.minimum.at(best, ks, problem.instance_price[cs] / mus)
    rates = problem.rates
    return float(np.where(rates > 0, rates * best, 0.0).sum()) * (1 - 1e-12)


# ---- solve -----------------------------------------------------------------------------------------

#: Relative gap at which a plan counts as optimal (the solver's default ``mip_rel_gap``).
CLASS_REL_GAP = 1e-6

#: Nominal seconds of this MILP (HiGHS, 1 thread), fitted on the benchmark's cases after the dominance
#: reduction (`benchmarks/melange_compare.py`: root 0.1-0.2 s at 1,206 nonzeros, 2.5-2.8 s at 4,832 and 9,664;
#: 4e-3 s per node at 4,832, 1.5e-2 at 9,664) on a shared 2-core EPYC (load average about 2.5).
CLASS_ROOT_FIXED = 0.1
CLASS_ROOT_PER_NONZERO = 5.0e-4
CLASS_NODE_FIXED = 1.0e-3
CLASS_NODE_PER_NONZERO = 1.2e-6
#: Fewest branch-and-bound nodes worth starting the MILP for under a time limit.
MIN_CLASS_NODES = 10


def class_milp_root_seconds(nonzeros: int) -> float:
    return CLASS_ROOT_FIXED + CLASS_ROOT_PER_NONZERO * nonzeros


def class_milp_node_seconds(nonzeros: int) -> float:
    return CLASS_NODE_FIXED + CLASS_NODE_PER_NONZERO * nonzeros


def _lifted(problem: ClassPlanProblem, reduced: ClassPlanProblem, keep: list[int],
            solution: ClassPlanSolution) -> ClassPlanSolution:
    """A solution of ``reduced`` (the configurations ``keep`` of ``problem``) as one of ``problem``."""
    if reduced is problem:
        return solution
    counts = [0] * len(problem.configurations)
    for c, count in enumerate(solution.counts):
        counts[keep[c]] = count
    return ClassPlanSolution(tuple(counts), tuple((k, keep[c], r) for k, c, r in solution.routes), solution.method,
                             tuple(problem.config_label(c) for c in range(len(problem.configurations))),
                             solution.class_labels, solution.class_rates)


def model_subproblem(problem: ClassPlanProblem, m: int) -> tuple[ClassPlanProblem, list[int], list[int]]:
    """Model m alone with the whole GPU inventory: (sub-problem, its classes' and its configurations'
    indices in ``problem``)."""
    classes = [k for k, cl in enumerate(problem.classes) if cl.model_index == m]
    configs = [c for c, conf in enumerate(problem.configurations) if conf.model_index == m]
    local = {k: i for i, k in enumerate(classes)}
    sub = ClassPlanProblem(problem.name, (problem.models[m],), problem.gpus,
                           tuple(replace(problem.classes[k], model_index=0) for k in classes),
                           tuple(replace(problem.configurations[c], model_index=0,
                                         capacity=tuple((local[k], mu) for k, mu in problem.configurations[c].capacity))
                                 for c in configs), problem.provenance)
    return sub, classes, configs


def _by_model(problem: ClassPlanProblem, run: "_Run") -> tuple[ClassPlanSolution | None, list[float]]:
    """Each model solved alone with the whole inventory (`model_subproblem`): (their plans side by side, or
    None when some model has none; each model's lower bound, 0 where there is none).

    The sum of bounds is a lower bound of the joint problem: restricted to model m, a joint plan is a
    plan of m alone with the whole inventory, so it costs at least m's bound; costs add up over the
    models.  So when the plans side by side fit the inventory (the validator decides) and each is
    optimal, they are jointly optimal."""
    counts = [0] * len(problem.configurations)
    routes: list[tuple[int, int, float]] = []
    bounds, complete = [0.0] * len(problem.models), True
    for m in range(len(problem.models)):
        sub, classes, configs = model_subproblem(problem, m)
        left = run.clock.left()
        result = solve_class_plan(sub, solver=run.solver, threads=run.threads, seed=run.seed,
                                  time_limit=None if left is None else left / (2 * (len(problem.models) - m)),
                                  decompose=False)
        run.clock.charge(result.stats.get("nominal_seconds", 0.0))
        if result.bound is None:
            complete = False
            continue
        bounds[m] = float(result.bound)
        if result.solution is None:
            complete = False
            continue
        for c, count in enumerate(result.solution.counts):
            counts[configs[c]] = count
        routes += [(classes[k], configs[c], r) for k, c, r in result.solution.routes]
    if not complete:
        return None, bounds
    return ClassPlanSolution(tuple(counts), tuple(routes), "per-model",
                             tuple(problem.config_label(c) for c in range(len(problem.configurations))),
                             tuple(problem.class_label(k) for k in range(len(problem.classes))),
                             tuple(float(r) for r in problem.rates)), bounds


@dataclass
class _Run:
    clock: WorkClock
    solver: str
    threads: int | None
    seed: int
    notes: list[str] = field(default_factory=list)


def _solve_lp(run: _Run, model: LinearModel):
    relaxed = LinearModel(**{**model.__dict__, "integrality": np.zeros_like(model.integrality)})
    run.clock.charge(effort.cost_lp_seconds(model.num_nonzeros))
    limit = run.clock.time_limit
    wall = None if limit is None else max(run.clock.guard_share * limit - run.clock.wall_seconds(), 0.0)
    return solve(relaxed, run.solver, SolveOptions(time_limit=wall, threads=run.threads, seed=run.seed))


def _solve_milp(run: _Run, model: LinearModel, warm: np.ndarray | None):
    """The MILP with a node limit from the nominal time left (as the cost plan's), or None when its root
    does not fit; no limit without a time limit."""
    nz = model.num_nonzeros
    limit = run.clock.time_limit
    node_limit, wall = None, None
    if limit is not None:
        left = (run.clock.left() or 0.0) - class_milp_root_seconds(nz)
        nodes = max(int(left / class_milp_node_seconds(nz)), 0)
        if nodes < MIN_CLASS_NODES or not run.clock.allows():
            run.notes.append(f"time limit: skipped the MILP ({nz:,} nonzeros: about "
                             f"{class_milp_root_seconds(nz):.2g} s to solve its root)")
            return None
        node_limit = 1 + nodes
        wall = max(run.clock.guard_share * limit - run.clock.wall_seconds(), 0.0)
    outcome = solve(model, run.solver, SolveOptions(time_limit=wall, threads=run.threads, seed=run.seed,
                                                    node_limit=node_limit, warm_start=warm))
    if limit is not None:
        run.clock.charge(class_milp_root_seconds(nz) + class_milp_node_seconds(nz) * (outcome.node_count or 0))
        if "time limit" in (outcome.message or "").lower():
            run.clock.wall_cut = True
    return outcome


@dataclass
class _ClassState(PlanState):
    """The state of one `solve_class_plan` call, filled in by its phases (`CLASS_PHASES`)."""

    problem: ClassPlanProblem | None = None
    run: _Run | None = None
    decompose: bool = True
    per_model: ClassPlanSolution | None = None
    floors: list[float] | None = None
    reduced: ClassPlanProblem | None = None
    keep: list[int] = field(default_factory=list)
    model: LinearModel | None = None
    n: VarBlock | None = None
    x: VarBlock | None = None
    lp: Any = None


def _per_model_phase(s: _ClassState) -> None:
    """Each model alone with the whole inventory (`_by_model`): a bound and a side-by-side plan."""
    s.per_model, s.floors = _by_model(s.problem, s.run)


def _several_models(s: _ClassState) -> bool:
    return len(s.problem.models) > 1


def _build_phase(s: _ClassState) -> None:
    """The MILP without the dominated configurations, its size, and the first bound."""
    problem = s.problem
    s.reduced, s.keep = without_dominated(problem)
    started = time.perf_counter()
    s.model, s.n, s.x = build_class_plan_model(s.reduced)
    s.build = time.perf_counter() - started
    s.stats = {"variables": s.model.num_cols, "integer_variables": s.model.num_integer,
               "constraints": s.model.num_rows, "nonzeros": s.model.num_nonzeros,
               "classes": len(problem.classes), "configurations": len(problem.configurations),
               "dominated_configurations": len(problem.configurations) - len(s.keep)}
    s.bound, s.bound_source = class_cost_lower_bound(problem), "cheapest $/h per req/s of each class"
    if s.floors is not None:
        s.raise_bound(sum(s.floors), "sum of each model's bound alone with the whole inventory")


def _lp_phase(s: _ClassState) -> Result[ClassPlanSolution] | None:
    """The LP relaxation: infeasible ⇒ no fleet serves the rates within the inventory; else a bound."""
    s.lp = _solve_lp(s.run, s.model)
    lp = s.lp
    if lp.status == SolveStatus.INFEASIBLE:
        s.stats.update(nominal_seconds=round(s.run.clock.spent, 6), wall_cut=s.run.clock.wall_cut)
        short = [g.name for g in s.problem.gpus if g.available is not None]
        return Result(family=FAMILY, method="milp", solver=lp.solver, status=SolveStatus.INFEASIBLE, objective=None,
                      bound=None, solve_seconds=time.perf_counter() - s.t0, solution=None, build_seconds=s.build,
                      message="the rates cannot be served within the GPU inventory (" + ", ".join(short)
                      + "): the LP relaxation is infeasible", validation=None, bound_source="", stats=s.stats)
    if lp.status == SolveStatus.OPTIMAL and lp.objective is not None:
        s.raise_bound(float(lp.objective) * (1 - 1e-9), "LP relaxation")
    return None


def _heuristics_phase(s: _ClassState) -> None:
    """The plans without the MILP (per model, `greedy_classes`, `single_configuration`, `lp_ceiling`): the incumbent."""
    from planner.deployment.classes_validator import validate_class_plan

    problem = s.problem
    candidates = [s.per_model, greedy_classes(problem), single_configuration(problem)]
    if s.lp.x is not None:
        candidates.append(_lifted(problem, s.reduced, s.keep, lp_ceiling(s.reduced, s.x.values(s.lp.x))))
    s.run.clock.charge(effort.cost_heuristics_seconds(len(problem.configurations), len(problem.classes)))
    s.best = best_valid(problem, candidates, validate_class_plan)


def _class_warm_start(s: _ClassState) -> np.ndarray | None:
    """The incumbent as a point of the reduced MILP (None without one, or when it uses a dominated configuration)."""
    position = {c: i for i, c in enumerate(s.keep)}
    if s.best is None or any(position.get(c) is None for c, count in enumerate(s.best[1].counts) if count):
        return None
    warm = np.zeros(s.model.num_cols)
    warm[s.n.columns] = [s.best[1].counts[c] for c in s.keep]
    ks, cs, _ = s.reduced.pairs
    where = {(int(k), int(c)): i for i, (k, c) in enumerate(zip(ks, cs))}
    for k, c, r in s.best[1].routes:
        if (k, position.get(c)) in where:
            warm[s.x.col(where[(k, position[c])])] = r
    return warm


def _milp_phase(s: _ClassState) -> None:
    """The MILP warm-started from the incumbent, within its node budget (`_solve_milp`)."""
    s.outcome = _solve_milp(s.run, s.model, _class_warm_start(s))


def _milp_plan_phase(s: _ClassState) -> Result[ClassPlanSolution] | None:
    """The MILP's answer: infeasible ⇒ no integer fleet; else its bound and plan (`take_milp_outcome`)."""
    from planner.deployment.classes_validator import validate_class_plan

    outcome = s.outcome
    if outcome.status == SolveStatus.INFEASIBLE:
        s.stats.update(nodes=outcome.node_count, solver_seconds=round(outcome.seconds, 6),
                       warm_start_accepted=outcome.warm_start_accepted)
        return Result(family=FAMILY, method="milp", solver=outcome.solver, status=SolveStatus.INFEASIBLE,
                      objective=None, bound=None, solve_seconds=time.perf_counter() - s.t0, solution=None,
                      build_seconds=s.build, message="no integer fleet serves the rates within the GPU inventory",
                      validation=None, bound_source="", stats=s.stats)
    take_milp_outcome(s, s.problem, s.model,
                      lambda x: _lifted(s.problem, s.reduced, s.keep,
                                        make_solution(s.reduced, s.n.values(x), s.x.values(x), "milp")),
                      validate_class_plan)
    return None


def _answer_phase(s: _ClassState) -> Result[ClassPlanSolution]:
    """The incumbent with the bound (`final_answer`), with the notes on the time limit."""
    clock = s.run.clock
    clock.charge(effort.cost_validate_seconds(len(s.problem.configurations)))
    s.stats.update(nominal_seconds=round(clock.spent, 6), wall_cut=clock.wall_cut, lower_bound_source=s.bound_source)
    notes = list(s.run.notes)
    if clock.wall_cut:
        notes.append("the wall clock stopped a solver before its nominal budget: this run may not repeat exactly")
    return final_answer(s, FAMILY, notes, CLASS_REL_GAP)


#: The pipeline of `solve_class_plan`, in order (`planner.core.phases`); ``stats["phases"]`` holds their wall seconds.
CLASS_PHASES: tuple[Phase[_ClassState, Result[ClassPlanSolution]], ...] = (
    Phase("per_model", _per_model_phase, when=lambda s: s.decompose and _several_models(s)),
    Phase("build", _build_phase),
    Phase("lp", _lp_phase),
    Phase("heuristics", _heuristics_phase),
    Phase("milp", _milp_phase, when=lambda s: s.needs_milp(CLASS_REL_GAP)),
    Phase("milp_plan", _milp_plan_phase, when=lambda s: s.outcome is not None),
    Phase("answer", _answer_phase),
)


def solve_class_plan(problem: ClassPlanProblem, *, solver: str = "highs", time_limit: float | None = None,
                     threads: int | None = None, seed: int = 0, started: float | None = None,
                     decompose: bool = True) -> Result[ClassPlanSolution]:
    """The cost-minimal mixed fleet with its gap: the phases of `CLASS_PHASES` (the module docstring says
    what each does; `planner.deployment.plan_pipeline` holds the rules shared with cost plans).

    ``time_limit`` covers the whole call in nominal seconds (`planner.deployment.effort` for the LP and
    the reading, this module's constants for the MILP; as `planner.deployment.cost_solve.solve_cost_plan`):
    the same input, seed and limit give the same
    plan; the wall clock is a guard (``stats.wall_cut`` says when it decided).  The bound is the best
    of `class_cost_lower_bound`, the LP relaxation, the MILP's dual bound and, with several models
    (``decompose``), the sum of each model's own bound (`_by_model`, whose side-by-side plan is also a
    candidate: when it fits the inventory the joint MILP is not needed).  ``stats["phases"]``: wall
    seconds per phase run."""
    t0 = time.perf_counter()
    run = _Run(WorkClock(time_limit, started if started is not None else t0), solver, threads, seed)
    if started is not None:
        run.clock.charge(effort.cost_load_seconds(len(problem.configurations)))
    state = _ClassState(t0=t0, problem=problem, run=run, decompose=decompose)
    return with_phases(run_phases(CLASS_PHASES, state), state)
