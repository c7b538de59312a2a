"""`planner capacity`: configurations → sweep → analysis (monotone plans, bounds, Eq. 7, $/h) → outputs.

Configurations.  For each candidate GPU type the scenario names TP degrees or ``best``; ``best``
takes the degree that maximises per-GPU decode throughput (Aladdin Eqs. 5–6,
`planner.placement.worker_config`) among the degrees with a fitted cost model.  A degree is
skipped, with its reason in the report, when no Aladdin cost model is fitted for it, the weights
do not fit, the ATGT SLO is below the un-batched decode iteration, or one prefill of the
workload's 99th-percentile input already exceeds the TTFT SLO.

Analysis of the finished points, per (GPU type, TP) series in rate order
(`planner.capacity.points` computes each point: simulated answer, certified bound, snapshot):

* **Monotone answers, honestly.**  A lower rate's stream is a subset of a higher rate's (common
  random numbers).  When a lower rate's answer exceeds a higher rate's, the lower rate's stream is
  simulated on the higher rate's fleet; if it meets the criterion that fleet becomes the answer
  (``answer_source`` says so), else the point keeps its own and its ``note`` says so.
* **Bound ≤ answer, loudly.**  An answer below its certified bound raises `BoundViolation` (a
  defect, never a result); the search itself simulates the fleet one below the bound.
* **Status.**  ``optimal`` when the answer equals the bound (no policy does it with fewer workers
  under the cost model), else ``simulated``; ``gap`` = (answer − bound) / answer.
* **Snapshot plans** (when solved) keep their own rules: a snapshot plan that uses more workers than
  the next higher rate's plan restricted to its requests is replaced by that restriction (a real
  plan, re-checked by the placement validator), and snapshot bounds carry upwards in rate.
* **Eq. 7** ``N_w = ⌈k·λ + c⌉`` is fitted by least squares (`planner.placement.scaling.fit_eq7`) to
  each series of answers with at least two distinct rates.
* **$/h** = GPUs × price per GPU-hour; the best configuration of a GPU type at a rate is its TP
  degree with the fewest GPUs (ties: the smaller degree).
* **Mixed fleets** (`planner.capacity.mix`): at every rate with answers for ≥ 2 configurations, the
  cheapest mix by the request-class MILP on the measured per-worker rates, checked by simulation; with
  the scenario's size classes also the mix over the classes with class-aware routing
  (`planner.capacity.classes`, its capacities swept like the points into a database of their own,
  `planner.capacity.classes.db_name`).
* **Per point, for ``--json``**: ``solver`` (``fleet-simulation``), ``validation`` (the criterion
  recounted from the per-request times, `criterion_check`), ``bound`` (the certified bound with its
  terms, assumptions and ``relative_to``), ``snapshot_validation`` (the placement validator's verdict
  on the snapshot plan) and ``solve_seconds``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.capacity.points import (
    BoundViolation,
    criterion_check,
    master_horizon_s,
    meets,
    point_problem,
    simulate_point,
    solve_capacity_point,
)
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
    #: (gpu, tensor_parallel, rate) → {workers: [P-th TTFT, P-th TPOT]} of every fleet size simulated
    curves: dict[tuple[str, int, float], dict[str, list[float]]] = field(default_factory=dict)
    #: the cheapest mix of the swept configurations at the highest rate, checked by simulation (`planner.capacity.mix`)
    mixed: Any = None
    #: the same at every rate with answers for ≥ 2 configurations, in rate order (the last is ``mixed``)
    mixed_by_rate: list = field(default_factory=list)
    #: with size classes (scenario ``classes``): the mixed fleet over the classes per rate (`planner.capacity.classes`)
    classes_by_rate: list = field(default_factory=list)
    #: the sweep of the size classes' capacities (None without size classes)
    class_summary: Any = None


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
        "solver": scenario.solver,
        "percentile": scenario.percentile,
        "attainment": scenario.attainment,
        "router": scenario.router,
        "scheduler": scenario.scheduler,
        "window_s": scenario.window_s,
        "warmup_s": scenario.warmup_s,
        "snapshot": scenario.snapshot,
    }
    points = []
    for conf in configs:
        source = scenario.cost_model_source(conf.gpu, conf.tensor_parallel)
        for rate in scenario.rates:
            params = {**common, "gpu": gpus[conf.gpu].model_dump(mode="json"), "tensor_parallel": conf.tensor_parallel,
                      "cost_model": conf.cost.model_dump(mode="json"), "rate": rate,
                      "cost_model_path": source.path if source is not None else None}
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
    if not table.empty:
        sources = {(c.gpu, c.tensor_parallel): scenario.cost_model_source(c.gpu, c.tensor_parallel) for c in configs}
        table["cost_model"] = [getattr(sources.get((g, t)), "label", None) or "unknown"
                               for g, t in zip(table.gpu, table.tensor_parallel)]
        table["cost_model_path"] = [getattr(sources.get((g, t)), "path", None)
                                    for g, t in zip(table.gpu, table.tensor_parallel)]
    curves = {(params[k]["gpu"]["name"], params[k]["tensor_parallel"], params[k]["rate"]): dict(r.get("curve", {}))
              for k, r in results.items()}
    from planner.capacity.mix import mixed_answers

    by_rate = mixed_answers(scenario, table, params, configs) if not summary.failures else []
    mixed = by_rate[-1] if by_rate and by_rate[-1].rate == float(table.rate.max()) else None
    failures = dict(summary.failures)
    classes: list = []
    class_summary = None
    if scenario.has_classes and by_rate:
        from planner.capacity.classes import class_mixed_answers, class_points, db_name, solve_class_capacity

        found, class_summary = run_sweep(class_points(scenario, table, params), solve_class_capacity,
                                         db_path=out_dir / db_name(scenario.class_input_edges,
                                                                   scenario.class_output_edges), fingerprint=scenario.classes_fingerprint(),
                                         executor=executor, workers=workers, address=address, progress=progress,
                                         description="class capacities")
        failures.update(class_summary.failures)
        if not class_summary.failures:
            classes = class_mixed_answers(scenario, table, params, configs, found, by_rate)
    return CapacityResult(scenario, table, fits, configs, excluded, eq6, summary, failures, curves,
                          mixed, by_rate, classes, class_summary)


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


def _snapshot_series(series: list[tuple[float, str]], snaps: dict[str, dict[str, Any]],
                     params: dict[str, dict[str, Any]]) -> None:
    """Snapshot plans of one configuration, in place: monotone plans by restriction, bounds carried up
    (module docstring); the snapshot at λ is a subset of the one at λ' > λ."""
    keys = [k for _, k in series if k in snaps]
    for p in snaps.values():
        p["plan_source"] = "own"
        p["solver"] = p.get("solver") or ("highs" if p["method"] == "mip" else "heuristic")
    for higher, key in zip(reversed(keys), list(reversed(keys))[1:]):
        own, above = snaps[key], snaps[higher]
        restricted = _restrict(above["assignment"], sorted(own["assignment"]))
        if own["status"] != "optimal" and restricted.workers_used < own["workers"]:
            report = validate_placement(point_problem(params[key]), restricted)
            if report.feasible:
                own.update(workers=restricted.workers_used, assignment=restricted.worker_of(),
                           plan_source=f"restricted from rate {above['rate']:g}", solver=above["solver"],
                           validation=report.to_dict(),
                           status="optimal" if restricted.workers_used <= own["bound_workers"] else "feasible")
    for key in keys:
        if snaps[key].get("validation") is None:
            snaps[key]["validation"] = _validate_stored(params[key], snaps[key])
    carried, source = 0, ""
    for key in keys:
        p = snaps[key]
        if p["bound_workers"] >= carried:
            carried, source = p["bound_workers"], p["bound_source"]
        else:
            p["bound_workers"], p["bound_source"] = carried, f"{source} (proven at a lower rate)"
        if p["workers"] <= p["bound_workers"]:
            p["status"] = "optimal"


