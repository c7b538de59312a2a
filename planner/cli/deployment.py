"""CLI of the deployment family: TP enumeration, cost-minimal GPU mix, routing vs the exact makespan."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from planner.cli.common import (CommandGroups, add_verdict_rows, cost_models_of, fmt, fmt_gap, out, print_cost_caveats,
                                run_progress, several_cost_model_caveats, summary_table)
from planner.cli.options import RESULT, RUN, RunArgs, run_command, shared

if TYPE_CHECKING:
    from planner.core.result import Result



def _emit(instance: Path, result: Result, run: RunArgs, problem, show) -> None:  # noqa: ANN001
    """`RunArgs.emit_result` of a deployment result: ``show`` prints the tables without --json, then the caveats of
    the cost models behind it (``cost_model_caveats``: ``"<model> / <gpu> / TP <g>: code: detail"`` per
    configuration, [] when none)."""
    models = cost_models_of(problem, result)
    run.emit_result(instance, problem.name, result, show, cost_models=models,
                    caveats=several_cost_model_caveats(models))


def _enumeration_result(problem) -> Result:
    from planner.deployment.enumeration import enumeration_result

    return enumeration_result(problem)


#: Machine groups up to which the ranked configurations get a column per group; beyond, one text column.
WIDE_GROUPS = 8
#: Rows of the per-group TP estimate table printed (every row is in ``--json``).
ESTIMATE_ROWS = 40


def _by_degree(groups, degrees) -> str:
    """``t=1: box0, box1, … (998 groups); t=2: box7, box9`` — a configuration of many groups in one line."""
    parts = []
    for d in sorted(set(degrees)):
        names = [g for g, t in zip(groups, degrees) if t == d]
        shown = ", ".join(names[:3]) + (f", … ({len(names)} groups)" if len(names) > 3 else "")
        parts.append(f"t={d}: {shown}")
    return "; ".join(parts)


def _changes(groups, degrees, best) -> str:
    """The groups whose degree differs from the best configuration's (at most five named)."""
    diff = [f"{g} t={t}" for g, t, b in zip(groups, degrees, best) if t != b]
    if not diff:
        return "same degrees as the best"
    return "best, but " + ", ".join(diff[:5]) + (f" (+{len(diff) - 5} more)" if len(diff) > 5 else "")


def _print_enumeration(problem, result: Result) -> None:
    from planner.deployment.enumeration import combinations_text

    sol = result.solution
    kv = problem.model.kv_bytes_per_token
    t = Table(title=f"TP degrees per machine group: {problem.name} ({problem.model.name}, KV {kv / 1024:g} KiB/token, "
                    f"{problem.estimator} estimate)",
              title_justify="left")
    for col in ("group", "GPU", "t", "instances/machine", "KV size (GB)", "tokens/s per machine", "note"):
        t.add_column(col, justify="left" if col in ("group", "GPU", "note") else "right")
    for e in sol.estimates[:ESTIMATE_ROWS]:
        t.add_row(e.group, e.gpu, str(e.tensor_parallel), str(e.instances_per_machine), f"{e.kv_size_gb:.2f}",
                  f"{e.tokens_per_s_machine:.1f}" if e.feasible else "-", e.reason)
    out.print(t)
    if len(sol.estimates) > ESTIMATE_ROWS:
        out.print(f"… {len(sol.estimates) - ESTIMATE_ROWS:,} more rows ({len(sol.estimates):,} in all; every row is in --json)")
    r = Table(title=f"Cluster configurations, best first ({combinations_text(sol.combinations)} feasible combinations)",
              title_justify="left")
    r.add_column("rank", justify="right")
    wide = len(sol.groups) <= WIDE_GROUPS
    if wide:
        for g in sol.groups:
            r.add_column(f"t[{g}]", justify="right")
    else:
        r.add_column(f"TP degrees ({len(sol.groups):,} machine groups)")
    r.add_column("cluster tokens/s", justify="right")
    best_degrees = sol.ranked[0][0] if sol.ranked else ()
    for k, (degrees, tput) in enumerate(sol.ranked[:20], 1):
        cells = [str(d) for d in degrees] if wide else [
            _by_degree(sol.groups, degrees) if k == 1 else _changes(sol.groups, degrees, best_degrees)]
        r.add_row(str(k), *cells, f"{tput:.1f}")
    out.print(r)
    best = ", ".join(f"{g} t={d}" for g, d in zip(sol.groups, sol.best[0])) if wide else _by_degree(sol.groups, sol.best[0])
    out.print(f"best: {best} ({sol.best[1]:.1f} tokens/s, exhaustive enumeration in {result.solve_seconds:.3f} s)")
    if result.validation is not None:
        v = result.validation
        out.print(f"validator: valid, tokens/s recomputed = {v.objective:.1f} ({problem.estimator} estimate)"
                  if v.feasible else f"validator: {v.summary()}")
    if result.message:
        out.print(f"note: {result.message}")


