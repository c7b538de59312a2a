"""The mixed fleet over request size classes (Mélange's idea), measured, planned and checked per rate.

Classes.  The scenario's ``classes`` edges split input and output lengths into buckets
(`planner.capacity.scenario`, Size classes); a request's class k is its (input bucket, output bucket)
(`class_index`).  At rate λ the class rates are ``λ_k = λ · n_k / n`` with n_k of the n requests of
the rate's stream in class k (the stream the fleet is checked on).

**Capacity μ_{k,c}** (requests/s one worker of configuration c sustains for class k alone at the
SLOs).  N_{k,c} = the fewest workers of c whose simulated fleet meets the scenario's criterion on
*class k alone at the whole rate λ*: the rate's arrival times with every request's lengths drawn from
class k (`class_stream`: a seeded sample of the length distribution restricted to the class), searched between
the certified bound `planner.capacity.bound.instance_bound` on that stream and `MAX_FACTOR` × c's
one-class answer (`bracket_search`: first guess the class's bound times c's answer-to-bound ratio on
the whole workload, steps of about 10 % to a bracket, then bisection); ``μ_{k,c} = λ / N_{k,c}``.

Why this reading rather than the fewest workers for class k's own rate λ_k, or the most a single
worker sustains: both measure at a much smaller fleet than the mix runs, so they miss the pooling of
a large fleet (a P99 target is far easier to hold on 20 workers than on one) and, for a light class,
the rounding of ⌈·⌉ at one or two workers dominates.  At the whole rate the class is measured at the
scale the one-class answer is measured at (with one class, μ_{k,c} is exactly that answer's
``μ_c = λ / N_c``), so the two mixes differ only by what the classes add: each class's own per-worker
rate on each configuration.  What it assumes: a worker of c serving a blend of classes has the
time-shared capacity of Mélange's load row ``Σ_k x_{k,c} / μ_{k,c} ≤ n_c``; the simulation checks it.
A class that c cannot serve (no number of workers up to `MAX_FACTOR` × c's one-class answer meets the
criterion, or the bound says none can) gets no capacity on c and is not routed there.

**Plan**: the request-class MILP (`planner.deployment.classes.solve_class_plan`, classes k with λ_k,
configurations with their μ_{k,c}, the GPU inventory) gives instance counts n_c and routed rates
x_{k,c}.

**Check** (class-aware routing): every request of the rate's stream goes to a configuration chosen
by its class's routed-rate split — smooth weighted round robin over the x_{k,c} of its class in
arrival order (`split_requests`: after m requests of class k, configuration c has received m·x_{k,c}/λ_k
of them up to less than one request per configuration) — and then by the scenario's router (JSQ by
default) among that configuration's workers (`planner.fleet.simulate_fleet` with request and worker
groups).  When the fleet misses the criterion, one worker is added to the configuration whose requests
miss their SLOs the most (largest ratio of its measured P-th percentile TTFT or TPOT to the SLO, or
attainment shortfall) that has room in the inventory, and the fleet simulated again
(`planner.capacity.mix.check_mix`, at most `MAX_REPAIRS`, falling back to the best single configuration
as the one-class mix does).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from planner.capacity.bound import instance_bound
from planner.capacity.mix import MAX_REPAIRS, MixedAnswer, check_mix, gpu_counts, mix_setting
from planner.capacity.points import _criterion, meets, point_requests, point_worker
from planner.errors import PlannerError
from planner.fleet import FleetRequests, simulate_fleet
from planner.workloads.lengths import LengthDistribution

#: Lengths sampled from the distribution to draw each class's requests from.
POOL = 200_000
#: A class's worker search stops at this many times the configuration's one-class answer (+ 8).
MAX_FACTOR = 8


def db_name(input_edges, output_edges) -> str:
    """The class-capacity results database in the output directory, one per choice of edges (so changing the
    classes starts a new one and the points' database is resumed as before), e.g. ``classes_in1024_out256.sqlite``."""
    def part(edges) -> str:
        return "-".join(str(e) for e in edges) or "any"

    return f"classes_in{part(input_edges)}_out{part(output_edges)}.sqlite"


__all__ = ["MAX_REPAIRS", "bracket_search", "class_index", "class_mixed_answers", "class_names", "class_points",
           "class_stream", "db_name", "solve_class_capacity", "split_requests"]


def class_index(inputs: np.ndarray, outputs: np.ndarray, input_edges, output_edges) -> np.ndarray:
    """Class of each request: input bucket × (number of output buckets) + output bucket (L ≤ e_1 is bucket 0)."""
    i = np.searchsorted(np.asarray(input_edges, dtype=np.int64), np.asarray(inputs), side="left")
    o = np.searchsorted(np.asarray(output_edges, dtype=np.int64), np.asarray(outputs), side="left")
    return (i * (len(output_edges) + 1) + o).astype(np.int64)


def _bucket(edges, b: int, what: str) -> str:
    if not edges:
        return f"any {what}"
    if b == 0:
        return f"{what} ≤ {edges[0]}"
    if b == len(edges):
        return f"{what} > {edges[-1]}"
    return f"{edges[b - 1]} < {what} ≤ {edges[b]}"


def class_names(input_edges, output_edges) -> list[str]:
    """Names of every class in `class_index` order, e.g. "I ≤ 1024, O > 256"."""
    return [f"{_bucket(input_edges, i, 'I')}, {_bucket(output_edges, o, 'O')}"
            for i in range(len(input_edges) + 1) for o in range(len(output_edges) + 1)]


def class_stream(params: dict[str, Any]) -> FleetRequests:
    """Class ``params["class"]`` alone at the point's rate: the point's arrival times, lengths drawn (seeded)
    from the distribution's samples that fall in the class (module docstring, Capacity)."""
    base = point_requests(params)
    dist = LengthDistribution.model_validate(params["distribution"])
    cap = params["model"]["max_context_tokens"]
    k, ins, outs = params["class"], params["class_input_edges"], params["class_output_edges"]
    pool_i, pool_o = dist.sample(POOL, np.random.default_rng([params["seed"], 23]), cap)
    mine = np.flatnonzero(class_index(pool_i, pool_o, ins, outs) == k)
    if mine.size == 0:  # a class too rare for the pool: the point's own requests of the class
        own = np.flatnonzero(class_index(base.input_tokens, base.output_tokens, ins, outs) == k)
        if own.size == 0:
            raise PlannerError(f"class {k} has no request in the workload")
        pool_i, pool_o, mine = base.input_tokens, base.output_tokens, own
    pick = mine[np.random.default_rng([params["seed"], 29, k]).integers(0, mine.size, base.n)]
    inputs, outputs = np.asarray(pool_i)[pick], np.asarray(pool_o)[pick]
    predicted = np.maximum(np.asarray(dist.predict_output(inputs)), 1)
    predicted = np.minimum(predicted, np.maximum(cap - inputs, 1)).astype(np.int64)
    return FleetRequests(base.arrival_s, inputs, outputs, predicted, f"{base.source}, class {k} lengths only")


def solve_class_capacity(params: dict[str, Any]) -> dict[str, Any]:
    """Sweep function: N_{k,c} for one (rate, class, configuration) (module docstring, Capacity)."""
    start = time.perf_counter()
    requests = class_stream(params)
    spec, cost = point_worker(params)
    ttft_s, tpot_s, warm = params["ttft_s"], params["atgt_s"], params["warmup_s"]
    measured = requests.arrival_s >= warm
    criterion, alpha = _criterion(params)
    head = {"gpu": params["gpu"]["name"], "tensor_parallel": params["tensor_parallel"], "rate": params["rate"],
            "class": params["class"]}
    if (requests.input_tokens + requests.output_tokens - 1 > spec.M).any():
        return {**head, "workers": None, "reason": "a request of the class exceeds the worker's KV limit",
                "seconds": round(time.perf_counter() - start, 4)}
    bound = instance_bound(requests.arrival_s[measured], requests.input_tokens[measured],
                           requests.output_tokens[measured], cost, spec.M, ttft_s, tpot_s, alpha=alpha,
                           criterion=criterion)
    if not bound.feasible:
        return {**head, "workers": None, "reason": f"no number of workers meets the criterion: {bound.reason}",
                "seconds": round(time.perf_counter() - start, 4)}
    limit = max(bound.workers, MAX_FACTOR * int(params["one_class_workers"]) + 8)
    # first guess: the class's bound scaled by the configuration's answer-to-bound ratio on the whole workload
    guess = math.ceil(bound.workers * params["one_class_workers"] / max(params["one_class_bound"], 1) - 1e-9)

    def meets_at(n: int) -> bool:
        result = simulate_fleet(requests, spec, n_workers=n, router=params["router"], ttft_s=ttft_s, tpot_s=tpot_s,
                                strictness=params["strictness"])
        return meets(params, result)

    try:
        workers, tried = bracket_search(meets_at, bound.workers, guess, limit)
    except PlannerError as exc:
        return {**head, "workers": None, "reason": str(exc), "seconds": round(time.perf_counter() - start, 4)}
    return {**head, "workers": int(workers), "bound_workers": int(bound.workers),
            "requests": int(measured.sum()), "tried": {str(n): bool(v) for n, v in sorted(tried.items())},
            "seconds": round(time.perf_counter() - start, 4)}


def bracket_search(meets_at, low: int, guess: int, limit: int) -> tuple[int, dict[int, bool]]:
    """The fewest n in [low, limit] with ``meets_at(n)``, assuming it is monotone in n and that no n < low
    meets (a certified bound): try ``guess`` (clamped), step down (or up) by about 10 % until the verdict
    flips, then bisect the bracket.  A `PlannerError` when even ``limit`` does not meet.  Returns the answer
    and every n tried with its verdict."""
    tried: dict[int, bool] = {}

    def ok(n: int) -> bool:
        tried[n] = bool(meets_at(n))
        return tried[n]

    n = min(max(guess, low), limit)
    if ok(n):
        lo, hi = low - 1, n
        while hi > low:
            m = max(low, min(hi - 1, math.floor(0.9 * hi)))
            if ok(m):
                hi = m
            else:
                lo = m
                break
    else:
        lo = n
        while True:
            if lo >= limit:
                raise PlannerError(f"{limit} workers do not meet the criterion")
            m = min(limit, max(lo + 1, math.ceil(1.1 * lo)))
            if ok(m):
                hi = m
                break
            lo = m
    while hi - lo > 1:
        m = (lo + hi) // 2
        if ok(m):
            hi = m
        else:
            lo = m
    return hi, tried


def class_points(scenario, table, params: dict[str, dict[str, Any]]) -> list:
    """One sweep point per (rate, class with requests in the rate's stream, configuration answered there)."""
    from planner.sweep import SweepPoint

    ins, outs = scenario.class_input_edges, scenario.class_output_edges
    points = []
    for key, p in params.items():
        row = table[(table.gpu == p["gpu"]["name"]) & (table.tensor_parallel == p["tensor_parallel"])
                    & (table.rate == p["rate"])]
        if row.empty:
            continue
        stream = point_requests(p)
        present = np.unique(class_index(stream.input_tokens, stream.output_tokens, ins, outs))
        for k in present:
            points.append(SweepPoint(f"{key}/class{int(k)}", {**p, "class": int(k), "class_input_edges": list(ins),
                                                               "class_output_edges": list(outs),
                                                               "one_class_workers": int(row.workers.iloc[0]),
                                                               "one_class_bound": int(row.bound_workers.iloc[0])}))
    return points


def split_requests(classes: np.ndarray, shares: dict[int, list[tuple[int, float]]]) -> np.ndarray:
    """Configuration of each request (in the given order): smooth weighted round robin over its class's
    (configuration, routed rate) pairs — each request adds every weight to its configuration's credit, goes to
    the configuration with the most credit (ties: the first listed) and that credit drops by the total."""
    out = np.full(classes.size, -1, np.int64)
    state = {k: np.zeros(len(pairs)) for k, pairs in shares.items()}
    weights = {k: np.array([w for _, w in pairs], float) for k, pairs in shares.items()}
    target = {k: np.array([c for c, _ in pairs], np.int64) for k, pairs in shares.items()}
    for r, k in enumerate(classes):
        k = int(k)
        if k not in shares:
            raise PlannerError(f"class {k} has requests but no routed rate")
        credit = state[k]
        credit += weights[k]
        j = int(np.argmax(credit))
        credit[j] -= weights[k].sum()
        out[r] = target[k][j]
    return out


def _worst(setting, params, conf_of_worker):
    """Repair choice: the configuration whose requests miss their SLOs the most (module docstring, Check)."""
    pct = params["percentile"] or 99.0
    warm = params["warmup_s"]

    def pick(result, counts):
        arrival = np.asarray(result.arrival_s)
        first, finish, out = result.first_token_s, result.finish_s, np.asarray(result.output_tokens)
        conf = conf_of_worker[np.asarray(result.worker)]
        keep = arrival >= warm
        ratios = []
        for c in range(len(counts)):
            mine = keep & (conf == c)
            if not mine.any():
                continue
            ttft = (first - arrival)[mine]
            many = mine & (out >= 2)
            tpot = (finish - first)[many] / (out[many] - 1)
            if params.get("attainment") is not None:
                ok = ttft <= params["ttft_s"] + 1e-12
                gaps = np.zeros(mine.sum())
                sub = out[mine] >= 2
                gaps[sub] = (finish - first)[mine][sub] / (out[mine][sub] - 1)
                ok &= gaps <= params["atgt_s"] + 1e-12
                ratio = (1 - ok.mean()) / max(1 - params["attainment"], 1e-9)
            else:
                ratio = max(float(np.percentile(ttft, pct)) / params["ttft_s"],
                            float(np.percentile(tpot, pct)) / params["atgt_s"] if tpot.size else 0.0)
            ratios.append((ratio, -c, c))
        room = set(setting.room(counts))
        for ratio, _, c in sorted(ratios, reverse=True):
            if c in room:
                return c
        return None

    return pick


def class_mixed_answers(scenario, table, params: dict[str, dict[str, Any]], configs, capacities: dict[str, Any],
                        one_class: list[MixedAnswer]) -> list[MixedAnswer]:
    """The mixed fleet over the size classes at every rate with answers for ≥ 2 configurations (module docstring).
    ``capacities``: `solve_class_capacity` results by point key."""
    from planner.deployment.classes import ClassPlanProblem, Configuration, RequestClass, solve_class_plan

    ins, outs = scenario.class_input_edges, scenario.class_output_edges
    names = class_names(ins, outs)
    one = {m.rate: m for m in one_class}
    answers = []
    for rate in sorted(set(table.rate)):
        setting = mix_setting(scenario, table, params, configs, float(rate))
        if setting is None:
            continue
        stream = setting.requests
        cls = class_index(stream.input_tokens, stream.output_tokens, ins, outs)
        present = [int(k) for k in np.unique(cls)]
        lam = {k: float(rate) * float((cls == k).sum()) / stream.n for k in present}
        mu: dict[int, dict[int, float]] = {k: {} for k in present}
        for c, (gpu, tp) in enumerate(setting.keys):
            for k in present:
                got = capacities.get(f"{gpu}/tp{tp}/rate{rate:g}/class{k}")
                if got is not None and got.get("workers"):
                    mu[k][c] = float(rate) / got["workers"]
        kind = f"{len(present)} size classes"
        uncovered = [names[k] for k in present if not mu[k]]
        one_usd = one[rate].usd_per_hour if rate in one else None
        base = dict(rate=float(rate), best_single=setting.best_label, best_single_usd_per_hour=setting.best_usd,
                    capacities={}, inventory=setting.inventory, kind=kind,
                    classes={names[k]: lam[k] for k in present},
                    class_capacities={names[k]: {setting.labels[c]: v for c, v in mu[k].items()} for k in present},
                    one_class_usd_per_hour=one_usd)
        nan = float("nan")
        if uncovered:
            answers.append(MixedAnswer(counts={}, gpus={}, usd_per_hour=nan, plan_usd_per_hour=nan,
                                       plan_bound_usd_per_hour=None, plan_status="not solved", repairs=0, met=False,
                                       p_ttft_s=nan, p_tpot_s=nan, attainment=nan, source="none",
                                       note=f"no configuration serves class {uncovered[0]}", **base))
            continue
        confs = tuple(Configuration(name=label, model_index=0, gpu_index=setting.gpu_index(c),
                                    tensor_parallel=setting.keys[c][1],
                                    capacity=tuple((present.index(k), mu[k][c]) for k in present if c in mu[k]))
                      for c, label in enumerate(setting.labels))
        problem = ClassPlanProblem(name=f"capacity size-class mix at {rate:g} req/s", models=(scenario.model.name,),
                                   gpus=setting.gpus,
                                   classes=tuple(RequestClass(0, names[k], lam[k]) for k in present),
                                   configurations=confs,
                                   provenance=f"per-worker rates per size class measured by the fleet simulator at "
                                              f"{rate:g} req/s")
        plan = solve_class_plan(problem, solver=scenario.solver, time_limit=10.0, seed=scenario.seed)
        if plan.solution is None:
            answers.append(MixedAnswer(counts={}, gpus={}, usd_per_hour=nan, plan_usd_per_hour=nan,
                                       plan_bound_usd_per_hour=plan.bound, plan_status=plan.status.value, repairs=0,
                                       met=False, p_ttft_s=nan, p_tpot_s=nan, attainment=nan, source="none",
                                       note=f"no mix within the inventory: {plan.message}", **base))
            continue
        shares: dict[int, list[tuple[int, float]]] = {}
        for j, c, x in plan.solution.routes:
            shares.setdefault(present[j], []).append((c, x))
        routing = {names[k]: {setting.labels[c]: x / lam[k] for c, x in pairs} for k, pairs in shares.items()}
        request_conf = split_requests(cls, shares)

        def groups(counts, request_conf=request_conf):
            return request_conf, np.repeat(np.arange(len(counts)), counts)

        def worst(result, counts):
            return _worst(setting, setting.params[0], np.repeat(np.arange(len(counts)), counts))(result, counts)

        planned = np.array(plan.solution.counts, dtype=int)
        got = check_mix(setting, planned, groups=groups, worst=worst)
        counts = got["counts"]
        answers.append(MixedAnswer(
            counts={label: int(n) for label, n in zip(setting.labels, counts)}, gpus=gpu_counts(setting, counts),
            usd_per_hour=float(setting.price() @ counts), plan_usd_per_hour=float(setting.price() @ planned),
            plan_bound_usd_per_hour=plan.bound, plan_status=plan.status.value, repairs=got["repairs"], met=got["met"],
            p_ttft_s=got["p_ttft_s"], p_tpot_s=got["p_tpot_s"], attainment=got["attainment"], check=got["check"],
            note=got.get("note", ""), source=got["source"], routing=routing,
            plan_counts={label: int(n) for label, n in zip(setting.labels, planned)}, **base))
    return answers
