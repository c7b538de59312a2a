"""CLI of the priority family: `planner solve priority`, `planner compare priority`,
`planner generate priority`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from planner.cli.common import (CommandGroups, add_verdict_rows, check_out, cost_model_caveats, err, fmt, fmt_gap, out,
                                print_cost_caveats, run_progress, summary_table)
from planner.cli.options import RESULT, RunArgs, run_command, shared
from planner.errors import InputError, PlannerError

if TYPE_CHECKING:
    from planner.core.result import Result
    from planner.priority.problem import PriorityProblem

#: ``planner.priority.pipeline.METHODS`` and ``EXACT_METHODS``, spelled out so that building the CLI does not
#: import the priority package (tests/cli/test_cli.py checks they agree).
METHODS = ("exact", "sa", "exhaustive", "fcfs", "spf", "edf")
EXACT_METHODS = ("auto", "bnb", "milp", "hybrid")

FormulationOption = Annotated[str, typer.Option(
    "--formulation", help=f"the exact algorithm: one of {', '.join(EXACT_METHODS)} (auto: the subset DP at b_max = 1 "
                          "and N ≤ 20, else the branch-and-bound; hybrid: branch-and-bound then Dinkelbach MILP)")]
#: compare priority's annotation: the same --formulation.
ExactMethodOption = FormulationOption


def _check_exact_method(exact_method: str) -> None:
    if exact_method not in EXACT_METHODS:
        raise PlannerError(f"unknown --formulation {exact_method!r} (use one of {', '.join(EXACT_METHODS)})")


def _check_multi_instance(instance: Path, problem: PriorityProblem, instances: int) -> None:
    if instances < 1:
        raise PlannerError(f"--instances must be at least 1, got {instances}")
    if instances > 1 and problem.token_capacity is None:
        raise InputError(instance, "token_capacity", f"required with --instances {instances} (multi-instance mode "
                                                     "assigns jobs by memory, Eq. 20): give token_capacity or memory")


def _load(instance: Path, b_max: int | None) -> PriorityProblem:
    from planner.priority.instance import load_priority_instance

    if b_max is not None and b_max < 1:
        raise PlannerError(f"--b-max must be at least 1, got {b_max}")
    problem = load_priority_instance(instance, b_max=b_max)
    for line in problem.range_warnings():
        err.print(f"warning: {line}")
    return problem


def _summary(result: Result, problem: PriorityProblem) -> Table:
    t = summary_table(f"Priority: {problem.name} (N = {problem.size}, b_max = {problem.b_max})")
    sol = result.solution
    t.add_row("method", f"{result.method} ({result.status.value})")
    t.add_row("G (req/s)", fmt(result.objective, 6))
    if sol is not None:
        t.add_row("SLO met", f"{sol.met} of {problem.size} ({100 * sol.met / problem.size:.1f}%)")
        t.add_row("mean latency", f"{sol.total_latency_ms / problem.size / 1000:.3f} s")
        for k, plan in enumerate(sol.plans):
            batches = " | ".join(" ".join(problem.jobs[i].name for i in batch) for batch in plan.batches())
            t.add_row("batches" if len(sol.plans) == 1 else f"instance {k}", batches)
    t.add_row("upper bound", f"{fmt(result.bound, 6)}  ({result.bound_source})" if result.bound is not None else "-")
    t.add_row("gap", fmt_gap(result.gap))
    t.add_row("time", f"{result.solve_seconds:.4f} s")
    add_verdict_rows(t, result, "G", digits=6)
    return t


@run_command
def solve_priority_cmd(
    instance: Path = typer.Argument(..., help="priority instance YAML"),
    method: str = typer.Option("exact", help=f"which method runs: one of {', '.join(METHODS)}"),
    b_max: int = typer.Option(None, "--b-max", help="maximum batch size (overrides the file)"),
    instances: int = typer.Option(1, "--instances", help="Alg. 2: split the jobs over this many instances (needs token_capacity)"),
    run: RunArgs = shared("solver threads time_limit seed"),
    exact_method: FormulationOption = "auto",
    _results: RunArgs = shared(RESULT),
) -> None:
    """Priority order and batch sizes maximising G = (jobs meeting their SLO) / (Σ latency).

    --time-limit covers the whole call (exact / exhaustive) and is spent in nominal seconds, so the same seed
    repeats; --solver and --threads solve the MILP of --formulation milp/hybrid (one thread by default)."""
    from planner.priority.pipeline import run_method, run_multi_instance

    if method not in METHODS:
        raise PlannerError(f"unknown --method {method!r} (use one of {', '.join(METHODS)})")
    _check_exact_method(exact_method)
    run = run.start_clock()  # --time-limit covers reading the instance, not the imports above
    problem = _load(instance, b_max)
    _check_multi_instance(instance, problem, instances)
    with run_progress(f"{method} search over {problem.size} jobs"):
        if instances != 1:
            result = run_multi_instance(problem, instances, method, seed=run.seed, time_limit=run.time_limit,
                                        started=run.started)
        else:
            result = run_method(problem, method, time_limit=run.time_limit, seed=run.seed, exact_method=exact_method,
                                started=run.started, solver=run.solver, threads=run.threads)

    run.emit_result(instance, problem.name, result, lambda: out.print(_summary(result, problem)),
                    cost_models=[problem.cost_model], caveats=cost_model_caveats(problem.cost_model))


@run_command
def compare_priority_cmd(
    instance: Path = typer.Argument(..., help="priority instance YAML"),
    b_max: int = typer.Option(None, "--b-max", help="maximum batch size (overrides the file)"),
    run: RunArgs = shared("solver threads time_limit seed"),
    exact_method: FormulationOption = "auto",
    _results: RunArgs = shared(RESULT),
) -> None:
    """Every heuristic and the exact search, each with the whole --time-limit: G, SLO attainment, mean latency, gap.

    The gap is `planner.compare`'s: to the exact optimum, else to its bound, else to the best plan."""
    from dataclasses import replace

    from planner.cli.comparing import CompareView, run_comparison, show_comparison
    from planner.priority.harness import HARNESS
    from planner.priority.pipeline import run_method

    _check_exact_method(exact_method)
    problem = _load(instance, b_max)
    harness = replace(HARNESS, run=lambda p, method, options: run_method(
        p, method, time_limit=options.time_limit, seed=options.seed, exact_method=exact_method,
        solver=options.solver, threads=options.threads))
    comparison = run_comparison(problem, harness, run.options, " req/s")

    def attainment(row):  # noqa: ANN001, ANN202
        sol = row.result.solution if row.result is not None else None
        return None if sol is None else sol.met / problem.size

    def mean_latency(row):  # noqa: ANN001, ANN202
        sol = row.result.solution if row.result is not None else None
        return None if sol is None else sol.total_latency_ms / problem.size / 1000

    view = CompareView(
        title=f"Priority methods: {problem.name} (N = {problem.size}, b_max = {problem.b_max})", unit=" req/s",
        columns=[("G (req/s)", lambda r: fmt(r.objective, 5)), ("SLO attainment", lambda r: fmt_gap(attainment(r))),
                 ("mean latency (s)", lambda r: fmt(mean_latency(r), 4))],
        extras=lambda r: {"slo_attainment": attainment(r), "mean_latency_s": mean_latency(r)},
        cost_models=[problem.cost_model], caveats=cost_model_caveats(problem.cost_model))
    show_comparison(instance, problem.name, comparison, view, run)


