"""CLI of the batching family (InferMax): simulate, solve, compare."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from planner.cli.common import (CommandGroups, add_verdict_rows, cost_model_caveats, cost_models_of, fmt, fmt_gap, out,
                                run_progress, summary_table)
from planner.cli.options import RESULT, RUN, RunArgs, run_command, shared
from planner.errors import InfeasibleError, InputError, PlannerError

if TYPE_CHECKING:
    from planner.batching.problem import BatchingProblem
    from planner.core.result import Result
    from planner.solver import SolveStatus

#: ``planner.batching.scheduler.PRESETS`` by name, spelled out so that building the CLI does not import
#: the batching package (tests/cli/test_cli.py checks the two agree).
PRESET_NAMES = ("vllm", "sarathi", "sarathi-pc", "sarathi-nocp", "vllm-hy", "sarathi-nohy", "vllm-ef", "sarathi-ef",
                "sarathi-pc-ef", "sarathi-nocp-ef", "vllm-hy-ef", "sarathi-nohy-ef")
SCHEDULERS = ", ".join(PRESET_NAMES)


#: Default of --max-work: the largest run of `simulate`, `solve` and `compare batching`, in request-batches
#: (requests × batches of one simulated schedule).  Simulating and validating cost about 1 µs per
#: request-batch (measured: 1,024 requests × 1,024 tokens under vLLM, 1.25·10^7, 3.0 s in all; 50 requests ×
#: 10^6 tokens, 5·10^7, 47 s and 1.8 GB).  The default admits 1,024 × 1,024 under every preset (≤ 1.7·10^7)
#: and refuses the 50 × 10^6 instance in about a second with one line.  `simulate` counts the batches of the
#: schedule it builds (and stops at the first one too many); `solve` and `compare` check a lower bound
#: (`planner.batching.scheduler.min_batches`) before running the presets.
MAX_WORK = 30_000_000

MaxWorkOption = typer.Option(
    MAX_WORK, "--max-work",
    help="refuse a run whose simulated schedule would exceed this many request-batches (requests × batches; "
         "the simulator and the validator replay each one)")

#: Title of `planner solve batching`'s table by the status of the result.
SOLVE_TITLES = {"optimal": "Optimal schedule", "feasible": "Best schedule found (optimality not proven)",
                "infeasible": "No schedule (infeasible)", "no_solution": "No schedule found",
                "unbounded": "Unbounded", "error": "Solve failed"}


def _load(instance: Path) -> BatchingProblem:
    """The instance, with a request that can never fit in M reported against the file's ``limits.M``."""
    from planner.batching.instance import load_batching_instance

    problem = load_batching_instance(instance)
    try:
        problem.check_feasible()
    except InfeasibleError as exc:
        raise InputError(instance, "limits.M", str(exc)) from None
    return problem


def _check_max_work(max_work: int) -> None:
    if max_work < 1:
        raise PlannerError(f"--max-work must be at least 1, got {max_work}")


def _too_much_work(instance: Path, requests: int, at_least: int, max_work: int, who: str) -> InputError:
    """The one line for a run above --max-work: requests × (a lower bound on) batches."""
    return InputError(instance, "requests",
                      f"{requests:,} requests need at least {at_least:,} batches {who}, i.e. at least "
                      f"{requests * at_least:,} request-batches to simulate and validate, above --max-work "
                      f"{max_work:,} (raise it to run anyway)")


def _check_work(instance: Path, problem: BatchingProblem, max_work: int) -> None:
    """Refuse, before any simulation, an instance whose every preset schedule exceeds --max-work."""
    from planner.batching.scheduler import min_batches

    at_least = min_batches(problem, problem.C, problem.M, problem.running_limit)
    if problem.n * at_least > max_work:
        raise _too_much_work(instance, problem.n, at_least, max_work, "under the instance's limits")


def solve_title(status: SolveStatus, name: str) -> str:
    return f"{SOLVE_TITLES.get(status.value, status.value)}: {name}"


def _metrics_table(result: Result, title: str) -> Table:
    t = summary_table(title)
    t.add_row("status", result.status.value)
    t.add_row("method", f"{result.method} ({result.solver})")
    if result.solution is not None:
        m = result.solution.metrics
        t.add_row("total latency", f"{fmt(m['total_latency'], 6)} s")
        t.add_row("tokens/s", fmt(m["tokens_per_second"], 1))
        t.add_row("mean TTFT / TPOT / E2E", f"{fmt(m['mean_ttft'], 5)} / {fmt(m['mean_tpot'], 5)} / {fmt(m['mean_e2e'], 5)} s")
        t.add_row("batches / evictions", f"{m['batches']} / {m['evictions']}")
        t.add_row("KV peak / mean", f"{m['peak_kv']} / {fmt(m['mean_kv'], 1)} tokens")
    t.add_row("objective", fmt(result.objective, 6))
    t.add_row("lower bound", f"{fmt(result.bound, 6)} ({result.bound_source})")
    t.add_row("gap", fmt_gap(result.gap))
    t.add_row("time", f"{result.solve_seconds:.2f} s (build {result.build_seconds:.2f} s)")
    if result.stats.get("J"):
        s = result.stats
        if s.get("columns") is not None:
            t.add_row("model", f"{s.get('formulation', 'bigm')}: J={s['J']} batches, {s['columns']} columns "
                      f"({s.get('integer_columns')} integer), {s.get('rows')} rows")
        else:  # the MIP was not built (too large): the note says why
            t.add_row("model", f"not built (J={s['J']} batches)")
        t.add_row("warm start", str(s.get("warm_start")))
    if result.stats.get("proof"):
        t.add_row("optimality proved by", str(result.stats["proof"]))
    add_verdict_rows(t, result, digits=6)
    return t


