"""CLI of the placement family: solve, compare, generate, plan worker-config."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from planner.cli.common import (TPOT_HELP, AladdinFileOption, GPUOption, KVHeadroomOption, ModelOption, ModeOption,
                                StrictnessOption, TPOTOption, TTFTOption, WorkerTPOption, add_verdict_rows, check_out,
                                cost_model_caveats, fmt, fmt_gap, out, print_cost_caveats, run_progress, summary_table)
from planner.cli.options import RESULT, RUN, RunArgs, run_command, shared
from planner.errors import PlannerError

if TYPE_CHECKING:
    from planner.core.result import Result
    from planner.core.types import SLOSet
    from planner.placement.problem import PlacementOptions



def _summary_table(result: Result, title: str) -> Table:
    t = summary_table(title)
    sol = result.solution
    t.add_row("status", result.status.value)
    t.add_row("workers", fmt(result.objective))
    if sol is not None:
        t.add_row("GPUs", f"{sol.gpus_used} ({sol.gpus_per_worker} per worker)")
    t.add_row("lower bound", f"{fmt(result.bound)}  ({result.bound_source})" if result.bound is not None else "-")
    t.add_row("gap", fmt_gap(result.gap))
    t.add_row("solver", result.solver)
    t.add_row("time", f"{result.solve_seconds:.2f} s (model build {result.build_seconds:.2f} s)")
    if result.stats:
        s = result.stats
        if "variables" in s:
            t.add_row("model", f"{s['variables']} variables ({s['integer_variables']} integer), "
                               f"{s['constraints']} rows, {s['nonzeros']} nonzeros")
        if s.get("warm_start"):
            t.add_row("warm start", f"{s['warm_start']} (accepted: {s.get('warm_start_accepted')})")
    add_verdict_rows(t, result)
    return t


def _worker_table(result: Result, limit: int = 20) -> Table | None:
    if result.validation is None or not result.validation.details.get("per_worker"):
        return None
    rows = result.validation.details["per_worker"]
    t = Table(title=f"Workers (independent validator; first {min(limit, len(rows))} of {len(rows)})", title_justify="left")
    for col in ("worker", "requests", "new", "decode iter (s)", "ATGT SLO (s)", "prefill (s)", "KV peak"):
        t.add_column(col, justify="right")
    for r in rows[:limit]:
        t.add_row(
            str(r["worker"]), str(r["requests"]), str(r["new"]), f"{r['decode_iteration_s']:.4f}",
            f"{r['atgt_slo_s']:.4f}", "-" if r["prefill_s"] is None else f"{r['prefill_s']:.3f}",
            f"{100 * r['kv_peak_fraction']:.1f}%",
        )
    return t


@run_command
def solve_placement_cmd(
    instance: Path = typer.Argument(..., help="placement scenario YAML"),
    run: RunArgs = shared(RUN, RESULT, "verbose"),
) -> None:
    """Solve the Aladdin placement MIP of one heartbeat to proven optimality."""
    from planner.placement.instance import load_placement_instance
    from planner.placement.pipeline import PlacementKnobs, solve_placement

    run = run.start_clock()  # --time-limit covers reading the instance, not the imports above
    problem = load_placement_instance(instance)
    with run_progress(verbose=run.verbose, unit=" workers") as progress:
        result = solve_placement(
            problem, run.options,
            PlacementKnobs(verbose=run.verbose, progress=progress, phase=progress.phase, started=run.started),
        )

    def show() -> None:
        out.print(_summary_table(result, f"Placement: {problem.name}"))
        table = _worker_table(result)
        if table is not None:
            out.print(table)

    run.emit_result(instance, problem.name, result, show, cost_models=[problem.cost],
                    caveats=cost_model_caveats(problem.cost))


@run_command
def compare_placement_cmd(
    instance: Path = typer.Argument(..., help="placement scenario YAML"),
    run: RunArgs = shared(RUN, RESULT),
) -> None:
    """Every heuristic and the MIP, each with the whole --time-limit: workers, GPUs, lower bound, gap, time.

    The gap is `planner.compare`'s: to the MIP optimum, else to its bound, else to the best plan."""
    from planner.cli.comparing import CompareView, run_comparison, show_comparison
    from planner.placement.harness import HARNESS
    from planner.placement.instance import load_placement_instance

    problem = load_placement_instance(instance)
    comparison = run_comparison(problem, HARNESS, run.options, " workers")

    def gpus(row):  # noqa: ANN001, ANN202
        sol = row.result.solution if row.result is not None else None
        return None if sol is None else sol.gpus_used

    view = CompareView(
        title=f"Placement heuristics vs MIP: {problem.name}", unit=" workers",
        columns=[("workers", lambda r: fmt(r.objective)), ("GPUs", lambda r: fmt(gpus(r))),
                 ("lower bound", lambda r: fmt(r.bound))],
        extras=lambda r: {"gpus": gpus(r), "bound_source": r.result.bound_source if r.result is not None else ""},
        cost_models=[problem.cost], caveats=cost_model_caveats(problem.cost))
    show_comparison(instance, problem.name, comparison, view, run)