@run_command
def generate_priority_cmd(
    output: Path = typer.Argument(..., help="instance YAML to write"),
    jobs: int = typer.Option(10, help="number of jobs (half chat, half code)"),
    b_max: int = typer.Option(1, "--b-max", help="maximum batch size"),
    run: RunArgs = shared("seed"),
    slo_spread: float = typer.Option(0.0, help="per-job SLO factor drawn from [1-spread, 1+spread] (0: paper's constant SLOs)"),
    token_capacity: int = typer.Option(None, help="per-batch token capacity (Eq. 20)"),
    name: str = typer.Option(None, help="instance name (default: file stem)"),
    _force: RunArgs = shared("force"),
) -> None:
    """Generate a priority instance in the paper's setting (Table 2 model, chat/code mix)."""
    from planner.costmodels.files import default_models_dir
    from planner.priority.generator import TABLE2_MODEL, generate_priority_problem
    from planner.priority.instance import save_priority_instance

    if b_max < 1:
        raise PlannerError(f"--b-max must be at least 1, got {b_max}")
    if output.is_dir():
        raise PlannerError(f"{output}: is a directory, expected a file name")
    check_out(output, run.force, "OUTPUT")
    problem = generate_priority_problem(jobs, b_max, run.seed, name=name or output.stem, slo_spread=slo_spread,
                                        token_capacity=token_capacity)
    ref = os.path.relpath(default_models_dir() / TABLE2_MODEL, output.resolve().parent)
    save_priority_instance(problem, output, ref, force=run.force)
    out.print(f"wrote {output} ({jobs} jobs, b_max {b_max})")
    print_cost_caveats(problem.cost_model)


def register(groups: CommandGroups) -> None:
    """Add this family's commands to the shared command groups."""
    groups.solve.command("priority")(solve_priority_cmd)
    groups.compare.command("priority")(compare_priority_cmd)
    groups.generate.command("priority")(generate_priority_cmd)
