"""`planner capacity [SCENARIO.yaml | query flags] [--report DIR]` and `planner compare all INSTANCE_DIR`.

`planner capacity` takes its question from a scenario file or from flags alone (``--model``,
``--gpu``, ``--rate``, ``--ttft``, ``--tpot``, ``--price`` ...): the flags become the scenario
mapping a file would hold and go through the same validation (`planner.capacity.scenario`), so a
file and its flags give the same `Scenario`; an error names the flag.  Prices are required (the
report and the answer rank configurations by $/h and the catalog ships none): a GPU without
``--price`` is refused with one line.  On the terminal every row names its cost model's source
(measured end-to-end, kernel composition, derived), a footnote per configuration gives its file and
held-out error, and every GPU type or TP degree left out is named on stderr with the reason
("not planned: ...").  Without ``--report`` the sweep runs in a temporary directory and nothing is kept.

Both run on the sweep engine (`planner.sweep`): local process pool by default, ``--executor ray
[--address HOST:PORT]`` on a Ray cluster; every finished point is committed to
``DIR/results.sqlite`` at once and a re-run of the same command skips finished points.

--report DIR is checked before anything runs: a file, or a place that cannot be written, is refused; so is a directory that already holds the command's result files (capacity: report.html,
points.csv, points.parquet, eq7.csv, mixed.csv; compare all: compare.csv, summary.csv) unless ``--force``.
A killed or interrupted run has written no result file yet, so it resumes with the same command;
a finished one is regenerated (failed points retried) with ``--force``.  The results database is
always resumed, never overwritten (one of another sweep is refused, with or without ``--force``).

A scenario with ``models:`` (several models sharing the GPUs, `planner.capacity.multi`) writes each
model's results database and report files into ``DIR/<model slug>/`` (resumed and guarded as above)
and report.html and joint.csv (the joint fleet per joint point) at the top of DIR; ``--json`` holds
every model's object under ``models`` and the joint fleets under ``joint_fleets``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from planner.cli.common import (SOLVER_HELP, TPOT_HELP, CommandGroups, ParallelOption, ReportOption, check_output_dir, err,
                                fmt, fmt_gap, out, to_json, write_output)
from planner.cli.options import RunArgs, run_command, shared
from planner.errors import InputError, PlannerError
from planner.sweep.engine import EXECUTORS

QUERY = "Query (instead of a scenario file)"
EXECUTOR_HELP = f"where points run: {', '.join(EXECUTORS)} (local = process pool sized to the machine)"


def _query(flag: str, help: str) -> Any:  # noqa: A002 (typer's name)
    """A query flag of `planner capacity` (default None: not given), listed under `QUERY` in its --help."""
    return typer.Option(None, flag, help=help, rich_help_panel=QUERY)


@run_command
def capacity_cmd(
    scenario: Optional[Path] = typer.Argument(None, help="capacity scenario YAML (see instances/capacity/); "
                                              "or give the query as flags (--model, --gpu, --rate, --ttft, --tpot)"),
    model: Optional[str] = _query("--model", "catalog model name, e.g. Llama-2-70B"),
    gpu: Optional[list[str]] = _query("--gpu", "GPU type (catalog name, e.g. H100-80GB-SXM); repeat for several"),
    rate: Optional[list[float]] = _query("--rate", "arrival rate (req/s); repeat for several"),
    ttft: Optional[float] = _query("--ttft", "TTFT SLO (s)"),
    tpot: Optional[float] = _query("--tpot", TPOT_HELP),
    tp: Optional[list[int]] = _query("--tp", "TP degree; repeat for several (default: every degree "
                                             "with a cost model)"),
    price: Optional[list[str]] = _query("--price", "GPU=USD per GPU-hour, e.g. H100-80GB-SXM=3.0; "
                                                   "required per GPU (the catalog ships no prices)"),
    percentile: Optional[float] = _query("--percentile", "SLO percentile P in (0, 100): P-th "
                                                         "percentile TTFT and TPOT within the SLOs (default 99)"),
    attainment: Optional[float] = _query("--attainment", "instead of --percentile: fraction in "
                                                         "(0, 1] of requests meeting both SLOs"),
    isl: Optional[int] = _query("--isl", "fixed input length (tokens), with --osl"),
    osl: Optional[int] = _query("--osl", "fixed output length (tokens), with --isl"),
    workload: Optional[str] = _query("--workload", "length distribution: a shipped name "
                                                   "(default sharegpt) or a YAML path"),
    trace: Optional[str] = _query("--trace", "real trace file whose lengths make the workload"),
    trace_format: Optional[str] = _query("--trace-format", "format of --trace: azure (default), "
                                                           "mooncake or sharegpt"),
    trace_start: Optional[float] = _query("--trace-start", "use the trace's requests from this "
                                                           "many seconds after its first one"),
    trace_duration: Optional[float] = _query("--trace-duration", "use this many seconds of the trace's arrivals"),
    time_limit: Optional[float] = _query("--time-limit", "seconds per point's exact solve "
                                                         "(default: the scenario's solve.time_limit_s, 10)"),
    seed: Optional[int] = _query("--seed", "random seed (default 0)"),
    solver: Optional[str] = _query("--solver", f"{SOLVER_HELP}; default: the scenario's solve.solver, highs"),
    bucket: Optional[list[str]] = _query("--bucket", "size classes for the mixed fleet: "
                                                     "input=EDGES or output=EDGES (tokens, comma-separated, e.g. "
                                                     "input=1024 output=256 → 2 × 2 classes); repeat per axis"),
    cost_models: Optional[str] = _query("--models-dir", "directory holding aladdin/ cost models (default: models/)"),
    run: RunArgs = shared("out"),
    out_dir: ReportOption = None,
    executor: str = typer.Option("local", help=EXECUTOR_HELP),
    address: str = typer.Option(None, help="Ray cluster address (HOST:PORT or ray://HOST:PORT) for --executor ray"),
    workers: ParallelOption = None,
    progress: bool = typer.Option(True, help="progress bar on stderr"),
    _results: RunArgs = shared("json force"),
) -> None:
    """Capacity plan: minimal GPUs per GPU type, TP degree and arrival rate, with bounds, Eq. 7 and $/h.

    The question comes from a scenario YAML file or from the query flags alone, e.g. `planner capacity --model Llama-2-70B --gpu H100-80GB-SXM --rate 10 --ttft 1 --tpot 0.05 --price H100-80GB-SXM=3` (without --tp every TP degree with a cost model is tried). Every row names the cost model it is computed under. A GPU type or TP degree that cannot be planned is named on stderr with the reason.

    With --report DIR: results.sqlite (resumable), a self-contained HTML report and CSV/Parquet of every point; re-running the same command resumes an interrupted sweep (finished points are not solved again). Report files of an earlier run are not overwritten without --force (the results database is resumed either way). Without --report nothing is kept. --out FILE writes the JSON object --json prints.

    --time-limit and --seed are query flags: with a scenario file they come from its solve: section (time_limit_s default 10 s per point); so does --solver (the MILPs' solver, default highs); each point's solver runs on one thread (no --threads).

    --json: status (optimal / feasible / partial / failed), objective = the cheapest $/h at the highest rate, bound = the lowest $/h any swept configuration could reach there, and per point its solver, gap, validator verdict and cost model.

    Several models sharing the GPUs (YAML `models:`, see instances/capacity/two-models-shared-inventory.yaml): each model is swept as a single-model scenario (its own sub-directory of --report), then per joint point (the i-th rate of every model) one class MILP over every model within the shared `available:` inventory, each model's fleet simulated on its own stream, compared with each model planned alone (joint_fleets in --json, joint.csv and report.html with --report).

    Mixed fleets: at every rate, the cheapest mix of the swept configurations (request-class MILP on the measured per-worker rates, GPU inventory from the scenario's `available:`), checked by simulation, beside the best single configuration; with size classes (YAML `classes:` or --bucket input=1024 --bucket output=256) also the mix over the classes, simulated with class-aware routing (mixed_fleets / class_mixed_fleets in --json, mixed.csv with --report).
    """
    sweep = {"executor": executor, "workers": workers, "address": address, "progress": progress}
    flags = {"--model": model, "--gpu": gpu, "--rate": rate, "--ttft": ttft, "--tpot": tpot,
             "--tp": tp, "--price": price, "--percentile": percentile, "--attainment": attainment, "--isl": isl,
             "--osl": osl, "--workload": workload, "--trace": trace, "--trace-format": trace_format,
             "--trace-start": trace_start, "--trace-duration": trace_duration, "--time-limit": time_limit,
             "--seed": seed, "--solver": solver, "--models-dir": cost_models, "--bucket": bucket}
    # the scenario is read before the report and sweep imports (matplotlib, ~2 s): bad input fails fast
    spec = _read_question(scenario, flags)
    from planner.capacity.scenario import MultiScenario

    if isinstance(spec, MultiScenario):
        _capacity_multi(spec, out_dir, sweep, run)
    else:
        _capacity_single(spec, out_dir, sweep, run)


def _read_question(scenario: Optional[Path], flags: dict) -> Any:
    """The `Scenario` (or `MultiScenario`) of a scenario file, or of the query flags (``flags``: flag → value,
    None or [] when not given); one line when both or neither are given."""
    from planner.capacity.scenario import read_capacity_file

    given = [name for name, value in flags.items() if value not in (None, [])]
    if scenario is not None:
        if given:
            raise PlannerError(f"{given[0]}: give a scenario file or the query flags, not both "
                               f"(the file {scenario} already holds the question)")
        return read_capacity_file(scenario)
    if not given:
        raise PlannerError("give a scenario YAML file, or the query as flags: --model M --gpu G --rate R "
                           "--ttft S --tpot S --price G=USD (see 'planner capacity --help')")
    if flags["--trace-format"] is not None and flags["--trace"] is None:
        raise PlannerError("--trace-format: applies to --trace only")
    return _scenario_from_flags(flags)


def _scenario_from_flags(flags: dict) -> Any:
    """The query flags as the scenario mapping a file would hold, through the same validation."""
    from planner.capacity.scenario import flags_mapping, parse_buckets, parse_prices, scenario_from_flags

    gpus = list(flags["--gpu"] or [])
    return scenario_from_flags(flags_mapping(
        model=flags["--model"], gpus=gpus, rates=list(flags["--rate"] or []), ttft_s=flags["--ttft"],
        tpot_s=flags["--tpot"], atgt_s=None, tensor_parallel=list(flags["--tp"] or []) or None,
        prices=parse_prices(list(flags["--price"] or []), gpus), percentile=flags["--percentile"],
        attainment=flags["--attainment"], workload=flags["--workload"], isl=flags["--isl"], osl=flags["--osl"],
        trace=flags["--trace"], trace_format=flags["--trace-format"], trace_start_s=flags["--trace-start"],
        trace_duration_s=flags["--trace-duration"], time_limit_s=flags["--time-limit"], seed=flags["--seed"],
        solver=flags["--solver"], cost_models_dir=flags["--models-dir"],
        classes=parse_buckets(list(flags["--bucket"] or []))))


def _capacity_single(spec, out_dir: Optional[Path], sweep: dict, run: RunArgs) -> None:  # noqa: ANN001
    """`planner capacity` on a one-model scenario: the sweep, its JSON or tables, then the one line of failed points."""
    from planner.capacity.report import check_report_files, write_outputs

    if out_dir is not None:
        check_output_dir(out_dir, "--report")
        check_report_files(out_dir, run.force)
    with tempfile.TemporaryDirectory(prefix="planner-capacity-") as scratch:
        result = _sweep_single(spec, out_dir if out_dir is not None else Path(scratch), sweep)
        paths = write_outputs(result, out_dir, run.force) if out_dir is not None else {}
    sources = _cost_model_sources(spec, result.configurations)
    not_planned = _not_planned(result)
    _say_not_planned(result.failures, not_planned)
    text = to_json(_model_json(spec, result, sources, paths))
    write_output(run.output, text, run.force)
    if run.json_out:
        print(text)
    else:
        _show_single(spec, result, sources, paths)
    if result.failures:
        raise _failed_points(result.failures, out_dir, not_planned)


def _sweep_single(spec, target: Path, sweep: dict):  # noqa: ANN001, ANN202
    """`run_capacity` into ``target``; an input error of a flag-built scenario names the flag, not a YAML field."""
    from planner.capacity.run import run_capacity
    from planner.capacity.scenario import FLAGS_SOURCE, flag_of

    try:
        return run_capacity(spec, target, **sweep)
    except InputError as exc:  # e.g. no configuration can serve the model: name the flag, not a YAML field
        if exc.source != FLAGS_SOURCE:
            raise
        raise InputError(flag_of(exc.field) if exc.field else "flags", "", exc.problem) from None


def _say_not_planned(failures: dict, lines: list[str]) -> None:
    """``not planned: …`` on stderr per line; not with failures (their error line names them: stderr stays one line)."""
    if not failures:
        for line in lines:
            err.print(f"not planned: {line}")


def _failed_points(failures: dict, out_dir: Optional[Path], not_planned: Sequence[str] = ()) -> PlannerError:
    """The one line of a sweep with failed points: how many, the first, how to retry (and what was not planned)."""
    key, message = next(iter(failures.items()))
    return PlannerError(f"{len(failures)} point(s) failed (first: {key}: {message}); "
                        + ("the others are saved: re-run the same command with --force to retry the failed ones"
                           if out_dir is not None else "re-run with --report DIR to keep the finished points")
                        + "".join(f"; not planned: {line}" for line in not_planned))


def _show_model(spec, result, sources) -> None:  # noqa: ANN001
    """One model's points table, mixed-fleet table and answer lines."""
    from planner.capacity.report import answer_lines

    out.print(_points_table(spec, result.points, sources))
    mixed_table = _mixed_table(result)
    if mixed_table is not None:
        out.print(mixed_table)
    for line in answer_lines(result):
        out.print(line)


def _cost_model_line(label: str, degree: int, src) -> str:  # noqa: ANN001
    """``cost model <label> TP <g>: <file> — <kind>; <held-out error>[; lower-bound note][; caveats: …]``."""
    caveat = "; its file calls it a lower bound on end-to-end time" if "lower bound" in src.provenance.lower() else ""
    codes = src.caveat_codes()
    return (f"cost model {label} TP {degree}: {src.path} — {src.label}; {src.holdout_text()}{caveat}"
            + (f"; caveats: {', '.join(codes)}" if codes else ""))


def _show_single(spec, result, sources, paths) -> None:  # noqa: ANN001
    """The terminal output of a one-model sweep: tables, cost models, sweep summary, report files."""
    from planner.capacity.report import PARQUET_MISSING

    if not result.points.empty:
        _show_model(spec, result, sources)
        for (name, degree), src in sources.items():
            out.print(_cost_model_line(name, degree, src))
    out.print(f"sweep: {result.summary.line()}")
    if result.class_summary is not None:
        out.print(f"size-class capacities: {result.class_summary.line()}")
    if paths:
        out.print(f"report: {paths['report']}  points: {', '.join(str(paths[k]) for k in ('csv', 'parquet') if k in paths)}")
        if "parquet" not in paths:
            err.print(PARQUET_MISSING)
    else:
        out.print("report: not written (give --report DIR for report.html, points.csv/.parquet and a resumable sweep)")


def _capacity_multi(spec, out_dir: Optional[Path], sweep: dict, run: RunArgs) -> None:  # noqa: ANN001
    """`planner capacity` on a scenario with ``models:`` (`planner.capacity.multi`): each model's sweep (its own
    sub-directory of --report, resumable), its points table, then the joint mixed fleet per joint point."""
    from planner.capacity.multi import run_multi_capacity
    from planner.capacity.report import check_multi_report_files, write_multi_outputs

    if out_dir is not None:
        check_output_dir(out_dir, "--report")
        check_multi_report_files(spec, out_dir, run.force)
    with tempfile.TemporaryDirectory(prefix="planner-capacity-") as scratch:
        target = out_dir if out_dir is not None else Path(scratch)
        result = run_multi_capacity(spec, target, **sweep)
        paths = write_multi_outputs(result, out_dir, run.force) if out_dir is not None else {}
    sources = [_cost_model_sources(r.scenario, r.configurations) for r in result.results]
    _say_not_planned(result.failures, [f"{r.scenario.model.name}: {line}" for r in result.results
                                       for line in _not_planned(r)])
    if run.json_out or run.output is not None:
        text = to_json(_multi_json(spec, result, sources, paths))
        write_output(run.output, text, run.force)
    if run.json_out:
        print(text)
    else:
        _show_multi(result, sources, paths, out_dir)
    if result.failures:
        raise _failed_points(result.failures, out_dir)


def _multi_json(spec, result, sources, paths) -> dict:  # noqa: ANN001
    """The ``--json`` object of a several-model scenario: every model's object and the joint fleets."""
    from planner.capacity.multi import model_dir_name, multi_status

    models = []
    for r, src in zip(result.results, sources):
        sub = {k.split(":", 1)[1]: v for k, v in paths.items() if k.startswith(f"{r.scenario.model.name}:")}
        models.append({"model": r.scenario.model.name, "fingerprint": r.scenario.fingerprint(),
                       "directory": model_dir_name(r.scenario.model.name), **_model_json(r.scenario, r, src, sub)})
    last = next((j for j in reversed(result.joint) if j.models), None)
    return {
        "scenario": spec.source, "name": spec.name, "status": multi_status(result),
        "objective": None if last is None else last.usd_per_hour, "bound": None, "gap": None,
        "objective_name": "$/h of the joint fleet (every model) at the last joint point",
        "solve_seconds": round(sum(float(m["solve_seconds"]) for m in models), 4),
        "solver": "fleet-simulation+class-milp",
        "solution": None if last is None else last.to_dict(),
        "validation": {"feasible": bool(result.joint) and all(j.met for j in result.joint),
                       "objective": None if last is None else last.usd_per_hour,
                       "violations": [{**v, "where": f"point {j.index + 1}, {s.model}: {v['where']}"}
                                      for j in result.joint for s in j.models
                                      for v in s.check.get("violations", [])]},
        "models": models, "joint_fleets": [j.to_dict() for j in result.joint], "failures": result.failures,
        "outputs": {k: str(v) for k, v in paths.items()}}


def _show_multi(result, sources, paths, out_dir: Optional[Path]) -> None:  # noqa: ANN001
    """The terminal output of a several-model scenario: each model's tables and cost models, the joint fleets,
    the report files."""
    from planner.capacity.multi import model_dir_name

    for r, src in zip(result.results, sources):
        if not r.points.empty:
            _show_model(r.scenario, r, src)
        for (name, degree), s in src.items():
            out.print(_cost_model_line(f"{r.scenario.model.name} on {name}", degree, s))
        out.print(f"sweep {r.scenario.model.name}: {r.summary.line()}")
    if result.joint:
        out.print(_joint_table(result))
        for j in result.joint:
            out.print(j.line())
    if paths:
        out.print(f"report: {paths['report']}  joint fleets: {paths['joint']}  per model: "
                  + ", ".join(f"{out_dir / model_dir_name(r.scenario.model.name)}/" for r in result.results))
    else:
        out.print("report: not written (give --report DIR for report.html, joint.csv, each model's points and a "
                  "resumable sweep)")


def _joint_table(result) -> Table:
    """Per joint point and model: the checked fleet, $/h, verdict, planned alone; then the totals."""
    inv = [f"{g.spec.name} ≤ {g.available}" for g in result.scenario.gpus if g.available is not None]
    t = Table(title="Joint mixed fleet per point (one class MILP over every model, shared GPUs"
                    + (f": {', '.join(inv)}" if inv else ", no inventory limit")
                    + "; each model's sub-fleet simulated on its own stream; 'meets' = its simulation meets its "
                    "criterion; 'alone' = the model planned alone with the whole inventory; each model under its "
                    "cost models above)", title_justify="left")
    for col in ("point", "model", "req/s", "fleet", "$/h", "meets", "best single", "$/h ", "alone", "$/h  "):
        t.add_column(col, justify="right" if col.startswith(("$", "req", "point", "meets")) else "left")

    def usd(value) -> str:
        return "-" if value is None or value != value else f"{value:,.2f}"

    for j in result.joint:
        if not j.models:
            t.add_row(str(j.index + 1), "all", "-", j.note, "-", "NO", "-", "-", "-", "-")
            continue
        for s in j.models:
            t.add_row(str(j.index + 1), s.model, fmt(s.rate), s.fleet(), usd(s.usd_per_hour), "yes" if s.met else "NO",
                      s.best_single, usd(s.best_single_usd_per_hour), s.alone, usd(s.alone_usd_per_hour))
        over = "" if j.alone_fit else " (overdraws the inventory)"
        singles = "" if j.best_singles_fit else " (overdraws)"
        t.add_row(str(j.index + 1), "total", "", " + ".join(f"{n} × {g}" for g, n in j.gpus.items() if n),
                  usd(j.usd_per_hour), "yes" if j.met else "NO", f"sum{singles}", usd(j.best_singles_usd_per_hour),
                  f"sum{over}", usd(j.alone_usd_per_hour), end_section=True)
    return t


def _model_json(spec, result, sources, paths) -> dict:
    """The ``--json`` object of one model's sweep (the whole output of a single-model scenario)."""
    from planner.capacity.report import POINT_JSON_COLUMNS, json_summary

    rows = result.points.reindex(columns=list(POINT_JSON_COLUMNS)).to_dict(orient="records")
    for row in rows:
        src = sources.get((row["gpu"], row["tensor_parallel"]))
        row["cost_model"] = None if src is None else src.label
        row["cost_model_path"] = None if src is None else src.path
    return {"scenario": spec.source, "name": spec.name, **json_summary(result), "points": rows,
            "criterion": {"percentile": spec.percentile, "attainment": spec.attainment,
                          "text": spec.criterion_label},
            "cost_models": [{**src.model_dump(mode="json"), "holdout": src.holdout_text()}
                            for src in sources.values()],
            "not_planned": [{"gpu": e.gpu, "tensor_parallel": e.tensor_parallel, "reason": e.reason}
                            for e in result.excluded],
            "mixed_fleet": None if result.mixed is None else result.mixed.to_dict(),
            "mixed_fleets": [m.to_dict() for m in result.mixed_by_rate],
            "class_mixed_fleets": [m.to_dict() for m in result.classes_by_rate],
            "eq7": result.fits.to_dict(orient="records"), "failures": result.failures,
            "outputs": {k: str(v) for k, v in paths.items()}}


def _points_table(spec, pts, sources) -> Table:
    """Every point of one model's sweep: simulated answer, certified bound, percentiles, $/h, cost model."""
    pct = "attainment" if spec.attainment is not None else f"P{spec.percentile:g}"
    t = Table(title=f"Capacity: {spec.model.name} ({spec.workload_label}), {spec.criterion_label}; GPUs = "
                    f"simulated answer ({spec.scheduler} engine, {spec.router} router), ≥ GPUs = certified "
                    "bound for any policy; each row under its cost model (* = best TP of its GPU type)",
              title_justify="left")
    for col in ("GPU type", "TP", "req/s", "GPUs", "≥ GPUs", "gap", f"{pct} TTFT", f"{pct} TPOT",
                "snapshot GPUs", "$/h", "status", "cost model"):
        t.add_column(col, justify="left" if col in ("GPU type", "status", "cost model") else "right")
    for row in pts.sort_values(["rate", "usd_per_hour", "gpu", "tensor_parallel"]).itertuples():
        src = sources.get((row.gpu, row.tensor_parallel))
        snap = "-" if row.snapshot_gpus is None or row.snapshot_gpus != row.snapshot_gpus else str(int(row.snapshot_gpus))
        t.add_row(row.gpu, f"{row.tensor_parallel}{'*' if row.best_config else ''}", fmt(row.rate),
                  str(row.gpus), str(row.bound_gpus), fmt_gap(row.gap), f"{row.p_ttft_s:.3g} s",
                  f"{1000 * row.p_tpot_s:.3g} ms", snap, f"{row.usd_per_hour:,.2f}", row.status,
                  "none found" if src is None else src.label)
    return t


def _mixed_table(result) -> Table | None:
    """Per rate: the best single configuration, the one-class mixed fleet and (with size classes) the
    mixed fleet over the classes, each $/h and whether its simulation meets the criterion."""
    one = {m.rate: m for m in result.mixed_by_rate}
    many = {m.rate: m for m in result.classes_by_rate}
    if not one and not many:
        return None
    t = Table(title="Mixed fleets per rate ($/h of the simulated fleet; 'meets' = its simulation meets the criterion; "
                    "the same cost models as above)", title_justify="left")
    cols = ["req/s", "best single", "$/h", "one-class mix", "$/h ", "meets"]
    kind = next(iter(many.values())).kind if many else ""
    if many:
        cols += [f"mix over {kind}", "$/h  ", "meets "]
    for col in cols:
        t.add_column(col, justify="right" if col.startswith(("$", "req", "meets")) else "left")

    def fleet(m) -> str:
        return " + ".join(f"{n} × {name}" for name, n in m.counts.items() if n) or (m.note or "-")

    def usd(value) -> str:
        return "-" if value is None or value != value else f"{value:,.2f}"

    for rate in sorted(set(one) | set(many)):
        ref = one.get(rate) or many.get(rate)
        row = [fmt(rate), ref.best_single, usd(ref.best_single_usd_per_hour)]
        m = one.get(rate)
        row += [fleet(m), usd(m.usd_per_hour), "yes" if m.met else "NO"] if m else ["-", "-", "-"]
        if many:
            m = many.get(rate)
            row += [fleet(m), usd(m.usd_per_hour), "yes" if m.met else "NO"] if m else ["-", "-", "-"]
        t.add_row(*row)
    return t


def _cost_model_sources(spec, configurations) -> dict:
    """(GPU, TP) → `CostModelSource` of every configuration swept, in sweep order."""
    found = {}
    for conf in configurations:
        key = (conf.gpu, conf.tensor_parallel)
        if key not in found:
            src = spec.cost_model_source(*key)
            if src is not None:
                found[key] = src
    return found


def _not_planned(result) -> list[str]:
    """One line per GPU type that cannot be planned at all, and per TP degree left out, with the reason."""
    planned = {c.gpu for c in result.configurations}
    lines = []
    by_gpu: dict[str, list] = {}
    for e in result.excluded:
        by_gpu.setdefault(e.gpu, []).append(e)
    for name, items in by_gpu.items():
        reasons = "; ".join(f"TP {e.tensor_parallel}: {e.reason}" for e in items)
        if name in planned:
            lines.append(f"{name} {reasons}")
        else:
            lines.append(f"{name} (no TP degree can serve it): {reasons}")
    return lines


def _check_finite_time_limit(run: RunArgs) -> None:
    """`compare all` splits its runs over an executor: --time-limit must be a finite positive number."""
    if not (run.time_limit > 0) or run.time_limit == float("inf"):
        raise PlannerError(f"--time-limit must be a positive number, got {run.time_limit}")


@run_command(check=_check_finite_time_limit)
def compare_all_cmd(
    instance_dir: Path = typer.Argument(..., help="directory searched recursively for instance YAML files"),
    out_dir: ReportOption = None,
    run: RunArgs = shared("out solver time_limit threads"),
    executor: str = typer.Option("local", help=EXECUTOR_HELP),
    address: str = typer.Option(None, help="Ray cluster address for --executor ray"),
    workers: ParallelOption = None,
    family: str = typer.Option(None, help="only this family (comma-separated list allowed)"),
    _seed: RunArgs = shared("seed"),
    progress: bool = typer.Option(True, help="progress bar on stderr"),
    _results: RunArgs = shared("json force"),
) -> None:
    """Every family's heuristics and exact solver over a directory of instances: one table and gap summary.

    Each (instance, method) runs as in `planner compare FAMILY` (the whole --time-limit each; runs go in parallel,
    so each has one solver thread unless --threads)
    and gets the same gap (`planner.compare`): to the exact optimum, else to its bound, else to the best plan.
    With --report DIR: results.sqlite (resumable), compare.csv and summary.csv; the CSV files of an earlier run
    are not overwritten without --force (the results database is resumed either way)."""
    from planner.compare import GAP_DEFINITION
    from planner.sweep.compare_all import check_compare_files, compare_all, summarise

    if out_dir is not None:
        check_output_dir(out_dir, "--report")
        check_compare_files(out_dir, run.force)
    families = None if family is None else tuple(f.strip() for f in family.split(",") if f.strip())
    with tempfile.TemporaryDirectory(prefix="planner-compare-") as scratch:
        target = out_dir if out_dir is not None else Path(scratch)
        table, summary = compare_all(instance_dir, target, solver=run.solver, time_limit=run.time_limit,
                                     executor=executor, address=address, workers=workers, families=families,
                                     seed=run.seed, threads=run.threads or 1, progress=progress, force=run.force)
    gaps = summarise(table)
    caveats = _instance_caveats(instance_dir, table)
    text = to_json({"instance_dir": str(instance_dir), "gap_definition": GAP_DEFINITION,
                    "rows": table.to_dict(orient="records"), "summary": gaps.to_dict(orient="records"),
                    "failures": summary.failures, "cost_model_caveats": caveats})
    write_output(run.output, text, run.force)
    if run.json_out:
        print(text)
    else:
        _show_compare_all(instance_dir, out_dir, table, gaps, caveats, summary)
    if summary.failures:
        key, message = next(iter(summary.failures.items()))
        raise PlannerError(f"{len(summary.failures)} run(s) failed (first: {key}: {message}); "
                           "see the table; re-running the same command" + (" with --force" if out_dir is not None else "")
                           + " retries them")


def _show_compare_all(instance_dir: Path, out_dir: Optional[Path], table, gaps, caveats, summary) -> None:  # noqa: ANN001
    """The terminal output of `compare all`: every run, the gap summary, the cost models' caveats, the files."""
    t = Table(title=f"compare all: {instance_dir}", title_justify="left")
    for col in ("family", "instance", "method", "status", "objective", "bound", "gap", "gap to", "valid", "seconds"):
        t.add_column(col, justify="left" if col in ("family", "instance", "method", "status", "gap to", "valid")
                     else "right")
    for row in table.itertuples():
        valid = "-" if row.valid is None or row.valid != row.valid else ("yes" if row.valid else "NO")
        t.add_row(row.family, row.instance, row.method, row.status, fmt(row.objective), fmt(row.bound),
                  fmt_gap(None if row.gap != row.gap else row.gap), row.gap_reference, valid, f"{row.seconds:.2f}")
    out.print(t)
    s = Table(title="Heuristic gap per instance to the exact solver's proven optimum, else its bound (an upper "
                    "estimate), else the best plan", title_justify="left")
    for col in ("family", "method", "instances", "no plan", "mean gap", "worst gap", "worst instance"):
        s.add_column(col, justify="left" if col in ("family", "method", "worst instance") else "right")
    for row in gaps.itertuples():
        s.add_row(row.family, row.method, str(row.instances), str(row.no_plan), fmt_gap(row.mean_gap),
                  fmt_gap(row.worst_gap), row.worst_instance)
    out.print(s)
    for instance, lines in caveats.items():
        codes = sorted({line.split(": ")[1] for line in lines})  # "<model / GPU / TP>: code: detail"
        if codes:
            out.print(f"cost-model caveats of {instance}: {', '.join(codes)}")
    out.print(f"sweep: {summary.line()}")
    if out_dir is not None:
        out.print(f"table: {out_dir / 'compare.csv'}  summary: {out_dir / 'summary.csv'}")


def _instance_caveats(instance_dir: Path, table) -> dict[str, list[str]]:  # noqa: ANN001
    """instance (as in the table) → the caveats of the cost models it was solved under (`instance_cost_model_caveats`)."""
    from planner.cli.common import instance_cost_model_caveats  # noqa: PLC0415

    found: dict[str, list[str]] = {}
    for fam, inst in table[["family", "instance"]].drop_duplicates().itertuples(index=False):
        try:
            found[inst] = instance_cost_model_caveats(fam, instance_dir / inst)
        except PlannerError:  # an instance that cannot be read failed its rows already (see "failures")
            continue
    return found


def register(groups: CommandGroups) -> None:
    """`planner capacity` on the top-level app and `planner compare all`."""
    groups.app.command("capacity")(capacity_cmd)
    groups.compare.command("all")(compare_all_cmd)
