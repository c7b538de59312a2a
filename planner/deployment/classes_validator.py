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
    """Feasibility of ``solution`` (counts, routes) for ``problem`` and its recomputed $/h."""
    violations: list[Violation] = []
    configs, classes, gpus = problem.configurations, problem.classes, problem.gpus
    conf_name = [f"{problem.models[conf.model_index]} on {conf.name}" for conf in configs]
    class_name = [f"{problem.models[cl.model_index]}/{cl.name}" for cl in classes]
    if len(solution.counts) != len(configs):
        return ValidationReport(False, math.nan, (Violation("shape", "counts", len(solution.counts), len(configs),
                                                            "one instance count per configuration expected"),))
    counts = []
    for c, count in enumerate(solution.counts):
        if not isinstance(count, int) or count < 0:
            violations.append(Violation("integrality", conf_name[c],
                                        float(count) if isinstance(count, (int, float)) else math.nan, 0.0,
                                        f"{conf_name[c]}: instance count {count!r} is not an integer ≥ 0"))
            count = max(int(count), 0) if isinstance(count, (int, float)) and math.isfinite(count) else 0
        counts.append(count)
    routed_per_class = [0.0] * len(classes)
    load = [0.0] * len(configs)
    for k, c, rate in solution.routes:
        if not (0 <= k < len(classes) and 0 <= c < len(configs)):
            violations.append(Violation("route", f"class {k}, configuration {c}", 0.0, 0.0, "route to nothing"))
            continue
        where = f"{class_name[k]} -> {conf_name[c]}"
        if not (isinstance(rate, (int, float)) and math.isfinite(rate)) or rate < -TOLERANCE:
            violations.append(Violation("route", where, float("nan"), 0.0, f"{where}: routed rate {rate!r} is not ≥ 0"))
            continue
        if classes[k].model_index != configs[c].model_index:
            violations.append(Violation("route", where, rate, 0.0, f"{where}: the configuration runs another model"))
            continue
        mu = dict(configs[c].capacity).get(k)
        if mu is None or not mu > 0:
            violations.append(Violation("route", where, rate, 0.0, f"{where}: no capacity for this class there"))
            continue
        routed_per_class[k] += rate
        load[c] += rate / mu
    for k, cl in enumerate(classes):
        if abs(routed_per_class[k] - cl.rate) > TOLERANCE * max(cl.rate, 1.0):
            violations.append(Violation("class_rate", class_name[k], routed_per_class[k], cl.rate,
                                        f"class {class_name[k]}: {routed_per_class[k]:.6g} req/s routed, rate {cl.rate:.6g}"))
    for c, conf in enumerate(configs):
        if load[c] > counts[c] * (1 + TOLERANCE) + TOLERANCE:
            violations.append(Violation("configuration_load", conf_name[c], load[c], counts[c],
                                        f"{conf_name[c]}: load {load[c]:.6g} instance-s/s on {counts[c]} instance(s)"))
    used = [0] * len(gpus)
    cost = 0.0
    for c, conf in enumerate(configs):
        used[conf.gpu_index] += counts[c] * conf.tensor_parallel
        cost += counts[c] * conf.tensor_parallel * gpus[conf.gpu_index].price_per_gpu_hour
    for g, gpu in enumerate(gpus):
        if gpu.available is not None and used[g] > gpu.available:
            violations.append(Violation("gpu_inventory", gpu.name, used[g], gpu.available,
                                        f"{used[g]} {gpu.name} GPUs used, {gpu.available} available"))
    details = {"gpus_used": {gpu.name: used[g] for g, gpu in enumerate(gpus)},
               "utilization": {conf_name[c]: (load[c] / counts[c] if counts[c] else 0.0)
                               for c, conf in enumerate(configs) if counts[c] or load[c]}}
    return ValidationReport(not violations, cost, tuple(violations), details, objective_name="usd_per_hour")
