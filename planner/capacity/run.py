"""`planner capacity`: configurations → sweep → analysis (monotone plans, bounds, Eq. 7, $/h) → outputs.

Configurations.  For each candidate GPU type the scenario names TP degrees or ``best``; ``best``
takes the degree that maximises per-GPU decode throughput (Aladdin Eqs. 5–6,
`planner.placement.worker_config`) among the degrees with a fitted cost model.  A degree is
skipped, with its reason in the report, when no Aladdin cost model is fitted for it, the weights
do not fit, the ATGT SLO is below the un-batched decode iteration, or one prefill of the
workload's 99th-percentile input already exceeds the TTFT SLO.

Analysis of the finished points, per (GPU type, TP) series in rate order:

* **Monotone plans, honestly.**  The snapshot at a lower rate is a subset of the one at a higher
  rate (`planner.capacity.points`).  When a point's own plan (time-limited MIP or best-fit) uses
  more workers than the plan of the next higher rate restricted to its requests, the restricted
  plan is used instead — it is a real plan, re-checked by the placement family's independent
  validator (``plan_source`` says so).  Optimal points are never replaced (the restriction cannot
  beat an optimum).
* **Bounds.**  The optimum is non-decreasing in the rate, so a lower bound proven at rate λ holds
  at every λ' > λ: ``bound_workers`` is the largest bound proven at or below the rate.
* **Eq. 7** ``N_w = ⌈k·λ + c⌉`` is fitted by least squares (`planner.placement.scaling.fit_eq7`) to
  each series with at least two distinct rates.
* **$/h** = GPUs × price per GPU-hour; the best configuration of a GPU type at a rate is its TP
  degree with the fewest GPUs (ties: the smaller degree).
* **Per point, for ``--json``** (not in the CSV/Parquet columns): ``solver`` of the kept plan,
  ``gap`` = |workers − bound_workers| / workers, ``solve_seconds`` (the point's wall time) and
  ``validation``, the independent validator's verdict on the kept plan (re-checked when the plan
  is a restriction).  Results stored by an older version lack ``solver`` and ``validation``: the
  solver follows from the method (the MIP is always HiGHS), and the stored plan is re-validated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.capacity.points import master_horizon_s, point_problem, solve_capacity_point
from planner.capacity.scenario import Scenario
from planner.costmodels.files import find_cost_model
from planner.costmodels.models import AladdinCostModel
from planner.placement.scaling import fit_eq7
from planner.placement.solution import PlacementSolution
from planner.placement.validator import validate_placement
from planner.placement.worker_config import WorkerConfigReport, worker_configurations
from planner.solver.outcome import relative_gap
from planner.sweep import SweepPoint, SweepSummary, run_sweep

DEGREES = (1, 2, 4, 8)
DB_NAME = "results.sqlite"


@dataclass(frozen=True)
class Configuration:
    gpu: str
    tensor_parallel: int
    price_per_hour: float
    cost: AladdinCostModel


@dataclass(frozen=True)
class Excluded:
    gpu: str
    tensor_parallel: int
    reason: str


@dataclass
class CapacityResult:
    scenario: Scenario
    points: pd.DataFrame  # one row per finished point (see `analyse`)
    fits: pd.DataFrame  # Eq. 7 per (gpu, tensor_parallel)
    configurations: list[Configuration]
    excluded: list[Excluded]
    eq6: dict[str, WorkerConfigReport]
    summary: SweepSummary
    failures: dict[str, str] = field(default_factory=dict)


def p99_input(scenario: Scenario) -> float:
    rng = np.random.default_rng(scenario.seed)
    inputs, _ = scenario.distribution.sample(20_000, rng, scenario.model.max_context_tokens)
    return float(np.percentile(inputs, 99))


def configurations(scenario: Scenario) -> tuple[list[Configuration], list[Excluded], dict[str, WorkerConfigReport]]:
    """The (GPU type, TP) pairs to sweep, the ones left out with their reason, and Eq. 6 per GPU."""
    dist = scenario.distribution
    long_prompt = p99_input(scenario)
    chosen: list[Configuration] = []
    excluded: list[Excluded] = []
    eq6: dict[str, WorkerConfigReport] = {}
    for cand in scenario.gpus:
        gpu = cand.spec
        fitted = {}
        for g in DEGREES if cand.degrees is None else cand.degrees:
            found = find_cost_model("aladdin", scenario.model.name, gpu.name, g, scenario.cost_models_dir)
            if isinstance(found, AladdinCostModel):
                fitted[g] = found
            else:
                excluded.append(Excluded(gpu.name, g, "no Aladdin cost model fitted for this degree"))
        report = worker_configurations(scenario.model, gpu, atgt_s=scenario.atgt_s, mean_input=dist.mean_input,
                                       mean_output=dist.mean_output, degrees=tuple(sorted(fitted)),
                                       cost_models=fitted) if fitted else None
        if report is None:
            continue
        eq6[gpu.name] = report
        usable = []
        for option in report.options:
            cost = fitted[option.tensor_parallel]
            prefill = cost.prefill_time(long_prompt)
            if not option.feasible:
                excluded.append(Excluded(gpu.name, option.tensor_parallel, option.reason))
            elif prefill > scenario.ttft_s:
                excluded.append(Excluded(gpu.name, option.tensor_parallel,
                                         f"one prefill of the p99 input ({long_prompt:.0f} tokens) takes {prefill:.2f} s "
                                         f"> TTFT SLO {scenario.ttft_s:g} s"))
            else:
                usable.append(option)
        if cand.degrees is None and usable:
            best = max(usable, key=lambda o: (o.tokens_per_s_per_gpu, -o.tensor_parallel))
            usable = [best]
        for option in usable:
            chosen.append(Configuration(gpu.name, option.tensor_parallel, float(gpu.price_per_hour),  # type: ignore[arg-type]
                                        fitted[option.tensor_parallel]))
    return chosen, excluded, eq6


def point_key(gpu: str, tensor_parallel: int, rate: float) -> str:
    return f"{gpu}/tp{tensor_parallel}/rate{rate:g}"


def build_points(scenario: Scenario, configs: list[Configuration]) -> list[SweepPoint]:
    gpus = {c.spec.name: c.spec for c in scenario.gpus}
    common = {
        "model": scenario.model.model_dump(mode="json"),
        "distribution": scenario.distribution.model_dump(mode="json"),
        "rate_max": max(scenario.rates),
        "atgt_s": scenario.atgt_s,
        "ttft_s": scenario.ttft_s,
        "seed": scenario.seed,
        "strictness": scenario.strictness,
        "kv_headroom": scenario.kv_headroom,
        "exact_max_requests": scenario.exact_max_requests,
        "time_limit_s": scenario.time_limit_s,
    }
    points = []
    for conf in configs:
        for rate in scenario.rates:
            params = {**common, "gpu": gpus[conf.gpu].model_dump(mode="json"), "tensor_parallel": conf.tensor_parallel,
                      "cost_model": conf.cost.model_dump(mode="json"), "rate": rate}
            points.append(SweepPoint(point_key(conf.gpu, conf.tensor_parallel, rate), params))
    return points


def run_capacity(
    scenario: Scenario,
    out_dir: Path,
    *,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: bool = True,
) -> CapacityResult:
    """Sweep every point (resuming from ``out_dir/results.sqlite``) and analyse the results."""
    configs, excluded, eq6 = configurations(scenario)
    if not configs:
        from planner.errors import InputError

        reasons = "; ".join(f"{e.gpu} TP {e.tensor_parallel}: {e.reason}" for e in excluded[:3])
        raise InputError(scenario.source, "gpus", f"no GPU type / TP degree can serve {scenario.model.name} ({reasons})")
    points = build_points(scenario, configs)
    results, summary = run_sweep(points, solve_capacity_point, db_path=out_dir / DB_NAME,
                                 fingerprint=scenario.fingerprint(), executor=executor, workers=workers,
                                 address=address, progress=progress, description="capacity points")
    params = {p.key: p.params for p in points}
    table, fits = analyse(results, params, configs)
    return CapacityResult(scenario, table, fits, configs, excluded, eq6, summary, dict(summary.failures))


def _restrict(assignment: dict[str, int], request_ids: list[str]) -> PlacementSolution:
    labels = [assignment[r] for r in request_ids]
    relabel = {old: new for new, old in enumerate(sorted(set(labels)))}
    return PlacementSolution(tuple(request_ids), tuple(relabel[w] for w in labels), "restricted")


def _validate_stored(params: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    """The validator's verdict (`ValidationReport.to_dict`) on a stored plan of one point."""
    problem = point_problem(params)
    ids = tuple(r.request_id for r in problem.requests)
    assignment = plan["assignment"]
    if set(assignment) != set(ids):
        solution = PlacementSolution(tuple(assignment), tuple(assignment.values()), plan["method"])
    else:
        solution = PlacementSolution(ids, tuple(assignment[i] for i in ids), plan["method"])
    return validate_placement(problem, solution).to_dict()