def _request_table(result: Result, limit: int) -> Table | None:
    if result.solution is None or limit <= 0:
        return None
    rows = result.solution.per_request_rows()
    t = Table(title=f"Requests (first {min(limit, len(rows))} of {len(rows)})", title_justify="left")
    for col in ("id", "TTFT (s)", "TPOT (s)", "E2E (s)", "evictions"):
        t.add_column(col)
    for r in rows[:limit]:
        t.add_row(r["id"], fmt(r["ttft"], 5), fmt(r["tpot"], 5), fmt(r["e2e"], 5), str(r["evictions"]))
    return t


def _emit(instance: Path, problem: BatchingProblem, result: Result, run: RunArgs, title: str, per_request: int, *,
          exit_on_error: bool) -> None:
    """The result as JSON (with the cost model's caveats) or as tables followed by the caveats line."""

    def show() -> None:
        out.print(_metrics_table(result, title))
        table = _request_table(result, per_request)
        if table is not None:
            out.print(table)

    cost = cost_models_of(problem)[0]
    run.emit_result(instance, problem.name, result, show, cost_models=[cost], caveats=cost_model_caveats(cost),
                    exit_on_error=exit_on_error)


@run_command
def simulate_batching_cmd(
    instance: Path = typer.Argument(..., help="batching instance YAML"),
    scheduler: str = typer.Option("vllm", "--method", help=f"scheduler preset, one of: {SCHEDULERS}"),
    C: int = typer.Option(None, "--max-batch-tokens", help="C: max tokens per batch (default: the instance's)"),
    P: int = typer.Option(None, "--max-prefill-tokens", help="P: max prefill tokens per batch (default: min(preset, instance))"),
    M: int = typer.Option(None, "--kv-tokens", help="M: KV-cache budget in tokens"),
    R_max: int = typer.Option(None, "--max-running", help="R_max: max running requests"),
    no_evict: bool = typer.Option(False, "--no-evict", help="eviction-free variant (reserve I+O-1 at admission)"),
    rank: str = typer.Option(None, "--rank", help="waiting-queue order: arrival, input or output (Appendix A.3)"),
    run: RunArgs = shared(RESULT),
    per_request: int = typer.Option(10, "--per-request", help="rows of the per-request table to print"),
    max_work: int = MaxWorkOption,
) -> None:
    """Simulate one scheduler (Algorithm 1 preset) on an instance under the §3.2 cost model.

    A deterministic replay without a solver: no --solver, --threads, --time-limit or --seed."""
    from planner.batching.scheduler import MAX_LIMIT, WorkLimitError, preset_config
    from planner.batching.pipeline import run_scheduler

    for flag, value in (("--max-batch-tokens", C), ("--max-prefill-tokens", P), ("--kv-tokens", M),
                        ("--max-running", R_max)):
        if value is not None and not 1 <= value <= MAX_LIMIT:
            raise PlannerError(f"{flag} must be between 1 and {MAX_LIMIT:,}, got {value}")
    _check_max_work(max_work)
    problem = _load(instance)
    if P is not None and P > (C if C is not None else problem.C):
        raise PlannerError(f"--max-prefill-tokens {P} must not exceed C={C if C is not None else problem.C}")
    name = scheduler.lower()
    if no_evict and not name.endswith("-ef"):
        name += "-ef"
    config = preset_config(name, C=C, P=P, M=M, R_max=R_max, rank=rank)
    try:  # the simulator stops at the first batch beyond the limit (or before starting, from its lower bound)
        result = run_scheduler(problem, config, max_batches=max_work // problem.n)
    except WorkLimitError as exc:
        raise _too_much_work(instance, problem.n, exc.at_least, max_work, f"under {config.name}") from None
    _emit(instance, problem, result, run, f"Simulation: {problem.name} / {config.name}", per_request,
          exit_on_error=False)  # an invalid simulated schedule is a finding, not a failed run


@run_command
def solve_batching_cmd(
    instance: Path = typer.Argument(..., help="batching instance YAML"),
    objective: str = typer.Option("latency", help="latency (total) or ttft (mean time to first token)"),
    run: RunArgs = shared(RUN),
    batches: int = typer.Option(None, "--batches", help="batch count J (default: derived from the best heuristic)"),
    goal_scheduler: str = typer.Option(None, "--goal-method", help="add latency ≤ goal-factor × this scheduler preset's"),
    goal_factor: float = typer.Option(None, "--goal-factor",
                                      help="the goal is latency ≤ this × the --goal-method preset's (default 0.9)"),
    _results: RunArgs = shared(RESULT),
    per_request: int = typer.Option(10, "--per-request", help="rows of the per-request table to print"),
    formulation: str = typer.Option("auto", help="exact model: auto (the per-request path model where it applies), paths or bigm"),
    max_work: int = MaxWorkOption,
) -> None:
    """Solve the §3.3 optimal batch-schedule MIP (warm-started from the best preset or lazy schedule)."""
    from planner.batching.scheduler import preset_config
    from planner.batching.pipeline import solve_batching

    if batches is not None and batches < 1:
        raise PlannerError(f"--batches must be at least 1, got {batches}")
    if goal_factor is not None and goal_scheduler is None:
        raise PlannerError("--goal-factor needs --goal-method (the scheduler preset whose latency it scales)")
    goal_factor = 0.9 if goal_factor is None else goal_factor
    if not (math.isfinite(goal_factor) and goal_factor > 0):
        raise PlannerError(f"--goal-factor must be a positive number, got {goal_factor}")
    if goal_scheduler is not None:
        preset_config(goal_scheduler)
    _check_max_work(max_work)
    problem = _load(instance)
    _check_work(instance, problem, max_work)
    with run_progress(f"solving the batch schedule of {problem.n} requests"):
        result = solve_batching(problem, objective=objective, solver=run.solver, time_limit=run.time_limit,
                                threads=run.threads, seed=run.seed, batches=batches, goal_scheduler=goal_scheduler,
                                goal_factor=goal_factor, formulation=formulation, started=run.started)
    _emit(instance, problem, result, run, solve_title(result.status, problem.name), per_request, exit_on_error=True)


@run_command
def compare_batching_cmd(
    instance: Path = typer.Argument(..., help="batching instance YAML"),
    run: RunArgs = shared(RUN),
    formulation: str = typer.Option("auto", help="exact model: auto (the per-request path model where it applies), paths or bigm"),
    no_mip: bool = typer.Option(False, "--no-mip", help="skip the MIP; gaps are to the best schedule found"),
    _results: RunArgs = shared(RESULT),
    max_work: int = MaxWorkOption,
) -> None:
    """Every preset scheduler, the searched heuristics and the MIP, each with the whole --time-limit.

    The gap is `planner.compare`'s: to the MIP optimum, else to its bound, else to the best schedule."""
    from dataclasses import replace

    from planner.batching.harness import HARNESS
    from planner.batching.pipeline import FORMULATIONS, lower_bound, solve_batching
    from planner.cli.comparing import CompareView, run_comparison, show_comparison

    _check_max_work(max_work)
    if formulation not in FORMULATIONS:
        raise PlannerError(f"--formulation must be one of {', '.join(FORMULATIONS)}, got {formulation!r}")
    problem = _load(instance)
    _check_work(instance, problem, max_work)
    methods = HARNESS.heuristics + (() if no_mip else (HARNESS.exact_method,))

    def run_method(p, method, options):  # noqa: ANN001, ANN202
        if method != HARNESS.exact_method:
            return HARNESS.run(p, method, options)
        return solve_batching(p, solver=options.solver, time_limit=options.time_limit, threads=options.threads,
                              seed=options.seed, formulation=formulation)

    comparison = run_comparison(problem, replace(HARNESS, run=run_method), run.options, " s", methods)
    cost = cost_models_of(problem)[0]
    bound = lower_bound(problem)

    def metric(row, key):  # noqa: ANN001, ANN202
        sol = row.result.solution if row.result is not None else None
        return None if sol is None else sol.metrics.get(key)

    def after() -> None:
        out.print(f"combinatorial lower bound: {fmt(bound, 6)} s")
        stuck = [row.method for row in comparison.rows if row.status == "infeasible" and row.kind == "heuristic"]
        if stuck:
            out.print("presets that cannot finish this instance: " + ", ".join(stuck))

    view = CompareView(
        title=f"Batching compare: {problem.name}", unit=" s",
        columns=[("latency (s)", lambda r: fmt(r.objective, 6)),
                 ("tokens/s", lambda r: fmt(metric(r, "tokens_per_second"), 4)),
                 ("TTFT (s)", lambda r: fmt(metric(r, "mean_ttft"), 5)), ("TPOT (s)", lambda r: fmt(metric(r, "mean_tpot"), 5)),
                 ("evictions", lambda r: fmt(metric(r, "evictions"))), ("batches", lambda r: fmt(metric(r, "batches")))],
        extras=lambda r: {key: metric(r, key) for key in ("tokens_per_second", "mean_ttft", "mean_tpot", "evictions",
                                                          "batches")},
        fields={"lower_bound": bound}, cost_models=[cost], caveats=cost_model_caveats(cost), after=after)
    show_comparison(instance, problem.name, comparison, view, run)


def register(groups: CommandGroups) -> None:
    """Add this family's commands to the shared command groups."""
    groups.simulate.command("batching")(simulate_batching_cmd)
    groups.solve.command("batching")(solve_batching_cmd)
    groups.compare.command("batching")(compare_batching_cmd)
