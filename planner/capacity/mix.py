"""The mixed-fleet answer of `planner capacity`: the cheapest mix of configurations, checked by simulation.

At each rate λ of the scenario every configuration c swept has a simulated answer N_c (the fewest
workers of c alone meeting the criterion on the point's stream).  One worker of c therefore carries
``μ_c = λ / N_c`` req/s of this workload at the SLOs — a *measured* per-worker rate, the configuration's
capacity in Mélange's sense for the single request class "the whole workload".

1. **Plan** — the deployment family's request-class MILP (`planner.deployment.classes.solve_class_plan`:
   continuous routed rates, integer instances, ``Σ_c x_c = λ``, ``x_c ≤ μ_c·n_c``, GPUs per type ≤
   ``available``) gives the cost-minimal counts n_c with a proven gap.  Every single configuration
   (n_c = N_c) is feasible for it, so without an inventory the plan never costs more than the best
   single configuration; with an inventory (``available`` GPUs of a type) it says what to add.
2. **Check** — the chosen mix runs in the fleet simulator on the same stream, routed as the MILP splits
   the load (`capacity_routing`: each request to configuration c by smooth weighted round robin with
   weights n_c·μ_c, then JSQ among c's workers; plain JSQ over mixed GPU types sends a slower worker
   about as many requests as a faster one).  Capacities measured one configuration at a time need not
   add up exactly in a mix, so when the mix misses the criterion, one worker of the configuration whose
   requests miss their SLOs the most (and that still has GPUs left) is added and the mix simulated
   again (at most `MAX_REPAIRS` times).  The result says how many were added.  A mix that
   is exactly the best single configuration at its own answer is not simulated again (its point's
   simulation is the same run), and when the repaired mix would cost more than the best single
   configuration within the inventory, that configuration's checked answer is reported instead
   (``source`` says which), so without an inventory the mixed answer never costs more than it.

What it assumes: μ_c at λ is taken at one operating point (λ/N_c workers' worth of load each); a mix
runs each worker at a different load, which is exactly what the simulation checks.  Every rate is
planned on its own (`mixed_answers`: one MILP and one checked simulation per rate, on that rate's
stream); `planner.capacity.classes` refines the single class into size buckets.
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
    capacities: dict[str, float]  # μ_c, req/s per worker (one class); per class in ``class_capacities``
    note: str = ""
    check: dict[str, Any] = field(default_factory=dict)
    inventory: bool = False  # some GPU type has an ``available`` limit
    #: where the reported fleet comes from: "MILP plan", "MILP plan + repairs", or the best single
    #: configuration's own simulated answer (the plan is that configuration, or the repaired mix cost more)
    source: str = "MILP plan"
    kind: str = "one class"  # or "N size classes" (`planner.capacity.classes`)
    classes: dict[str, float] = field(default_factory=dict)  # class → req/s (size classes only)
    class_capacities: dict[str, dict[str, float]] = field(default_factory=dict)  # class → config → μ_{k,c}
    routing: dict[str, dict[str, float]] = field(default_factory=dict)  # class → config → share of its rate
    one_class_usd_per_hour: float | None = None  # the one-class mixed answer at the same rate (size classes only)
    plan_counts: dict[str, int] = field(default_factory=dict)  # the MILP's plan (workers) before repair or fallback

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def line(self) -> str:
        mix = " + ".join(f"{n} × {name}" for name, n in self.counts.items() if n)
        verdict = "meets the criterion" if self.met else "does NOT meet the criterion"
        extra = f" after adding {self.repairs} worker(s) to the MILP's plan" if self.repairs else ""
        if self.source.startswith("best single"):
            extra = f"; {self.source}"
        within = " within the inventory" if self.inventory else ""
        single = (f"best single configuration{within} {self.best_single} "
                  f"${self.best_single_usd_per_hour:,.2f}/h" if self.best_single_usd_per_hour == self.best_single_usd_per_hour
                  else "no single configuration fits the inventory")
        what = "Mixed fleet" if self.kind == "one class" else f"Mixed fleet over {self.kind}"
        one = ("" if self.one_class_usd_per_hour is None or self.one_class_usd_per_hour != self.one_class_usd_per_hour
               else f"; one-class mix ${self.one_class_usd_per_hour:,.2f}/h")
        return (f"{what} at {self.rate:g} req/s: {mix} for ${self.usd_per_hour:,.2f}/h (simulated: {verdict}{extra})"
                f"{one}; {single}.")


@dataclass
class MixSetting:
    """What every mix at one rate shares: the configurations answered at the rate (in table order), their
    GPU types for the class MILP, workers, the point's stream and the best single configuration."""

    rate: float
    rows: Any  # the table's rows at the rate
    keys: list[tuple[str, int]]  # (GPU, TP) per configuration
    labels: list[str]  # "GPU TPn"
    gpu_names: list[str]
    gpus: tuple  # `planner.deployment.classes.GPUType` per GPU type
    specs: list[Any]  # WorkerSpec per configuration
    params: list[dict[str, Any]]  # the point's parameters per configuration
    requests: Any  # the point's stream (every configuration sees the same)
    best: Any  # the best single configuration's row within the inventory, or None
    inventory: bool

    @property
    def best_label(self) -> str:
        return "none within the inventory" if self.best is None else f"{self.best.gpu} TP{self.best.tensor_parallel}"

    @property
    def best_usd(self) -> float:
        return float("nan") if self.best is None else float(self.best.usd_per_hour)

    def gpu_index(self, c: int) -> int:
        return self.gpu_names.index(self.keys[c][0])

    def price(self) -> np.ndarray:
        """$/h of one worker of each configuration."""
        return np.array([self.gpus[self.gpu_index(c)].price_per_gpu_hour * tp for c, (_, tp) in enumerate(self.keys)])

    def room(self, counts: np.ndarray) -> list[int]:
        """Configurations one more worker of which still fits the inventory."""
        used = np.zeros(len(self.gpus))
        for c, (_, tp) in enumerate(self.keys):
            used[self.gpu_index(c)] += tp * counts[c]
        limits = [g.available if g.available is not None else np.inf for g in self.gpus]
        return [c for c, (_, tp) in enumerate(self.keys) if used[self.gpu_index(c)] + tp <= limits[self.gpu_index(c)]]


