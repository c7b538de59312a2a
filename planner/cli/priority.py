"""CLI of the priority family: `planner solve priority`, `planner compare priority`,
`planner generate priority`."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from planner.cli.common import (
    CommandGroups,
    ForceOption,
    JsonOption,
    OutOption,
    SeedOption,
    check_out,
    cost_model_caveats,
    err,
    fmt,
    fmt_gap,
    out,
    print_cost_caveats,
    to_json,
    write_output,
)
from planner.errors import InputError, PlannerError

if TYPE_CHECKING:
    from planner.core.result import Result
    from planner.priority.problem import PriorityProblem

#: ``planner.priority.solve.METHODS`` and ``EXACT_METHODS``, spelled out so that building the CLI does not
#: import the priority package (tests/test_cli.py checks they agree).
METHODS = ("exact", "sa", "exhaustive", "fcfs", "spf", "edf")
EXACT_METHODS = ("auto", "bnb", "milp", "hybrid")

ExactMethodOption = Annotated[str, typer.Option(
    "--exact-method", help=f"the exact method: one of {', '.join(EXACT_METHODS)} (auto: the subset DP at b_max = 1 "
                           "and N ≤ 20, else the branch-and-bound; hybrid: branch-and-bound then Dinkelbach MILP)")]


def _check_exact_method(exact_method: str) -> None:
    if exact_method not in EXACT_METHODS:
        raise PlannerError(f"unknown --exact-method {exact_method!r} (use one of {', '.join(EXACT_METHODS)})")


def _check_time_limit(time_limit: float | None) -> None:
    if time_limit is not None and not time_limit > 0:  # also rejects nan
        raise PlannerError(f"--time-limit must be positive, got {time_limit}")


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
    t = Table(title=f"Priority: {problem.name} (N = {problem.size}, b_max = {problem.b_max})", show_header=False,
              title_justify="left")
    t.add_column("", style="bold")
    t.add_column("")
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
    if result.validation is not None:
        t.add_row("validator", "valid, G recomputed = " + fmt(result.validation.objective, 6)
                  if result.validation.feasible else result.validation.summary())
    if result.message:
        t.add_row("note", result.message)
    return t


def solve_priority_cmd(
    instance: Path = typer.Argument(..., help="priority instance YAML"),
    method: str = typer.Option("exact", help=f"one of {', '.join(METHODS)}"),
    b_max: int = typer.Option(None, "--b-max", help="maximum batch size (overrides the file)"),
    instances: int = typer.Option(1, "--instances", help="Alg. 2: split the jobs over this many instances (needs token_capacity)"),
    time_limit: float = typer.Option(120.0, "--time-limit", help="seconds for the whole call (exact / exhaustive), spent in nominal seconds so the same seed repeats; returns the best plan and a bound"),
    seed: SeedOption = 0,
    exact_method: ExactMethodOption = "auto",
    json_out: JsonOption = False,
    output: OutOption = None,
    force: ForceOption = False,
) -> None:
    """Priority order and batch sizes maximising G = (jobs meeting their SLO) / (Σ latency)."""
    from planner.priority.solve import run_method, run_multi_instance
    from planner.solver import SolveStatus

    if method not in METHODS:
        raise PlannerError(f"unknown --method {method!r} (use one of {', '.join(METHODS)})")
    _check_exact_method(exact_method)
    _check_time_limit(time_limit)
    check_out(output, force)
    started = time.perf_counter()  # --time-limit covers reading the instance too
    problem = _load(instance, b_max)
    _check_multi_instance(instance, problem, instances)
    if instances != 1:
        result = run_multi_instance(problem, instances, method, seed=seed, time_limit=time_limit, started=started)
    else:
        result = run_method(problem, method, time_limit=time_limit, seed=seed, exact_method=exact_method,
                            started=started)
    payload = {"instance": str(instance), "name": problem.name, **result.to_dict(),
               "cost_model_caveats": cost_model_caveats(problem.cost_model)}
    text = to_json(payload)
    write_output(output, text, force)
    if json_out:
        print(text)
    else:
        out.print(_summary(result, problem))
        if result.status != SolveStatus.ERROR:
            print_cost_caveats(problem.cost_model)
    if result.status == SolveStatus.ERROR:
        raise typer.Exit(1)


def compare_priority_cmd(
    instance: Path = typer.Argument(..., help="priority instance YAML"),
    b_max: int = typer.Option(None, "--b-max", help="maximum batch size (overrides the file)"),
    time_limit: float = typer.Option(120.0, "--time-limit", help="seconds for the exact search (returns its best plan and bound)"),
    seed: SeedOption = 0,
    exact_method: ExactMethodOption = "auto",
    json_out: JsonOption = False,
    output: OutOption = None,
    force: ForceOption = False,
) -> None:
    """Every method against the exact optimum: G, SLO attainment, mean latency, time, gap."""
    from planner.priority.heuristics import HEURISTICS
    from planner.priority.solve import run_method

    _check_exact_method(exact_method)
    _check_time_limit(time_limit)
    check_out(output, force)
    problem = _load(instance, b_max)
    results = [run_method(problem, name, seed=seed) for name in HEURISTICS]
    exact = run_method(problem, "exact", time_limit=time_limit, seed=seed, exact_method=exact_method)
    optimum = exact.objective if exact.proven_optimal else None
    reference = optimum if optimum is not None else exact.bound
    rows = []
    for r in [*results, exact]:
        sol = r.solution
        gap = None if reference is None or r.objective is None else (reference - r.objective) / max(reference, 1e-300)
        rows.append({
            "method": r.method, "status": r.status.value, "G": r.objective,
            "slo_attainment": sol.met / problem.size if sol else None,
            "mean_latency_s": sol.total_latency_ms / problem.size / 1000 if sol else None,
            "seconds": r.solve_seconds, "gap_to_optimum": gap if optimum is not None else None,
            "gap_to_bound": gap if optimum is None else None,
            "valid": r.validation.feasible if r.validation else None,
        })
    payload = {"instance": str(instance), "name": problem.name, "optimum": optimum, "bound": exact.bound,
               "methods": rows, "exact": exact.to_dict(), "cost_model_caveats": cost_model_caveats(problem.cost_model)}
    text = to_json(payload)
    write_output(output, text, force)
    if json_out:
        print(text)
        return
    t = Table(title=f"Priority methods vs optimum: {problem.name} (N = {problem.size}, b_max = {problem.b_max})",
              title_justify="left")
    for col in ("method", "G (req/s)", "SLO attainment", "mean latency (s)", "gap to optimum", "time (s)", "valid", "status"):
        t.add_column(col, justify="left" if col in ("method", "status") else "right")
    for row in rows:
        gap = fmt_gap(row["gap_to_optimum"]) if optimum is not None else f"≤{fmt_gap(row['gap_to_bound'])} (to bound)"
        t.add_row(row["method"], fmt(row["G"], 5), fmt_gap(row["slo_attainment"]), fmt(row["mean_latency_s"], 4), gap,
                  f"{row['seconds']:.4f}", "-" if row["valid"] is None else ("yes" if row["valid"] else "NO"), row["status"])
    out.print(t)
    if optimum is not None:
        out.print(f"Exact optimum G = {fmt(optimum, 6)} req/s (proven by {exact.solver}, {exact.stats.get('nodes')} nodes or DP rounds).")
    else:
        out.print(f"Exact search stopped: best G = {fmt(exact.objective, 6)}, no plan exceeds {fmt(exact.bound, 6)}. {exact.message}")
    print_cost_caveats(problem.cost_model)


def generate_priority_cmd(
    output: Path = typer.Argument(..., help="instance YAML to write"),
    jobs: int = typer.Option(10, help="number of jobs (half chat, half code)"),
    b_max: int = typer.Option(1, "--b-max"),
    seed: SeedOption = 0,
    slo_spread: float = typer.Option(0.0, help="per-job SLO factor drawn from [1-spread, 1+spread] (0: paper's constant SLOs)"),
    token_capacity: int = typer.Option(None, help="per-batch token capacity (Eq. 20)"),
    name: str = typer.Option(None, help="instance name (default: file stem)"),
    force: bool = typer.Option(False, help="overwrite an existing file"),
) -> None:
    """Generate a priority instance in the paper's setting (Table 2 model, chat/code mix)."""
    from planner.costmodels.files import default_models_dir
    from planner.priority.generator import TABLE2_MODEL, generate_priority_problem
    from planner.priority.instance import save_priority_instance

    if b_max < 1:
        raise PlannerError(f"--b-max must be at least 1, got {b_max}")
    if output.is_dir():
        raise PlannerError(f"{output}: is a directory, expected a file name")
    check_out(output, force, "OUTPUT")
    problem = generate_priority_problem(jobs, b_max, seed, name=name or output.stem, slo_spread=slo_spread,
                                        token_capacity=token_capacity)
    ref = os.path.relpath(default_models_dir() / TABLE2_MODEL, output.resolve().parent)
    save_priority_instance(problem, output, ref, force=force)
    out.print(f"wrote {output} ({jobs} jobs, b_max {b_max})")
    print_cost_caveats(problem.cost_model)


def register(groups: CommandGroups) -> None:
    """Add this family's commands to the shared command groups."""
    groups.solve.command("priority")(solve_priority_cmd)
    groups.compare.command("priority")(compare_priority_cmd)
    groups.generate.command("priority")(generate_priority_cmd)