def _monotone_answers(series: list[tuple[float, str]], points: dict[str, dict[str, Any]],
                      params: dict[str, dict[str, Any]]) -> None:
    """Answers never fall as the rate rises: when a lower rate's answer exceeds a higher rate's, the lower
    rate's stream (a subset, common random numbers) is simulated on the higher rate's fleet; if that
    meets the criterion it becomes the answer (``answer_source`` says so), else the point keeps its
    answer and its ``note`` says the curve is not monotone there."""
    for (_, higher), (_, key) in zip(reversed(series), list(reversed(series))[1:]):
        own, above = points[key], points[higher]
        if own["workers"] <= above["workers"]:
            continue
        result = simulate_point(params[key], above["workers"])
        if meets(params[key], result):
            pct = params[key]["percentile"] or 99.0
            warm = params[key]["warmup_s"]
            own.update(workers=above["workers"], answer_source=f"fleet of rate {above['rate']:g} re-simulated",
                       p_ttft_s=float(result.percentile("ttft_s", pct, warm)),
                       p_tpot_s=float(result.percentile("tpot_s", pct, warm)),
                       attainment=float(result.attainment(warmup_s=warm)),
                       utilisation=float(np.mean(result.utilisation)),
                       check=criterion_check(params[key], result, above["workers"]))
        else:
            own["note"] = (own.get("note", "") + f" not monotone: {above['workers']} workers meet the criterion at "
                           f"{above['rate']:g} req/s but not at {own['rate']:g} req/s").strip()