def _summary(title: str, result: Result, cost: str, bound: str) -> Table:
    """The two-column summary of a $/h plan: status, $/h, lower bound, gap, solver, the validator's verdict."""
    t = summary_table(title)
    t.add_row("status", result.status.value)
    t.add_row("$/h", cost)
    t.add_row("lower bound", bound)
    t.add_row("gap", fmt_gap(result.gap))
    t.add_row("solver", f"{result.solver}, {result.solve_seconds:.3f} s")
    add_verdict_rows(t, result, "$/h")
    return t


def _print_cost(problem, result: Result) -> None:
    out.print(_summary(f"Cost plan: {problem.name}", result,
                       fmt(result.objective) if result.objective is not None else "-", fmt(result.bound)))
    sol = result.solution
    if sol is None or not any(sol.counts):
        return
    p = Table(title=f"Instances (load scale {sol.load_scale:.4g})", title_justify="left")
    for col in ("model", "GPU", "t", "instances", "GPUs", "req/s each", "$/h"):
        p.add_column(col, justify="left" if col in ("model", "GPU") else "right")
    for k, count in enumerate(sol.counts):
        if count:
            o = problem.options[k]
            p.add_row(problem.demands[o.model_index].model, problem.inventory[o.gpu_index].gpu.name,
                      str(o.tensor_parallel), str(count), str(count * o.tensor_parallel), f"{o.capacity:.3f}",
                      f"{count * problem.option_price[k]:.2f}")
    out.print(p)


def _print_class_plan(problem, result: Result) -> None:
    """Summary, instances per configuration, and each class's split over configurations."""
    where = problem.provenance or "the instance file"
    t = _summary(f"Mixed fleet for request classes: {problem.name}", result,
                 (fmt(result.objective) if result.objective is not None else "-")
                 + f" (prices and per-class capacities of {where})",
                 f"{fmt(result.bound)} ({result.bound_source})" if result.bound is not None else "-")
    custom = [g.name for g in problem.gpus if g.source == "given"]
    if custom:
        t.add_row("GPUs defined in the file", ", ".join(custom) + " (not from the catalog)")
    out.print(t)
    sol = result.solution
    if sol is None:
        return
    util = result.validation.details.get("utilization", {}) if result.validation is not None else {}
    p = Table(title="Instances", title_justify="left")
    for col in ("model", "configuration", "GPU", "t", "instances", "GPUs", "$/h", "load (instance-s/s)"):
        p.add_column(col, justify="left" if col in ("model", "configuration", "GPU") else "right")
    for c, count in enumerate(sol.counts):
        if count:
            conf = problem.configurations[c]
            label = problem.config_label(c)
            p.add_row(problem.models[conf.model_index], conf.name, problem.gpus[conf.gpu_index].name,
                      str(conf.tensor_parallel), str(count), str(count * conf.tensor_parallel),
                      f"{count * problem.instance_price[c]:.2f}", f"{util.get(label, 0.0) * count:.3f}")
    out.print(p)
    split: dict[int, list[str]] = {}
    for k, c, r in sol.routes:
        rate = problem.classes[k].rate
        split.setdefault(k, []).append(f"{problem.configurations[c].name} {r / rate:.1%}" if rate > 0 else "")
    r = Table(title="Routing: share of each class's rate per configuration", title_justify="left")
    for col in ("model", "class", "req/s", "split"):
        r.add_column(col, justify="right" if col == "req/s" else "left")
    for k, cl in enumerate(problem.classes):
        r.add_row(problem.models[cl.model_index], cl.name, f"{cl.rate:g}", ", ".join(split.get(k, [])) or "-")
    out.print(r)


