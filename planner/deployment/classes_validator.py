"""Independent validator of mixed-fleet plans for request classes (`planner.deployment.classes`).

It shares no code with the formulation, the heuristics or the problem's derived arrays (``pairs``,
``instance_price``): from the raw classes, configurations and GPU types it checks, row by row,

* every route names a class and a configuration of the same model with a capacity for that class, and a
  rate ≥ 0; every count is an integer ≥ 0;
* class rates: the rates routed from class k add up to λ_k (relative tolerance `TOLERANCE`);
* configuration load: ``Σ_k rate_{k,c} / μ_{k,c} ≤ n_c`` (instance-seconds per second, same tolerance);
* GPU inventory: ``Σ_{c on type g} t_c·n_c ≤ G_g``;

and recomputes the cost ``Σ_c n_c·t_c·price_{g(c)}`` ($/h) one configuration at a time.
"""

from __future__ import annotations

import math

from planner.core.result import ValidationReport, Violation

TOLERANCE = 1e-6


def validate_class_plan(problem, solution) -> ValidationReport:
    """Feasibility of ``solution`` (counts, routes) for ``problem`` and its recomputed $/h.

    Violations in this order: ``integrality`` (configuration order), ``route`` (route order),
    ``class_rate``, ``configuration_load``, ``gpu_inventory``.  A plan without one count per configuration
    is not checked further (``shape``, objective NaN)."""
    configs, classes = problem.configurations, problem.classes
    conf_name = [f"{problem.models[conf.model_index]} on {conf.name}" for conf in configs]
    class_name = [f"{problem.models[cl.model_index]}/{cl.name}" for cl in classes]
    if len(solution.counts) != len(configs):
        return ValidationReport(False, math.nan, (Violation("shape", "counts", len(solution.counts), len(configs),
                                                            "one instance count per configuration expected"),))
    violations, counts = _check_integrality(solution.counts, conf_name)
    routed_per_class = [0.0] * len(classes)
    load = [0.0] * len(configs)
    for k, c, rate in solution.routes:
        violations += _check_route(problem, k, c, rate, class_name, conf_name, routed_per_class, load)
    violations += _check_class_rates(problem, routed_per_class, class_name)
    violations += _check_configuration_load(counts, load, conf_name)
    used = _gpus_used(problem, counts)
    violations += _check_gpu_inventory(problem, used)
    details = {"gpus_used": {gpu.name: used[g] for g, gpu in enumerate(problem.gpus)},
               "utilization": {conf_name[c]: (load[c] / counts[c] if counts[c] else 0.0)
                               for c, conf in enumerate(configs) if counts[c] or load[c]}}
    return ValidationReport(not violations, _cost(problem, counts), tuple(violations), details,
                            objective_name="usd_per_hour")


def _check_integrality(raw_counts, conf_name: list[str]) -> tuple[list[Violation], list[int]]:
    """``integrality``: every instance count is an integer ≥ 0.  Returns the violations and the counts the
    other checks use: a bad finite number is truncated to an integer ≥ 0, anything else counts 0."""
    out: list[Violation] = []
    counts = []
    for c, count in enumerate(raw_counts):
        if not isinstance(count, int) or count < 0:
            out.append(Violation("integrality", conf_name[c],
                                 float(count) if isinstance(count, (int, float)) else math.nan, 0.0,
                                 f"{conf_name[c]}: instance count {count!r} is not an integer ≥ 0"))
            count = max(int(count), 0) if isinstance(count, (int, float)) and math.isfinite(count) else 0
        counts.append(count)
    return out, counts


def _check_route(problem, k, c, rate, class_name: list[str], conf_name: list[str], routed_per_class: list[float],
                 load: list[float]) -> list[Violation]:
    """``route``: the route names a class and a configuration of the same model with a capacity μ > 0 for
    that class, and a finite rate ≥ 0 (−`TOLERANCE` allowed).  A valid route adds its rate to the class's
    routed rate and rate/μ to the configuration's load."""
    classes, configs = problem.classes, problem.configurations
    if not (0 <= k < len(classes) and 0 <= c < len(configs)):
        return [Violation("route", f"class {k}, configuration {c}", 0.0, 0.0, "route to nothing")]
    where = f"{class_name[k]} -> {conf_name[c]}"
    if not (isinstance(rate, (int, float)) and math.isfinite(rate)) or rate < -TOLERANCE:
        return [Violation("route", where, float("nan"), 0.0, f"{where}: routed rate {rate!r} is not ≥ 0")]
    if classes[k].model_index != configs[c].model_index:
        return [Violation("route", where, rate, 0.0, f"{where}: the configuration runs another model")]
    mu = dict(configs[c].capacity).get(k)
    if mu is None or not mu > 0:
        return [Violation("route", where, rate, 0.0, f"{where}: no capacity for this class there")]
    routed_per_class[k] += rate
    load[c] += rate / mu
    return []


def _check_class_rates(problem, routed_per_class: list[float], class_name: list[str]) -> list[Violation]:
    """``class_rate``: the rates routed from class k add up to λ_k (relative tolerance `TOLERANCE`, at least
    `TOLERANCE` req/s)."""
    return [Violation("class_rate", class_name[k], routed_per_class[k], cl.rate,
                      f"class {class_name[k]}: {routed_per_class[k]:.6g} req/s routed, rate {cl.rate:.6g}")
            for k, cl in enumerate(problem.classes)
            if abs(routed_per_class[k] - cl.rate) > TOLERANCE * max(cl.rate, 1.0)]


def _check_configuration_load(counts: list[int], load: list[float], conf_name: list[str]) -> list[Violation]:
    """``configuration_load``: ``Σ_k rate_{k,c} / μ_{k,c} ≤ n_c`` (relative and absolute tolerance `TOLERANCE`)."""
    return [Violation("configuration_load", conf_name[c], load[c], counts[c],
                      f"{conf_name[c]}: load {load[c]:.6g} instance-s/s on {counts[c]} instance(s)")
            for c in range(len(counts)) if load[c] > counts[c] * (1 + TOLERANCE) + TOLERANCE]


def _gpus_used(problem, counts: list[int]) -> list[int]:
    """GPUs of each type the plan uses: ``Σ_{c on type g} t_c·n_c``."""
    used = [0] * len(problem.gpus)
    for c, conf in enumerate(problem.configurations):
        used[conf.gpu_index] += counts[c] * conf.tensor_parallel
    return used


def _check_gpu_inventory(problem, used: list[int]) -> list[Violation]:
    """``gpu_inventory``: a GPU type with a stated inventory G_g has ``used ≤ G_g``."""
    return [Violation("gpu_inventory", gpu.name, used[g], gpu.available,
                      f"{used[g]} {gpu.name} GPUs used, {gpu.available} available")
            for g, gpu in enumerate(problem.gpus) if gpu.available is not None and used[g] > gpu.available]


def _cost(problem, counts: list[int]) -> float:
    """``Σ_c n_c·t_c·price_{g(c)}`` ($/h), one configuration at a time."""
    cost = 0.0
    for c, conf in enumerate(problem.configurations):
        cost += counts[c] * conf.tensor_parallel * problem.gpus[conf.gpu_index].price_per_gpu_hour
    return cost