def analyse(results: dict[str, Any], params: dict[str, dict[str, Any]],
            configs: list[Configuration]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Point table (monotone plans, carried bounds, $/h, gaps) and Eq. 7 fits (module docstring)."""
    rows: list[dict[str, Any]] = []
    fits: list[dict[str, Any]] = []
    for conf in configs:
        series = sorted((params[k]["rate"], k) for k in results
                        if params[k]["gpu"]["name"] == conf.gpu and params[k]["tensor_parallel"] == conf.tensor_parallel)
        if not series:
            continue
        plans = {k: dict(results[k]) for _, k in series}
        for p in plans.values():
            p["plan_source"] = "own"
            p["solver"] = p.get("solver") or ("highs" if p["method"] == "mip" else "heuristic")
        # Monotone plans: descending rates, restrict the next higher rate's final plan.
        for (_, higher), (rate, key) in zip(reversed(series), list(reversed(series))[1:]):
            own, above = plans[key], plans[higher]
            ids = sorted(own["assignment"])
            restricted = _restrict(above["assignment"], ids)
            if own["status"] != "optimal" and restricted.workers_used < own["workers"]:
                problem = point_problem(params[key])
                report = validate_placement(problem, restricted)
                if report.feasible:
                    own.update(workers=restricted.workers_used, assignment=restricted.worker_of(),
                               plan_source=f"restricted from rate {above['rate']:g}",
                               solver=above["solver"], validation=report.to_dict(),
                               status="optimal" if restricted.workers_used <= own["bound_workers"] else "feasible")
        # Results stored before points carried the validator's verdict: re-check the stored plan.
        for _, key in series:
            if plans[key].get("validation") is None:
                plans[key]["validation"] = _validate_stored(params[key], plans[key])
        # Bounds carry upwards in rate.
        carried, source = 0, ""
        for rate, key in series:
            p = plans[key]
            if p["bound_workers"] >= carried:
                carried, source = p["bound_workers"], p["bound_source"]
            else:
                p["bound_workers"], p["bound_source"] = carried, f"{source} (proven at a lower rate)"
            if p["workers"] <= p["bound_workers"]:
                p["status"] = "optimal"
        rates = [r for r, _ in series]
        workers = [plans[k]["workers"] for _, k in series]
        fit = None
        if len(set(rates)) >= 2:
            k_w, c_w, r2 = fit_eq7(rates, workers)
            fit = (k_w, c_w)
            fits.append({"gpu": conf.gpu, "tensor_parallel": conf.tensor_parallel, "k_w": k_w, "c_w": c_w, "r2": r2})
        for rate, key in series:
            p = plans[key]
            tp = conf.tensor_parallel
            reference = p["workers"] if p["status"] == "optimal" else p["bound_workers"]
            bf = p["best_fit_workers"]
            rows.append({
                "gpu": conf.gpu, "tensor_parallel": tp, "rate": rate, "requests": p["requests"],
                "method": p["method"], "status": p["status"], "plan_source": p["plan_source"],
                "workers": p["workers"], "gpus": p["workers"] * tp,
                "bound_workers": p["bound_workers"], "bound_gpus": p["bound_workers"] * tp,
                "bound_source": p["bound_source"],
                "guarantee": f"no plan can do it with fewer than {p['bound_workers'] * tp} GPUs",
                "best_fit_workers": bf,
                "best_fit_gap": (bf - reference) / max(bf, reference, 1),
                "gap_reference": "optimum" if p["status"] == "optimal" else "lower bound",
                "price_per_gpu_hour": conf.price_per_hour,
                "usd_per_hour": p["workers"] * tp * conf.price_per_hour,
                "eq7_workers": max(1, math.ceil(fit[0] * rate + fit[1] - 1e-9)) if fit else None,
                "seconds": p["seconds"], "note": p["note"],
                "solver": p["solver"],
                "gap": None if p["bound_workers"] is None else relative_gap(p["workers"], p["bound_workers"]),
                "solve_seconds": p["seconds"],
                "validation": p["validation"],
            })
    table = pd.DataFrame(rows)
    if not table.empty:
        table = table.sort_values(["gpu", "tensor_parallel", "rate"], kind="stable").reset_index(drop=True)
        best = table.sort_values(["gpus", "tensor_parallel"], kind="stable").groupby(["gpu", "rate"]).head(1)
        table["best_config"] = table.index.isin(best.index)
    fit_table = pd.DataFrame(fits, columns=["gpu", "tensor_parallel", "k_w", "c_w", "r2"])
    return table, fit_table


def horizon_note(scenario: Scenario) -> str:
    h = master_horizon_s(scenario.distribution, scenario.atgt_s, scenario.model.max_context_tokens)
    return f"snapshot at t = {h:.0f} s of a Poisson stream at {max(scenario.rates):g} req/s, thinned per rate"
