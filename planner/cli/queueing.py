"""CLI of the queueing family (QLM): `planner solve queueing`, `planner compare queueing`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from planner.cli.common import (CommandGroups, add_verdict_rows, cost_models_of, fmt, fmt_gap, out, print_cost_caveats,
                                run_progress, several_cost_model_caveats, summary_table)
from planner.cli.options import RESULT, RUN, RunArgs, run_command, shared
from planner.errors import PlannerError


def _load(instance: Path, objective: str | None, deadline: str | None):
    from planner.queueing.instance import load_queueing_instance
    from planner.queueing.problem import OBJECTIVES

    if objective is not None and objective not in OBJECTIVES:
        raise PlannerError(f"--objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if deadline is not None and deadline not in ("start", "completion"):
        raise PlannerError(f"--deadline must be start or completion, got {deadline!r}")
    if objective is None and deadline is None:
        return load_queueing_instance(instance)
    return load_queueing_instance(instance).with_objective(objective, deadline)


def _check_formulation(formulation: str) -> None:
    from planner.queueing.pipeline import FORMULATIONS

    if formulation not in FORMULATIONS:
        raise PlannerError(f"--formulation must be one of {', '.join(FORMULATIONS)}, got {formulation!r}")


@run_command
def solve_queueing_cmd(
    instance: Path = typer.Argument(..., help="queueing instance YAML"),
    objective: str = typer.Option(None, help="penalty (hard SLOs) | total_lateness | max_lateness | late_groups"),
    deadline: str = typer.Option(None, help="SLO on the group's estimated start or completion"),
    formulation: str = typer.Option("auto", help="exact model: auto (= certified for the penalty objective: local search + "
                                                 "certified assignment bound + reduced-cost-fixed slots MILP) | "
                                                 "certified | slots (exact dense MILP) | blocks (model-block restriction)"),
    run: RunArgs = shared(RUN, RESULT, "verbose"),
) -> None:
    """Order the virtual queues with the QLM MILP; soft version and scale-up when SLOs cannot be met."""
    from planner.queueing.evaluator import EstimatorEvaluator
    from planner.queueing.pipeline import QueueingKnobs, solve_queueing

    _check_formulation(formulation)
    run = run.start_clock()  # --time-limit covers reading the instance, not the imports above
    problem = _load(instance, objective, deadline)
    with run_progress(f"ordering {problem.num_groups} groups on {problem.num_queues} queues", verbose=run.verbose):
        result = solve_queueing(problem, run.options,
                                QueueingKnobs(formulation=formulation, verbose=run.verbose, started=run.started))
    evaluation = {} if result.solution is None else {
        "evaluation": EstimatorEvaluator().evaluate(problem, result.solution).to_dict()}
    models = cost_models_of(problem)
    run.emit_result(instance, problem.name, result, lambda: _show_solution(problem, result), cost_models=models,
                    caveats=several_cost_model_caveats(models), **evaluation)


def _show_solution(problem, result) -> None:  # noqa: ANN001
    """The summary table of `solve queueing` and its virtual queues in service order."""
    t = summary_table(f"Queueing: {problem.name} ({problem.num_groups} groups, {problem.num_queues} queues)")
    t.add_row("status", result.status.value)
    t.add_row(f"objective ({problem.objective})", fmt(result.objective, 6))
    t.add_row("bound", fmt(result.bound, 6))
    # the penalty's constant −Σ SLO is left out of the gap (Result.objective_offset): it is the gap on Σ start
    t.add_row("gap" + (" (on Σ start)" if result.objective_offset else ""), fmt_gap(result.gap))
    t.add_row("formulation", str(result.stats.get("formulation")))
    if result.bound_source:
        t.add_row("bound from", result.bound_source)
    if result.stats.get("plan_from"):
        t.add_row("plan from", str(result.stats["plan_from"]))
    t.add_row("time", f"{result.solve_seconds:.2f} s (model build {result.build_seconds:.2f} s)")
    if "swaps" in result.stats:
        t.add_row("swaps / late groups / busy until", f"{result.stats['swaps']} / {result.stats['late_groups']} / "
                                                      f"{result.stats['busy_s']:.1f} s")
    if "soft" in result.stats:
        s = result.stats["soft"]
        t.add_row("soft version", f"{s['objective']} = {fmt(s['value'], 6)} ({s['late_groups']} late groups)")
    if "scale_up" in result.stats:
        rec = result.stats["scale_up"]
        t.add_row("scale-up", ", ".join(f"+{n} {k}" for k, n in rec["extra_instances"].items()) or rec["message"])
    add_verdict_rows(t, result, digits=6)
    out.print(t)
    if result.solution is not None:
        q = Table(title="Virtual queues (in service order)", title_justify="left")
        q.add_column("queue")
        q.add_column("groups")
        for name, groups in result.solution.to_dict()["queues"].items():
            q.add_row(name, " → ".join(groups) or "-")
        out.print(q)


@run_command
def compare_queueing_cmd(
    instance: Path = typer.Argument(..., help="queueing instance YAML"),
    objective: str = typer.Option(None, help="objective every method is scored on"),
    deadline: str = typer.Option(None, help="start or completion"),
    formulation: str = typer.Option("auto", help="exact model: auto (certified pipeline for penalty) | certified | slots | blocks"),
    run: RunArgs = shared(RUN),
    evaluator: str = typer.Option("estimator", help="estimator (RWT estimates) or simulator (batching family's simulator)"),
    _results: RunArgs = shared(RESULT),
) -> None:
    """EDF, FCFS, greedy and the MILP, each with the whole --time-limit: objective, gap, SLO attainment, swaps.

    The gap is `planner.compare`'s (without the objective's constant −Σ SLO): to the MILP optimum, else to its
    bound, else to the best plan."""
    from dataclasses import replace

    from planner.cli.comparing import CompareView, run_comparison, show_comparison
    from planner.queueing.evaluator import EVALUATORS
    from planner.queueing.harness import HARNESS
    from planner.queueing.pipeline import QueueingKnobs, precheck, run_heuristic, solve_queueing
    from planner.queueing.validator import validate_assignment
    from planner.solver import SolveStatus

    _check_formulation(formulation)
    problem = _load(instance, objective, deadline)
    if evaluator not in EVALUATORS:
        raise PlannerError(f"--evaluator must be one of {', '.join(EVALUATORS)}, got {evaluator!r}")
    precheck(problem)  # an instance no plan can serve: one line, before any method runs

    def run_method(p, method, options):  # noqa: ANN001, ANN202
        if method != HARNESS.exact_method:
            return run_heuristic(p, method)
        return solve_queueing(p, options, QueueingKnobs(formulation=formulation))

    comparison = run_comparison(problem, replace(HARNESS, run=run_method), run.options)
    milp = comparison.exact.result
    evaluator_impl = EVALUATORS[evaluator]()
    cost_models = cost_models_of(problem)
    if evaluator == "simulator":  # it times every run with the batching family's default InferMax model
        from planner.batching.costmodel import default_cost_model

        cost_models.append(default_cost_model())
    # SLOs that cannot all be met: the MILP row holds the soft version's plan, so every row is also
    # scored on that soft objective (by the validator), which makes the rows comparable
    soft = milp.stats.get("soft", {}).get("objective") if isinstance(milp.stats.get("soft"), dict) else None
    extra: dict[str, dict] = {}
    for row in comparison.rows:
        sol = row.result.solution if row.result is not None else None
        entry: dict = {"evaluation": evaluator_impl.evaluate(problem, sol).to_dict() if sol is not None else None}
        if soft is not None and sol is not None:
            entry["soft"] = {"objective": soft, "value": validate_assignment(problem, sol, soft).objective}
        extra[row.method] = entry

    def ev(row, key, form):  # noqa: ANN001, ANN202
        e = extra[row.method]["evaluation"]
        return "-" if e is None else form(e[key])

    columns = [("objective", lambda r: fmt(r.objective, 6)),
               ("SLO attainment", lambda r: ev(r, "overall_attainment", lambda v: f"{100 * v:.1f}%")),
               ("per class", lambda r: ev(r, "slo_attainment", lambda v: ", ".join(f"{k} {100 * a:.0f}%" for k, a in v.items()))),
               ("swaps", lambda r: ev(r, "swaps", str)), ("drain (s)", lambda r: ev(r, "drain_s", lambda v: f"{v:.1f}")),
               ("tok/s", lambda r: ev(r, "throughput_tokens_per_s", lambda v: f"{v:.0f}"))]
    if soft is not None:
        columns.insert(1, (f"{soft} (soft)", lambda r: fmt(extra[r.method]["soft"]["value"], 6)
                           if "soft" in extra[r.method] else "-"))

    def after() -> None:
        if milp.status in (SolveStatus.INFEASIBLE, SolveStatus.NO_SOLUTION) and problem.hard_deadlines:
            out.print("no plan meets every hard SLO" + (f": column '{soft} (soft)' scores every plan on the soft "
                                                       "version (the MILP row holds the soft version's plan)" if soft else "")
                      + "; to rank on a soft objective only, use --objective total_lateness (or max_lateness, late_groups)")

    view = CompareView(
        title=(f"Queueing compare: {problem.name} (objective {problem.objective}, deadline on {problem.deadline}; "
               f"evaluated by the {evaluator})"),
        columns=columns, extras=lambda r: extra[r.method],
        fields={"objective_name": problem.objective, "soft_objective_name": soft},
        cost_models=cost_models, caveats=several_cost_model_caveats(cost_models), after=after)
    show_comparison(instance, problem.name, comparison, view, run)


@run_command
def simulate_queueing_cmd(
    instance: Path = typer.Argument(..., help="queueing instance YAML whose groups carry arrival times (a trace)"),
    policy: str = typer.Option("all", "--method", help="policy: qlm (MILP re-solved only on a predicted violation) | edf | fcfs | all"),
    run: RunArgs = shared("solver time_limit threads json out force"),
) -> None:
    """Replay the groups in arrival order; QLM re-solves only when the estimator predicts a violation.

    --solver, --time-limit and --threads apply to each MILP re-solve.  The replay is deterministic (no --seed)."""
    from planner.queueing.instance import load_queueing_instance
    from planner.queueing.trigger import POLICIES, replay_trace

    policies = POLICIES if policy == "all" else (policy,)
    if any(p not in POLICIES for p in policies):
        raise PlannerError(f"--method must be one of {', '.join(POLICIES)} or all, got {policy!r}")
    problem = load_queueing_instance(instance)
    reports = []
    with run_progress() as progress:
        for p in policies:
            progress.phase(f"replaying {problem.num_groups} groups under {p}")
            reports.append(replay_trace(problem, p, solver=run.solver, time_limit=run.time_limit, threads=run.threads))
    run.emit({"instance": str(instance), "name": problem.name, "replays": [r.to_dict() for r in reports],
              "cost_model_caveats": several_cost_model_caveats(cost_models_of(problem))},
             show=lambda: _show_replays(problem, reports))


def _show_replays(problem, reports) -> None:  # noqa: ANN001
    t = Table(title=f"Queueing trace replay: {problem.name} ({problem.num_groups} groups, {problem.num_queues} instances)",
              title_justify="left")
    for col in ("policy", "SLO attainment", "per class", "swaps", "drain (s)", "MILP solves", "MILP time (s)"):
        t.add_column(col, justify="left" if col in ("policy", "per class") else "right")
    for r in reports:
        t.add_row(r.policy, f"{100 * r.overall_attainment:.1f}%",
                  ", ".join(f"{k} {100 * v:.0f}%" for k, v in r.slo_attainment.items()), str(r.swaps),
                  f"{r.drain_s:.1f}", str(r.milp_solves), f"{r.milp_seconds:.2f}")
    out.print(t)
    print_cost_caveats(*cost_models_of(problem))


def register(groups: CommandGroups) -> None:
    """Add this family's commands to the shared command groups."""
    groups.solve.command("queueing")(solve_queueing_cmd)
    groups.compare.command("queueing")(compare_queueing_cmd)
    groups.simulate.command("queueing")(simulate_queueing_cmd)