@run_command
def generate_placement_cmd(
    output: Path = typer.Argument(..., help="scenario YAML to write (a CSV with the same stem is written beside it)"),
    workload: str = typer.Option("sharegpt", help="length distribution name (models/workloads/) or YAML path"),
    model: ModelOption = "Llama-2-70B",
    gpu: GPUOption = "A100-80GB-SXM",
    tensor_parallel: WorkerTPOption = 2,
    cost_model: AladdinFileOption = None,
    requests: int = typer.Option(40, help="new requests in the heartbeat"),
    ongoing: int = typer.Option(0, help="ongoing requests already decoding"),
    ttft: TTFTOption = 1.6,
    atgt: TPOTOption = 0.075,
    mode: ModeOption = "colocated",
    strictness: StrictnessOption = 0.5,
    kv_headroom: KVHeadroomOption = 1.0,
    run: RunArgs = shared("seed"),
    name: str = typer.Option(None, help="instance name (default: file stem)"),
    _force: RunArgs = shared("force"),
) -> None:
    """Generate a placement instance from a real trace's length distribution."""
    from planner.core.types import WorkerConfig
    from planner.placement.generator import generate_placement_problem
    from planner.placement.instance import save_placement_instance
    from planner.workloads.streams import find_distribution

    if requests < 0 or ongoing < 0 or requests + ongoing == 0:
        raise PlannerError("--requests and --ongoing must be ≥ 0 and not both 0")
    for option, value in (("--requests", requests), ("--ongoing", ongoing)):
        if value > MAX_GENERATED_REQUESTS:
            raise PlannerError(f"{option} must be at most {MAX_GENERATED_REQUESTS:,}, got {value}")
    check_mode(mode)
    llm, gpu_spec, cost_model, cost = resolve_serving(model, gpu, tensor_parallel, cost_model)
    for path in (output, output.with_suffix(".csv")):
        check_output_file(path)
        if path.exists() and not run.force:
            raise PlannerError(f"{path}: already exists; pass --force to overwrite it")
        check_out(path, run.force, "OUTPUT")
    dist = find_distribution(workload)
    problem = generate_placement_problem(
        name=name or output.stem, dist=dist, model=llm,
        worker=WorkerConfig(gpu=gpu_spec, tensor_parallel=tensor_parallel), cost=cost,
        slos=make_slos(ttft, atgt, cost),
        options=make_options(mode, strictness, kv_headroom),
        new_requests=requests, ongoing_requests=ongoing, seed=run.seed,
    )
    description = (f"generated by `planner generate placement`: {requests} new + {len(problem.ongoing)} ongoing requests, "
                   f"lengths from '{dist.name}' ({dist.source.split(',')[0]}), seed {run.seed}")
    yml, csv = save_placement_instance(problem, output, cost_model_path=cost_model, description=description)
    out.print(f"wrote {yml} and {csv}")
    print_cost_caveats(cost)