def mix_setting(scenario, table, params: dict[str, dict[str, Any]], configs, rate: float) -> MixSetting | None:
    """The `MixSetting` at ``rate``; None when fewer than two configurations have an answer there."""
    rows = table[table.rate == rate]
    if len(rows) < 2:
        return None
    prices = {c.gpu: float(c.price_per_hour) for c in configs}
    available = {g.spec.name: getattr(g, "available", None) for g in scenario.gpus}
    return build_setting(rows, params, rate, prices, available)


def build_setting(rows, params: dict[str, dict[str, Any]], rate: float, prices: dict[str, float],
                  available: dict[str, int | None]) -> MixSetting:
    """The `MixSetting` of the answered rows at ``rate``: GPU types with price and inventory (``available``:
    GPU type → GPUs it may use, None: unlimited), each configuration's worker and point, the rate's stream,
    and the cheapest single configuration within the inventory."""
    from planner.deployment.classes import GPUType

    gpu_names = sorted({r.gpu for r in rows.itertuples()})
    gpus = tuple(GPUType(name=g, price_per_gpu_hour=float(prices[g]), available=available.get(g), source="catalog")
                 for g in gpu_names)
    keys = [(r.gpu, int(r.tensor_parallel)) for r in rows.itertuples()]
    point = [next(p for p in params.values() if p["gpu"]["name"] == g and p["tensor_parallel"] == tp
                  and p["rate"] == rate) for g, tp in keys]
    fits = rows[[available.get(r.gpu) is None or r.gpus <= available[r.gpu] for r in rows.itertuples()]]
    best = None if fits.empty else next(fits.sort_values(["usd_per_hour", "gpus"]).itertuples())
    return MixSetting(rate, rows, keys, [f"{g} TP{tp}" for g, tp in keys], gpu_names, gpus,
                      [point_worker(p)[0] for p in point], point, point_requests(point[0]), best,
                      any(v is not None for v in available.values()))