def _max_load(instance: Path, problem, run: RunArgs) -> None:  # noqa: ANN001
    """`solve deployment --max-load`: the largest scale of every demand's rate the inventory serves."""
    from planner.deployment.cost_solve import max_servable_load

    with run_progress(f"largest load of {problem.name}"):
        scale, bound, outcome = max_servable_load(problem, solver=run.solver, time_limit=run.time_limit,
                                                  threads=run.threads, seed=run.seed, started=run.started)
    payload = {"instance": str(instance), "name": problem.name, "status": outcome.status.value,
               "objective": scale, "bound": bound, "gap": outcome.gap, "solve_seconds": outcome.seconds,
               "solver": outcome.solver, "message": outcome.message, "stats": outcome.extra,
               "solution": {"max_load_scale": scale,
                            "max_rates": {d.model: (scale or 0.0) * d.rate for d in problem.demands}},
               "cost_model_caveats": several_cost_model_caveats(cost_models_of(problem))}
    run.emit(payload, show=lambda: _print_max_load(problem, scale, bound, outcome))


def _print_max_load(problem, scale, bound, outcome) -> None:  # noqa: ANN001
    out.print(f"max servable load: {fmt(scale, 4)} x the requested rates ({outcome.status.value}, bound "
              f"{fmt(bound, 4)}): " + ", ".join(f"{d.model} {(scale or 0) * d.rate:.3g} req/s" for d in problem.demands))
    if outcome.message:
        out.print(f"note: {outcome.message}")
    print_cost_caveats(*cost_models_of(problem))


@run_command
def solve_deployment_cmd(
    instance: Path = typer.Argument(..., help="deployment instance YAML (cluster, cost plan or request classes)"),
    max_load: bool = typer.Option(False, "--max-load", help="cost plan only: the most load this inventory can serve"),
    run: RunArgs = shared(RUN, RESULT),
) -> None:
    """Ranked TP configurations of a cluster; the cost-minimal GPU mix (MILP with gap) of a cost plan (inventory,
    demands) or of request classes; with --max-load, the most load a cost plan's inventory can serve."""
    from planner.deployment.classes import ClassPlanProblem, solve_class_plan
    from planner.deployment.cost_solve import solve_cost_plan
    from planner.deployment.instance import load_deployment_instance
    from planner.deployment.problem import ClusterProblem, CostPlanProblem
    from planner.errors import InputError

    run = run.start_clock()  # --time-limit covers reading the instance, not the imports above
    problem = load_deployment_instance(instance)
    if max_load and not isinstance(problem, CostPlanProblem):
        cluster = isinstance(problem, ClusterProblem)
        raise InputError(instance, "inventory" if cluster else "models",
                         "--max-load answers cost plans (inventory, demands), not "
                         + ("clusters (machine groups)" if cluster else "request classes (gpus, models)"))
    if max_load:
        _max_load(instance, problem, run)
        return
    if isinstance(problem, ClusterProblem):
        result, show = _enumeration_result(problem), _print_enumeration
    else:
        plan = solve_class_plan if isinstance(problem, ClassPlanProblem) else solve_cost_plan
        with run_progress(f"cost-minimal plan of {problem.name}"):
            result = plan(problem, solver=run.solver, time_limit=run.time_limit, threads=run.threads, seed=run.seed,
                          started=run.started)
        show = _print_class_plan if isinstance(problem, ClassPlanProblem) else _print_cost
    _emit(instance, result, run, problem, lambda: show(problem, result))


@run_command
def solve_routing_cmd(
    instance: Path = typer.Argument(..., help="routing batch YAML"),
    run: RunArgs = shared(RUN, RESULT),
) -> None:
    """Exact makespan routing (R||Cmax with KV limits) of one request batch.

    --time-limit covers the whole call (reading, bound, search, MILP) and is spent in nominal seconds, so the
    same seed repeats."""
    from planner.deployment.instance import load_routing_instance
    from planner.deployment.routing_solve import solve_routing

    run = run.start_clock()  # --time-limit covers reading the instance, not the imports above
    problem = load_routing_instance(instance)
    with run_progress(f"routing {problem.name}"):
        result = solve_routing(problem, solver=run.solver, time_limit=run.time_limit, threads=run.threads,
                               seed=run.seed, started=run.started)

    def show() -> None:
        out.print(f"routing {problem.name}: {result.status.value}, makespan {fmt(result.objective, 5)} s, bound "
                  f"{fmt(result.bound, 5)} s, gap {fmt_gap(result.gap)}, {result.solve_seconds:.2f} s ({result.solver})")
        if result.validation is not None:
            loads = result.validation.details.get("loads_s", {})
            out.print("per-instance load (s): " + ", ".join(f"{k} {v:.3f}" for k, v in loads.items()))
        if result.message:
            out.print(result.message)

    _emit(instance, result, run, problem, show)


