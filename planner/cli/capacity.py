"""`planner capacity SCENARIO.yaml --out DIR` and `planner compare all INSTANCE_DIR`.

Both run on the sweep engine (`planner.sweep`): local process pool by default, ``--executor ray
[--address HOST:PORT]`` on a Ray cluster; every finished point is committed to
``DIR/results.sqlite`` at once and a re-run of the same command skips finished points.

--out DIR is checked before anything runs: a file, or a place that cannot be written, is refused;
so is a directory that already holds the command's result files (capacity: report.html,
points.csv, points.parquet, eq7.csv; compare all: compare.csv, summary.csv) unless ``--force``.
A killed or interrupted run has written no result file yet, so it resumes with the same command;
a finished one is regenerated (failed points retried) with ``--force``.  The results database is
always resumed, never overwritten (one of another sweep is refused, with or without ``--force``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer
from rich.table import Table

from planner.cli.common import (
    CommandGroups,
    JsonOption,
    SeedOption,
    SolverOption,
    check_output_dir,
    fmt,
    fmt_gap,
    out,
    to_json,
)
from planner.errors import PlannerError
from planner.sweep.engine import EXECUTORS

EXECUTOR_HELP = f"where points run: {', '.join(EXECUTORS)} (local = process pool sized to the machine)"


def capacity_cmd(
    scenario: Path = typer.Argument(..., help="capacity scenario YAML (see instances/capacity/)"),
    out_dir: Path = typer.Option(..., "--out", help="output directory: results.sqlite, report.html, points.csv/.parquet"),
    executor: str = typer.Option("local", help=EXECUTOR_HELP),
    address: str = typer.Option(None, help="Ray cluster address (HOST:PORT or ray://HOST:PORT) for --executor ray"),
    workers: int = typer.Option(None, help="parallel points (default: CPU count, or the Ray cluster's CPUs)"),
    progress: bool = typer.Option(True, help="progress bar on stderr"),
    json_out: JsonOption = False,
    force: bool = typer.Option(False, "--force", help="overwrite the report files of an earlier run in --out "
                               "(the results database is resumed either way)"),
) -> None:
    """Capacity plan: minimal GPUs per GPU type, TP degree and arrival rate, with bounds, Eq. 7 and $/h.

    Writes a self-contained HTML report and CSV/Parquet of every point into --out; re-running the same command resumes an interrupted sweep (finished points are not solved again). Report files of an earlier run are not overwritten without --force.

    --json: status (optimal / feasible / partial / failed), objective = the cheapest $/h at the highest rate, bound = the lowest $/h any swept configuration could reach there, and per point its solver, gap and validator verdict.
    """
    from planner.capacity.scenario import load_scenario

    spec = load_scenario(scenario)  # before the report and sweep imports (matplotlib, ~2 s): bad input fails fast
    from planner.capacity.report import (
        POINT_JSON_COLUMNS,
        answer_lines,
        check_report_files,
        json_summary,
        write_outputs,
    )
    from planner.capacity.run import run_capacity

    check_output_dir(out_dir)
    check_report_files(out_dir, force)
    result = run_capacity(spec, out_dir, executor=executor, workers=workers, address=address, progress=progress)
    paths = write_outputs(result, out_dir, force)
    if json_out:
        rows = result.points.reindex(columns=list(POINT_JSON_COLUMNS)).to_dict(orient="records")
        print(to_json({"scenario": str(scenario), "name": spec.name, **json_summary(result), "points": rows,
                       "eq7": result.fits.to_dict(orient="records"), "failures": result.failures,
                       "outputs": {k: str(v) for k, v in paths.items()}}))
    else:
        pts = result.points
        if not pts.empty:
            t = Table(title=f"Capacity: {spec.model.name}, best TP per GPU type ({spec.workload_label})",
                      title_justify="left")
            for col in ("GPU type", "req/s", "TP", "GPUs", "≥ GPUs", "$/h", "status", "best-fit gap"):
                t.add_column(col, justify="left" if col in ("GPU type", "status") else "right")
            for row in pts[pts.best_config].sort_values(["rate", "usd_per_hour"]).itertuples():
                t.add_row(row.gpu, fmt(row.rate), str(row.tensor_parallel), str(row.gpus), str(row.bound_gpus),
                          f"{row.usd_per_hour:,.2f}", row.status, fmt_gap(row.best_fit_gap))
            out.print(t)
            for line in answer_lines(result):
                out.print(line)
        out.print(f"sweep: {result.summary.line()}")
        out.print(f"report: {paths['report']}  points: {paths['csv']}, {paths['parquet']}")
    if result.failures:
        key, message = next(iter(result.failures.items()))
        raise PlannerError(f"{len(result.failures)} point(s) failed (first: {key}: {message}); "
                           "the others are saved: re-run the same command with --force to retry the failed ones")


def compare_all_cmd(
    instance_dir: Path = typer.Argument(..., help="directory searched recursively for instance YAML files"),
    out_dir: Path = typer.Option(None, "--out", help="directory for results.sqlite and compare.csv (resumable)"),
    solver: SolverOption = "highs",
    time_limit: float = typer.Option(60.0, help="time limit per exact solve (s)"),
    executor: str = typer.Option("local", help=EXECUTOR_HELP),
    address: str = typer.Option(None, help="Ray cluster address for --executor ray"),
    workers: int = typer.Option(None, help="parallel runs (default: CPU count)"),
    family: str = typer.Option(None, help="only this family (comma-separated list allowed)"),
    seed: SeedOption = 0,
    progress: bool = typer.Option(True, help="progress bar on stderr"),
    json_out: JsonOption = False,
    force: bool = typer.Option(False, "--force", help="overwrite compare.csv / summary.csv of an earlier run in --out "
                               "(the results database is resumed either way)"),
) -> None:
    """Every family's heuristics and exact solver over a directory of instances: one table and gap summary."""
    from planner.solver import check_solver_name
    from planner.sweep.compare_all import check_compare_files, compare_all, summarise

    check_solver_name(solver)
    if not (time_limit > 0) or time_limit == float("inf"):
        raise PlannerError(f"--time-limit must be a positive number, got {time_limit}")
    if out_dir is not None:
        check_output_dir(out_dir)
        check_compare_files(out_dir, force)
    families = None if family is None else tuple(f.strip() for f in family.split(",") if f.strip())
    with tempfile.TemporaryDirectory(prefix="planner-compare-") as scratch:
        target = out_dir if out_dir is not None else Path(scratch)
        table, summary = compare_all(instance_dir, target, solver=solver, time_limit=time_limit, executor=executor,
                                     address=address, workers=workers, families=families, seed=seed,
                                     progress=progress, force=force)
    gaps = summarise(table)
    if json_out:
        print(to_json({"instance_dir": str(instance_dir), "rows": table.to_dict(orient="records"),
                       "summary": gaps.to_dict(orient="records"), "failures": summary.failures}))
    else:
        t = Table(title=f"compare all: {instance_dir}", title_justify="left")
        for col in ("family", "instance", "method", "status", "objective", "bound", "gap", "gap to", "valid", "seconds"):
            t.add_column(col, justify="left" if col in ("family", "instance", "method", "status", "gap to", "valid")
                         else "right")
        for row in table.itertuples():
            valid = "-" if row.valid is None or row.valid != row.valid else ("yes" if row.valid else "NO")
            t.add_row(row.family, row.instance, row.method, row.status, fmt(row.objective), fmt(row.bound),
                      fmt_gap(None if row.gap != row.gap else row.gap), row.gap_reference, valid, f"{row.seconds:.2f}")
        out.print(t)
        s = Table(title="Heuristic gap to the exact solver's result (or its bound)", title_justify="left")
        for col in ("family", "method", "instances", "no plan", "mean gap", "worst gap", "worst instance"):
            s.add_column(col, justify="left" if col in ("family", "method", "worst instance") else "right")
        for row in gaps.itertuples():
            s.add_row(row.family, row.method, str(row.instances), str(row.no_plan), fmt_gap(row.mean_gap),
                      fmt_gap(row.worst_gap), row.worst_instance)
        out.print(s)
        out.print(f"sweep: {summary.line()}")
        if out_dir is not None:
            out.print(f"table: {out_dir / 'compare.csv'}  summary: {out_dir / 'summary.csv'}")
    if summary.failures:
        key, message = next(iter(summary.failures.items()))
        raise PlannerError(f"{len(summary.failures)} run(s) failed (first: {key}: {message}); "
                           "see the table; re-running the same command" + (" with --force" if out_dir is not None else "")
                           + " retries them")


def register(groups: CommandGroups) -> None:
    """`planner capacity` on the top-level app and `planner compare all`."""
    groups.app.command("capacity")(capacity_cmd)
    groups.compare.command("all")(compare_all_cmd)
