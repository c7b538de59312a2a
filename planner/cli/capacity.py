"""`planner capacity SCENARIO.yaml --out DIR` and `planner compare all INSTANCE_DIR`.

Both run on the sweep engine (`planner.sweep`): local process pool by default, ``--executor ray
[--address HOST:PORT]`` on a Ray cluster; every finished point is committed to
``DIR/results.sqlite`` at once and a re-run of the same command skips finished points.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer
from rich.table import Table

from planner.cli.common import CommandGroups, JsonOption, SeedOption, SolverOption, fmt, fmt_gap, out, to_json
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
) -> None:
    """Capacity plan: minimal GPUs per GPU type, TP degree and arrival rate, with bounds, Eq. 7 and $/h.

    Writes a self-contained HTML report and CSV/Parquet of every point into --out; re-running the same command resumes an interrupted sweep (finished points are not solved again).

    --json: status (optimal / feasible / partial / failed), objective = the cheapest $/h at the highest rate, bound = the lowest $/h any swept configuration could reach there, and per point its solver, gap and validator verdict.
    """
    from planner.capacity.report import POINT_JSON_COLUMNS, answer_lines, json_summary, write_outputs
    from planner.capacity.run import run_capacity
    from planner.capacity.scenario import load_scenario

    spec = load_scenario(scenario)
    if out_dir.exists() and not out_dir.is_dir():
        raise PlannerError(f"{out_dir}: --out must be a directory")
    result = run_capacity(spec, out_dir, executor=executor, workers=workers, address=address, progress=progress)
    paths = write_outputs(result, out_dir)
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
                           "the others are saved: re-run the same command to retry the failed ones")


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
) -> None:
    """Every family's heuristics and exact solver over a directory of instances: one table and gap summary."""
    from planner.solver import check_solver_name
    from planner.sweep.compare_all import compare_all, summarise

    check_solver_name(solver)
    if not (time_limit > 0) or time_limit == float("inf"):
        raise PlannerError(f"--time-limit must be a positive number, got {time_limit}")
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise PlannerError(f"{out_dir}: --out must be a directory")
    families = None if family is None else tuple(f.strip() for f in family.split(",") if f.strip())
    with tempfile.TemporaryDirectory(prefix="planner-compare-") as scratch:
        target = out_dir if out_dir is not None else Path(scratch)
        table, summary = compare_all(instance_dir, target, solver=solver, time_limit=time_limit, executor=executor,
                                     address=address, workers=workers, families=families, seed=seed,
                                     progress=progress)
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
                           "see the table; re-running the same command retries them")


def register(groups: CommandGroups) -> None:
    """`planner capacity` on the top-level app and `planner compare all`."""
    groups.app.command("capacity")(capacity_cmd)
    groups.compare.command("all")(compare_all_cmd)