@run_command
def compare_deployment_cmd(
    instance: Path = typer.Argument(..., help="cost-plan YAML (inventory, demands), request classes (gpus, models) "
                                              "or a cluster (machines)"),
    run: RunArgs = shared(RUN, RESULT),
) -> None:
    """Greedy, single-type and the cost MILP, each with the whole --time-limit: $/h, instances, gap; for a
    cluster, the uniform TP baselines against the exhaustive enumeration: tokens/s, degrees, gap.

    The gap is `planner.compare`'s: to the exact method's optimum, else to its bound, else to the best plan."""
    from planner.cli.comparing import CompareView, run_comparison, show_comparison
    from planner.deployment.harness import HARNESS
    from planner.deployment.instance import load_deployment_instance
    from planner.deployment.problem import ClusterProblem

    problem = load_deployment_instance(instance)
    if isinstance(problem, ClusterProblem):
        _compare_cluster(instance, problem, run)
        return
    comparison = run_comparison(problem, HARNESS, run.options, " $/h")

    def instances(row):  # noqa: ANN001, ANN202
        counts = getattr(row.result.solution if row.result is not None else None, "counts", None)
        return None if counts is None else int(sum(counts))

    name, models = getattr(problem, "name", instance.stem), cost_models_of(problem)
    view = CompareView(title=f"Deployment cost plan: {name}", unit=" $/h",
                       columns=[("$/h", lambda r: fmt(r.objective, 6)), ("instances", lambda r: fmt(instances(r)))],
                       extras=lambda r: {"instances": instances(r)},
                       cost_models=models, caveats=several_cost_model_caveats(models))
    show_comparison(instance, name, comparison, view, run)


def _compare_cluster(instance: Path, problem, run: RunArgs) -> None:  # noqa: ANN001
    """`compare deployment` of a cluster: family deployment-tp (`planner.deployment.tp_harness`)."""
    from planner.cli.comparing import CompareView, run_comparison, show_comparison
    from planner.deployment.tp_harness import HARNESS

    comparison = run_comparison(problem, HARNESS, run.options, " tokens/s")

    def degrees(row):  # noqa: ANN001, ANN202
        solution = row.result.solution if row.result is not None else None
        if solution is None:
            return None
        chosen = solution.best[0] if hasattr(solution, "best") else solution.degrees
        return ", ".join(f"{g.name} t={t}" for g, t in zip(problem.machines, chosen))

    models = cost_models_of(problem)
    view = CompareView(title=f"TP degrees of cluster {problem.name} ({problem.estimator} estimate)", unit=" tokens/s",
                       columns=[("tokens/s", lambda r: fmt(r.objective, 6)), ("degrees", lambda r: degrees(r) or "-")],
                       extras=lambda r: {"degrees": degrees(r)}, cost_models=models,
                       caveats=several_cost_model_caveats(models))
    show_comparison(instance, problem.name, comparison, view, run)


@run_command
def compare_routing_cmd(
    instance: Path = typer.Argument(..., help="routing batch YAML"),
    run: RunArgs = shared(RUN, RESULT),
) -> None:
    """RR, WRR, SI, MB, the workload mapper and the exact makespan MILP, each with the whole --time-limit.

    The gap is `planner.compare`'s: to the MILP optimum, else to its bound, else to the best routing."""
    from planner.cli.comparing import CompareView, run_comparison, show_comparison
    from planner.deployment.instance import load_routing_instance
    from planner.deployment.routing_harness import HARNESS

    problem = load_routing_instance(instance)
    comparison = run_comparison(problem, HARNESS, run.options, " s")
    models = cost_models_of(problem)
    view = CompareView(
        title=f"Routing vs exact makespan: {problem.name} ({len(problem.request_ids)} requests, "
              f"{len(problem.instances)} instances)", unit=" s",
        columns=[("makespan (s)", lambda r: fmt(r.objective, 5))], cost_models=models,
        caveats=several_cost_model_caveats(models))
    show_comparison(instance, problem.name, comparison, view, run)


def register(groups: CommandGroups) -> None:
    """Add this family's commands to the shared command groups."""
    groups.solve.command("deployment")(solve_deployment_cmd)
    groups.solve.command("routing")(solve_routing_cmd)
    groups.compare.command("deployment")(compare_deployment_cmd)
    groups.compare.command("routing")(compare_routing_cmd)