def check_mix(setting: MixSetting, counts: np.ndarray, *, groups=None, worst=None) -> dict[str, Any]:
    """Simulate ``counts`` workers per configuration on the rate's stream and repair until the criterion holds.

    ``groups(counts)`` → (request groups, worker groups) for class-aware routing (None: the scenario's
    router over every worker).  Repair: one worker is added to ``worst(result, counts)`` (a configuration,
    or None) or, without ``worst``, to the configuration with the most req/s per $ among those with room
    in the inventory — at most `MAX_REPAIRS` times.  When a mix is exactly the best single configuration
    at its own answer, or when the repaired mix would cost more than that configuration, its own checked
    answer (the point's simulation, same stream and router) is taken instead.  Returns the fleet, its
    verdict and figures (the keys of `MixedAnswer`)."""
    price = setting.price()
    params = setting.params[0]
    pct = params["percentile"] or 99.0
    warm = params["warmup_s"]
    counts = np.array(counts, dtype=int)
    best = setting.best
    best_c = None if best is None else setting.keys.index((best.gpu, int(best.tensor_parallel)))
    mu = np.array([setting.rate / int(r.workers) for r in setting.rows.itertuples()])

    def single_answer(source: str) -> dict[str, Any]:
        only = np.zeros(len(counts), int)
        only[best_c] = int(best.workers)
        return {"counts": only, "met": bool(best.validation["feasible"]), "p_ttft_s": float(best.p_ttft_s),
                "p_tpot_s": float(best.p_tpot_s), "attainment": float(best.attainment), "check": best.validation,
                "source": source, "repairs": 0}

    repairs = 0
    while True:
        if best_c is not None and counts[best_c] == int(best.workers) and counts.sum() == counts[best_c]:
            return single_answer("best single configuration (the plan is that configuration at its own answer)")
        if best_c is not None and float(price @ counts) > setting.best_usd + 1e-9:
            return single_answer("best single configuration (the repaired mix cost more)" if repairs else
                                 "best single configuration (the MILP's plan costs more under these capacities)")
        fleet = [setting.specs[c] for c, n in enumerate(counts) for _ in range(int(n))]
        rgroup, wgroup = groups(counts) if groups is not None else (None, None)
        result = simulate_fleet(setting.requests, fleet, router=params["router"], ttft_s=params["ttft_s"],
                                tpot_s=params["atgt_s"], strictness=params["strictness"],
                                request_groups=rgroup, worker_groups=wgroup)
        ok = meets(params, result)
        if ok or repairs >= MAX_REPAIRS:
            break
        room = setting.room(counts)
        pick = worst(result, counts) if worst is not None else max(room, key=lambda c: (mu[c] / price[c], -c),
                                                                   default=None)
        if pick is None or pick not in room:
            break
        counts[pick] += 1
        repairs += 1
    return {"counts": counts, "met": bool(ok), "p_ttft_s": float(result.percentile("ttft_s", pct, warm)),
            "p_tpot_s": float(result.percentile("tpot_s", pct, warm)), "attainment": float(result.attainment(warmup_s=warm)),
            "check": criterion_check(params, result, int(counts.sum())),
            "source": "MILP plan + repairs" if repairs else "MILP plan", "repairs": repairs,
            "note": "" if ok else f"the mix still misses the criterion after {repairs} additions"}