@run_command
def worker_config_cmd(
    model: str = typer.Option(..., help="model name from the catalog (e.g. Llama-2-70B)"),
    gpu: str = typer.Option(..., help="GPU type from the catalog (e.g. A100-80GB-SXM)"),
    atgt: float = typer.Option(None, "--tpot", help=TPOT_HELP + "; default: the Aladdin paper's Table 2 value when known"),
    workload: str = typer.Option("sharegpt", help="length distribution giving mean input/output lengths"),
    degrees: list[int] = typer.Option([1, 2, 4, 8], "--tp", help="tensor-parallel degree to evaluate; repeat for several"),
    memory_utilization: float = typer.Option(1.0, help="fraction of GPU memory usable (vLLM gpu_memory_utilization)"),
    price: float = typer.Option(None, help="GPU price per hour, for $/million tokens"),
    models_dir: Path = typer.Option(None, help="directory of cost-model files (default: ./models)"),
    run: RunArgs = shared(RESULT),
) -> None:
    """Best GPUs per worker (Eq. 5–6): per-GPU decode throughput under KV and ATGT limits."""
    from planner.placement.worker_config import worker_configurations
    from planner.workloads.streams import find_distribution

    llm, gpu_spec = resolve_model_gpu(model, gpu)
    if price is not None:
        gpu_spec = gpu_spec.model_copy(update={"price_per_hour": price})
    if not 0 < memory_utilization <= 1:
        raise PlannerError(f"--memory-utilization must be in (0, 1], got {memory_utilization}")
    degree_list = tuple(sorted(set(degrees)))
    if any(d < 1 for d in degree_list):
        raise PlannerError(f"--tp must be at least 1, got {min(degree_list)}")
    if atgt is None:
        atgt = ALADDIN_ATGT_SLO.get(llm.name)
        if atgt is None:
            raise PlannerError(f"no default TPOT SLO for {llm.name}; pass --tpot")
    if atgt <= 0:
        raise PlannerError(f"--tpot must be positive, got {atgt}")
    dist = find_distribution(workload)
    report = worker_configurations(
        llm, gpu_spec, atgt_s=atgt, mean_input=dist.mean_input, mean_output=dist.mean_output,
        degrees=degree_list, memory_utilization=memory_utilization,
        models_dir=str(models_dir) if models_dir else None,
    )

    def show() -> None:
        t = Table(title=f"Worker configuration: {llm.name} on {gpu_spec.name}, TPOT ≤ {atgt:g} s, "
                        f"mean in/out {dist.mean_input:.0f}/{dist.mean_output:.0f} tokens ({dist.name})", title_justify="left")
        for col in ("GPUs/worker", "KV cache (GB)", "batch (KV)", "batch (SLO)", "bottleneck", "tokens/s/GPU", "$/M tokens", "note"):
            t.add_column(col, justify="right" if col not in ("bottleneck", "note") else "left")
        best = report.best
        for o in report.options:
            mark = " *" if best is not None and o.tensor_parallel == best.tensor_parallel else ""
            t.add_row(
                f"{o.tensor_parallel}{mark}", f"{o.kv_capacity_gb:.1f}", fmt(o.batch_kv, 4) if o.batch_kv else "-",
                fmt(o.batch_slo, 4) if o.batch_slo else "-", o.bottleneck or "-",
                f"{o.tokens_per_s_per_gpu:.1f}" if o.feasible else "-",
                "-" if o.usd_per_million_tokens is None else f"{o.usd_per_million_tokens:.3f}",
                o.reason or ", ".join(filter(None, [o.cost_source, *o.cost_caveats])),
            )
        out.print(t)
        out.print(f"best: {best.tensor_parallel} GPU(s) per worker" if best else "no feasible configuration")

    run.emit(report.to_dict(), show=show)


def make_options(mode: str, strictness: float, kv_headroom: float) -> PlacementOptions:
    from planner.placement.problem import PlacementOptions

    check_mode(mode)
    if not 0.0 <= strictness <= 1.0:
        raise PlannerError(f"--strictness (λ) must be in [0, 1], got {strictness}")
    if not 0.0 < kv_headroom <= 1.0:
        raise PlannerError(f"--kv-headroom (θ) must be in (0, 1], got {kv_headroom}")
    return PlacementOptions(mode=mode, strictness=strictness, kv_headroom=kv_headroom)  # type: ignore[arg-type]


