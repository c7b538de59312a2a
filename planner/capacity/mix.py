"""The mixed-fleet answer of `planner capacity`: the cheapest mix of configurations, checked by simulation.

At the scenario's highest rate λ every configuration c swept has a simulated answer N_c (the fewest
workers of c alone meeting the criterion on the point's stream).  One worker of c therefore carries
``μ_c = λ / N_c`` req/s of this workload at the SLOs — a *measured* per-worker rate, the configuration's
capacity in Mélange's sense for the single request class "the whole workload".

1. **Plan** — the deployment family's request-class MILP (`planner.deployment.classes.solve_class_plan`:
   continuous routed rates, integer instances, ``Σ_c x_c = λ``, ``x_c ≤ μ_c·n_c``, GPUs per type ≤
   ``available``) gives the cost-minimal counts n_c with a proven gap.  Every single configuration
   (n_c = N_c) is feasible for it, so without an inventory the plan never costs more than the best
   single configuration; with an inventory (``available`` GPUs of a type) it says what to add.
2. **Check** — the chosen mix runs in the fleet simulator on the same stream (JSQ over the heterogeneous
   workers; a faster worker drains its queue sooner and so takes more requests).  Capacities measured
   one configuration at a time need not add up exactly in a mix, so when the mix misses the criterion,
   one worker of the configuration with the most req/s per $ that still has GPUs left is added and the
   mix simulated again (at most `MAX_REPAIRS` times).  The result says how many were added.

What it assumes: μ_c at λ is taken at one operating point (λ/N_c workers' worth of load each); a mix
runs each worker at a different load, which is exactly what the simulation checks.  Only the headline
rate is planned (the MILP and simulation are per rate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.capacity.points import criterion_check, meets, point_requests, point_worker
from planner.fleet import simulate_fleet

#: Most single-worker additions after the plan before the mixed answer is reported as not met.
MAX_REPAIRS = 24


@dataclass(frozen=True)
class MixedAnswer:
    rate: float
    counts: dict[str, int]  # "GPU TPn" → workers
    gpus: dict[str, int]  # GPU type → GPUs
    usd_per_hour: float
    plan_usd_per_hour: float  # the MILP's plan before any repair
    plan_bound_usd_per_hour: float | None
    plan_status: str
    repairs: int
    met: bool
    p_ttft_s: float
    p_tpot_s: float
    attainment: float
    best_single: str
    best_single_usd_per_hour: float
    capacities: dict[str, float]  # μ_c, req/s per worker
    note: str = ""
    check: dict[str, Any] = field(default_factory=dict)
    inventory: bool = False  # some GPU type has an ``available`` limit

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def line(self) -> str:
        mix = " + ".join(f"{n} × {name}" for name, n in self.counts.items() if n)
        verdict = "meets the criterion" if self.met else "does NOT meet the criterion"
        extra = f" after adding {self.repairs} worker(s) to the MILP's plan" if self.repairs else ""
        within = " within the inventory" if self.inventory else ""
        single = (f"best single configuration{within} {self.best_single} "
                  f"${self.best_single_usd_per_hour:,.2f}/h" if self.best_single_usd_per_hour == self.best_single_usd_per_hour
                  else "no single configuration fits the inventory")
        return f"Mixed fleet at {self.rate:g} req/s: {mix} for ${self.usd_per_hour:,.2f}/h (simulated: {verdict}{extra}); {single}."


def mixed_answer(scenario, table, params: dict[str, dict[str, Any]], configs) -> MixedAnswer | None:
    """The mixed fleet at the highest rate with an answer for at least two configurations (None otherwise)."""
    from planner.deployment.classes import ClassPlanProblem, Configuration, GPUType, RequestClass, solve_class_plan

    if table.empty:
        return None
    top = float(table.rate.max())
    rows = table[table.rate == top]
    if len(rows) < 2:
        return None
    by_conf = {(c.gpu, c.tensor_parallel): c for c in configs}
    gpu_names = sorted({r.gpu for r in rows.itertuples()})
    available = {g.spec.name: getattr(g, "available", None) for g in scenario.gpus}
    gpus = tuple(GPUType(name=g, price_per_gpu_hour=float(by_conf[next(k for k in by_conf if k[0] == g)].price_per_hour),
                         available=available.get(g), source="catalog") for g in gpu_names)
    keys, mus, confs = [], {}, []
    for r in rows.itertuples():
        label = f"{r.gpu} TP{r.tensor_parallel}"
        mu = top / r.workers
        mus[label] = mu
        keys.append((r.gpu, r.tensor_parallel))
        confs.append(Configuration(name=label, model_index=0, gpu_index=gpu_names.index(r.gpu),
                                   tensor_parallel=int(r.tensor_parallel), capacity=((0, mu),)))
    problem = ClassPlanProblem(name=f"capacity mix at {top:g} req/s", models=(scenario.model.name,), gpus=gpus,
                               classes=(RequestClass(model_index=0, name="workload", rate=top),),
                               configurations=tuple(confs),
                               provenance="per-worker rates measured by the fleet simulator at the highest rate")
    plan = solve_class_plan(problem, time_limit=10.0, seed=scenario.seed)
    fits = rows[[available.get(r.gpu) is None or r.gpus <= available[r.gpu] for r in rows.itertuples()]]
    if fits.empty:
        best_label, best_usd = "none within the inventory", float("nan")
    else:
        best = fits.sort_values(["usd_per_hour", "gpus"]).iloc[0]
        best_label, best_usd = f"{best.gpu} TP{best.tensor_parallel}", float(best.usd_per_hour)
    if plan.solution is None:
        return MixedAnswer(top, {}, {}, float("nan"), float("nan"), plan.bound, plan.status.value, 0, False,
                           float("nan"), float("nan"), float("nan"), best_label, best_usd, mus,
                           note=f"no mix within the inventory: {plan.message}",
                           inventory=any(v is not None for v in available.values()))
    counts = np.array(plan.solution.counts, dtype=int)
    key_of = {k: next(p for p in params.values() if p["gpu"]["name"] == k[0] and p["tensor_parallel"] == k[1]
                      and p["rate"] == top) for k in keys}
    specs = {k: point_worker(key_of[k])[0] for k in keys}
    any_params = key_of[keys[0]]
    requests = point_requests(any_params)
    price = problem.instance_price
    plan_usd = float(price @ counts)
    limits = np.array([g.available if g.available is not None else np.inf for g in gpus], float)
    repairs = 0
    while True:
        fleet = [specs[k] for k, n in zip(keys, counts) for _ in range(int(n))]
        result = simulate_fleet(requests, fleet, router=any_params["router"], ttft_s=any_params["ttft_s"],
                                tpot_s=any_params["atgt_s"], strictness=any_params["strictness"])
        ok = meets(any_params, result)
        if ok or repairs >= MAX_REPAIRS:
            break
        used = np.zeros(len(gpus))
        for c, conf in enumerate(confs):
            used[conf.gpu_index] += conf.tensor_parallel * counts[c]
        room = [c for c, conf in enumerate(confs) if used[conf.gpu_index] + conf.tensor_parallel <= limits[conf.gpu_index]]
        if not room:
            break
        c = max(room, key=lambda c: (mus[confs[c].name] / price[c], -c))
        counts[c] += 1
        repairs += 1
    pct = any_params["percentile"] or 99.0
    warm = any_params["warmup_s"]
    gpu_counts: dict[str, int] = {}
    for c, conf in enumerate(confs):
        gpu_counts[gpu_names[conf.gpu_index]] = gpu_counts.get(gpu_names[conf.gpu_index], 0) + conf.tensor_parallel * int(counts[c])
    return MixedAnswer(
        rate=top, counts={conf.name: int(n) for conf, n in zip(confs, counts)}, gpus=gpu_counts,
        usd_per_hour=float(price @ counts), plan_usd_per_hour=plan_usd, plan_bound_usd_per_hour=plan.bound,
        plan_status=plan.status.value, repairs=repairs, met=bool(ok),
        p_ttft_s=float(result.percentile("ttft_s", pct, warm)), p_tpot_s=float(result.percentile("tpot_s", pct, warm)),
        attainment=float(result.attainment(warmup_s=warm)), best_single=best_label, best_single_usd_per_hour=best_usd,
        capacities=mus, check=criterion_check(any_params, result, int(counts.sum())),
        note="" if ok else f"the mix still misses the criterion after {repairs} additions",
        inventory=any(v is not None for v in available.values()),
    )