def capacity_routing(setting: MixSetting):
    """Routing of the one-class mixed check: (``groups``, ``worst``) for `check_mix`.

    Each request goes to configuration c by smooth weighted round robin with weights n_c·μ_c (the req/s
    the c-workers of the mix carry under their measured per-worker rates — the MILP's own load split),
    then by JSQ among that configuration's workers; the split follows the counts through the repairs.
    A repair adds a worker to the configuration whose requests miss their SLOs the most.  Plain JSQ over
    mixed GPU types sends a slower worker about as many requests as a faster one (short queues look
    alike), which the measured capacities do not assume."""
    from planner.capacity.classes import _worst, split_requests  # noqa: PLC0415 (classes imports this module)

    mu = np.array([setting.rate / int(r.workers) for r in setting.rows.itertuples()])
    one_class = np.zeros(setting.requests.n, np.int64)

    def groups(counts):
        shares = {0: [(c, float(n) * mu[c]) for c, n in enumerate(counts) if n > 0]}
        return split_requests(one_class, shares), np.repeat(np.arange(len(counts)), counts)

    def worst(result, counts):
        return _worst(setting, setting.params[0], np.repeat(np.arange(len(counts)), counts))(result, counts)

    return groups, worst


def gpu_counts(setting: MixSetting, counts: np.ndarray) -> dict[str, int]:
    out: dict[str, int] = {}
    for c, (gpu, tp) in enumerate(setting.keys):
        out[gpu] = out.get(gpu, 0) + tp * int(counts[c])
    return out


def mixed_answers(scenario, table, params: dict[str, dict[str, Any]], configs) -> list[MixedAnswer]:
    """The mixed fleet at every rate of the scenario with an answer for at least two configurations,
    in rate order (`mixed_answer` per rate)."""
    if table.empty:
        return []
    answers = [mixed_answer(scenario, table, params, configs, rate=float(r)) for r in sorted(set(table.rate))]
    return [a for a in answers if a is not None]


def mixed_answer(scenario, table, params: dict[str, dict[str, Any]], configs,
                 rate: float | None = None) -> MixedAnswer | None:
    """The mixed fleet at ``rate`` (default: the highest) when at least two configurations have an answer
    there (None otherwise)."""
    from planner.deployment.classes import ClassPlanProblem, Configuration, RequestClass, solve_class_plan

    if table.empty:
        return None
    top = float(table.rate.max()) if rate is None else float(rate)
    setting = mix_setting(scenario, table, params, configs, top)
    if setting is None:
        return None
    mus = {label: top / int(r.workers) for label, r in zip(setting.labels, setting.rows.itertuples())}
    confs = tuple(Configuration(name=label, model_index=0, gpu_index=setting.gpu_index(c),
                                tensor_parallel=setting.keys[c][1], capacity=((0, mus[label]),))
                  for c, label in enumerate(setting.labels))
    problem = ClassPlanProblem(name=f"capacity mix at {top:g} req/s", models=(scenario.model.name,), gpus=setting.gpus,
                               classes=(RequestClass(model_index=0, name="workload", rate=top),),
                               configurations=confs,
                               provenance=f"per-worker rates measured by the fleet simulator at {top:g} req/s")
    plan = solve_class_plan(problem, solver=scenario.solver, time_limit=10.0, seed=scenario.seed)
    if plan.solution is None:
        return MixedAnswer(top, {}, {}, float("nan"), float("nan"), plan.bound, plan.status.value, 0, False,
                           float("nan"), float("nan"), float("nan"), setting.best_label, setting.best_usd, mus,
                           note=f"no mix within the inventory: {plan.message}", inventory=setting.inventory,
                           source="none")
    planned = np.array(plan.solution.counts, dtype=int)
    groups, worst = capacity_routing(setting)
    got = check_mix(setting, planned, groups=groups, worst=worst)
    counts = got["counts"]
    return MixedAnswer(
        rate=top, counts={label: int(n) for label, n in zip(setting.labels, counts)}, gpus=gpu_counts(setting, counts),
        usd_per_hour=float(setting.price() @ counts), plan_usd_per_hour=float(setting.price() @ planned),
        plan_bound_usd_per_hour=plan.bound, plan_status=plan.status.value, repairs=got["repairs"], met=got["met"],
        p_ttft_s=got["p_ttft_s"], p_tpot_s=got["p_tpot_s"], attainment=got["attainment"],
        best_single=setting.best_label, best_single_usd_per_hour=setting.best_usd, capacities=mus, check=got["check"],
        note=got.get("note", ""), inventory=setting.inventory, source=got["source"],
        plan_counts={label: int(n) for label, n in zip(setting.labels, planned)},
    )