def make_slos(ttft: float, atgt: float, cost=None) -> SLOSet:
    """The one-class SLO set of --ttft / --tpot (the Aladdin paper's ATGT); with ``cost``, --tpot must clear the un-batched decode time."""
    from planner.core.types import SLOClass, SLOSet

    check_positive("--ttft", ttft)
    check_positive("--tpot", atgt)
    if cost is not None:
        check_atgt(atgt, cost)
    return SLOSet(classes={"default": SLOClass(ttft_s=ttft, atgt_s=atgt)})


def check_positive(option: str, value: float) -> None:
    """One line unless ``value`` is a positive finite number (NaN-safe)."""
    if not (value > 0 and math.isfinite(value)):
        raise PlannerError(f"{option} must be a positive number, got {value}")


def check_atgt(atgt: float, cost) -> None:
    """The placement problem's own check, as one line naming --tpot."""
    floor = cost.decode_base_s + cost.decode_s_per_request
    if atgt <= floor:
        raise PlannerError(f"--tpot: {atgt} s is not above the un-batched decode iteration time {floor:.4f} s "
                           "of the cost model; no batch can meet it")


def check_output_file(path: Path) -> None:
    if path.is_dir():
        raise PlannerError(f"{path}: is a directory, expected a file name")


def check_mode(mode: str) -> None:
    if mode not in ("colocated", "decode_only"):
        raise PlannerError(f"--mode must be colocated or decode_only, got {mode!r}")


def resolve_worker(model: str, gpu: str, tensor_parallel: int):
    """(LLMSpec, GPUSpec) of `resolve_model_gpu`, and one line unless --tp is at least 1."""
    llm, gpu_spec = resolve_model_gpu(model, gpu)
    if tensor_parallel < 1:
        raise PlannerError(f"--tp must be at least 1, got {tensor_parallel}")
    return llm, gpu_spec


def resolve_model_gpu(model: str, gpu: str):
    """Catalog look-ups for the CLI; unknown names are one-line errors listing the catalog."""
    from planner.catalog import find_gpu, find_model, gpu_alias_problem, gpu_names, model_names

    llm = find_model(model)
    if llm is None:
        raise PlannerError(f"unknown model {model!r} (catalog: {', '.join(model_names())})")
    gpu_spec = find_gpu(gpu, aliases=False)
    if gpu_spec is None and gpu_alias_problem(gpu):  # an alias names a family of SKUs: refused, never rewritten
        raise PlannerError(f"--gpu: {gpu_alias_problem(gpu)}")
    if gpu_spec is None:
        raise PlannerError(f"unknown GPU type {gpu!r} (catalog: {', '.join(gpu_names())})")
    return llm, gpu_spec


def resolve_serving(model: str, gpu: str, tensor_parallel: int, cost_model: Path | None):
    """(LLMSpec, GPUSpec, cost-model path, AladdinCostModel) from CLI names; one-line errors."""
    from planner.costmodels.files import cost_model_filename, default_models_dir, load_cost_model
    from planner.costmodels.models import AladdinCostModel

    llm, gpu_spec = resolve_worker(model, gpu, tensor_parallel)
    if cost_model is None:
        cost_model = default_models_dir() / cost_model_filename("aladdin", llm.name, gpu_spec.name, tensor_parallel)
        if not cost_model.exists():
            raise PlannerError(
                f"no Aladdin cost model for {llm.name} on {gpu_spec.name} with TP {tensor_parallel} ({cost_model}); "
                "fit one with `planner fit` or pass --cost-model"
            )
    cost = load_cost_model(cost_model)
    if not isinstance(cost, AladdinCostModel):
        raise PlannerError(f"{cost_model}: not an aladdin cost model")
    if cost.tensor_parallel != tensor_parallel:
        raise PlannerError(f"{cost_model}: fitted for TP {cost.tensor_parallel}, not {tensor_parallel}")
    return llm, gpu_spec, cost_model, cost


#: Largest --requests / --ongoing of `planner generate placement` (larger ones exhaust memory).
MAX_GENERATED_REQUESTS = 1_000_000

# Aladdin Table 2 decode SLOs on A100 [P] (docs/papers.md, docs/placement.md).
ALADDIN_ATGT_SLO = {"Llama-2-70B": 0.075, "Llama-2-13B": 0.030, "Llama-2-7B": 0.015}