def analyse(results: dict[str, Any], params: dict[str, dict[str, Any]],
            configs: list[Configuration]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Point table (answers, bounds, snapshot, $/h, gaps) and Eq. 7 fits of the answers (module docstring)."""
    rows: list[dict[str, Any]] = []
    fits: list[dict[str, Any]] = []
    for conf in configs:
        series = sorted((params[k]["rate"], k) for k in results
                        if params[k]["gpu"]["name"] == conf.gpu and params[k]["tensor_parallel"] == conf.tensor_parallel)
        if not series:
            continue
        points, snaps = _settled_series(series, results, params)
        fit = _eq7_fit(conf, series, points, fits)
        rows += [_point_row(conf, rate, points[key], snaps.get(key), fit) for rate, key in series]
    return _point_tables(rows, fits)


def _settled_series(series: list[tuple[float, str]], results: dict[str, Any],
                    params: dict[str, dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(points, snapshot plans) of one (GPU type, TP) series after the monotone-answer rule
    (`_monotone_answers`) and the snapshot rules (`_snapshot_series`); copies, ``results`` is not changed."""
    points = {k: dict(results[k]) for _, k in series}
    for p in points.values():
        p.setdefault("answer_source", "own search")
        p.setdefault("note", "")
    _monotone_answers(series, points, params)
    snaps = {k: dict(p["snapshot"]) for k, p in points.items()
             if isinstance(p.get("snapshot"), dict) and "workers" in p["snapshot"]}
    _snapshot_series(series, snaps, params)
    return points, snaps


def _eq7_fit(conf: Configuration, series: list[tuple[float, str]], points: dict[str, dict[str, Any]],
             fits: list[dict[str, Any]]) -> tuple[float, float] | None:
    """Eq. 7 ``N_w = ⌈k·λ + c⌉`` fitted to the series' answers, (k, c), appended to ``fits`` with its R²;
    None with fewer than two distinct rates."""
    rates = [r for r, _ in series]
    workers = [points[k]["workers"] for _, k in series]
    if len(set(rates)) < 2:
        return None
    k_w, c_w, r2 = fit_eq7(rates, workers)
    fits.append({"gpu": conf.gpu, "tensor_parallel": conf.tensor_parallel, "k_w": k_w, "c_w": c_w, "r2": r2})
    return k_w, c_w


def _point_row(conf: Configuration, rate: float, p: dict[str, Any], snap: dict[str, Any] | None,
               fit: tuple[float, float] | None) -> dict[str, Any]:
    """The table row of one settled point: answer, certified bound (an answer below it raises
    `BoundViolation`), gap, criterion, snapshot, $/h and the Eq. 7 estimate."""
    tp = conf.tensor_parallel
    snap_error = (p.get("snapshot") or {}).get("error") if isinstance(p.get("snapshot"), dict) else None
    bound = p["bound"]
    if p["workers"] < p["bound_workers"]:
        raise BoundViolation(f"{conf.gpu} TP {tp} at {rate:g} req/s: answer {p['workers']} workers is below "
                             f"the certified bound {p['bound_workers']}; please report this")
    return {
        "gpu": conf.gpu, "tensor_parallel": tp, "rate": rate, "requests": p["measured_requests"],
        "status": "optimal" if p["workers"] <= p["bound_workers"] else "simulated",
        "workers": p["workers"], "gpus": p["workers"] * tp,
        "bound_workers": p["bound_workers"], "bound_gpus": p["bound_workers"] * tp,
        "bound_binding": p["bound_binding"],
        "steady_bound_gpus": None if p["steady_bound_workers"] is None else p["steady_bound_workers"] * tp,
        "gap": relative_gap(p["workers"], p["bound_workers"]),
        "guarantee": (f"no policy serves these {p['measured_requests']} requests meeting the criterion with "
                      f"fewer than {p['bound_workers'] * tp} GPUs {bound['relative_to']}"),
        "p_ttft_s": p["p_ttft_s"], "p_tpot_s": p["p_tpot_s"], "attainment": p["attainment"],
        "utilisation": p["utilisation"], "simulations": len(p["tried"]),
        "answer_source": p["answer_source"],
        **_snapshot_columns(snap, snap_error, tp),
        "price_per_gpu_hour": conf.price_per_hour,
        "usd_per_hour": p["workers"] * tp * conf.price_per_hour,
        "eq7_workers": max(1, math.ceil(fit[0] * rate + fit[1] - 1e-9)) if fit else None,
        "seconds": p["seconds"], "note": (p["note"] + (f" snapshot: {snap_error}" if snap_error else "")).strip(),
        "solver": "fleet-simulation",
        "solve_seconds": p["seconds"],
        "validation": p["check"],
        "snapshot_validation": snap["validation"] if snap else None,
        "bound": bound,
    }


def _snapshot_columns(snap: dict[str, Any] | None, snap_error: str | None, tp: int) -> dict[str, Any]:
    """The snapshot plan's columns of a point row (None without a plan; status ``error`` when solving it
    failed, ``not solved`` when it was not solved)."""
    return {
        "snapshot_workers": snap["workers"] if snap else None,
        "snapshot_gpus": snap["workers"] * tp if snap else None,
        "snapshot_bound_gpus": snap["bound_workers"] * tp if snap else None,
        "snapshot_status": snap["status"] if snap else ("error" if snap_error else "not solved"),
        "snapshot_method": snap["method"] if snap else None,
        "best_fit_workers": snap["best_fit_workers"] if snap else None,
    }


def _point_tables(rows: list[dict[str, Any]], fits: list[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The point table sorted by (GPU, TP, rate) with ``best_config`` (per GPU type and rate, the TP degree
    with the fewest GPUs; ties: the smaller degree), and the Eq. 7 fit table."""
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
