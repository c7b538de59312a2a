"""`planner simulate fleet`: a fleet of identical workers behind a router, on a trace or a Poisson stream."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from planner.cli.common import (GPUOption, ModelOption, TPOTOption, TraceFormatOption, TTFTOption, WorkerTPOption, fmt,
                                out, run_progress)
from planner.cli.options import RESULT, RunArgs, run_command, shared
from planner.cli.placement import check_positive, resolve_serving
from planner.errors import PlannerError

#: ``planner.fleet.ROUTERS`` and ``planner.workloads.lengths.TRACE_FORMATS`` (the CLI does not import them)
ROUTERS = ("round_robin", "jsq", "least_kv", "aladdin")
TRACE_FORMATS = ("azure", "mooncake")
#: Most requests one run simulates (rate × duration for a Poisson stream).
MAX_REQUESTS = 2_000_000
MAX_WORKERS = 100_000


@run_command
def simulate_fleet_cmd(
    model: ModelOption = "Llama-2-70B",
    gpu: GPUOption = "H100-80GB-SXM",
    tensor_parallel: WorkerTPOption = 2,
    cost_model: Path = typer.Option(
        None, help="Aladdin or batch-time cost-model file (default: models/aladdin/<model>__<gpu>__tp<g>.yaml; "
                   "a batch-time file, models/batchtime/*.yaml, adds its Σc², Σc·k, per-prompt, floor and "
                   "all-reduce terms to every batch)"),
    workers: int = typer.Option(1, "--workers", help="number of workers N"),
    router: str = typer.Option("jsq", help=f"router: {', '.join(ROUTERS)}"),
    scheduler: str = typer.Option("vllm", "--method", help="per-worker scheduler preset (planner simulate batching's presets; vllm runs the two batch kinds the Aladdin cost model was fitted on)"),
    rate: float = typer.Option(None, help="Poisson arrivals at this rate (req/s); or --trace"),
    duration: float = typer.Option(600.0, help="seconds of Poisson arrivals"),
    workload: str = typer.Option("sharegpt", help="length distribution of Poisson requests (and the output predictor)"),
    trace: Path = typer.Option(None, help="a timestamped trace (Azure 2023 CSV, Mooncake JSONL)"),
    fmt_: TraceFormatOption = "azure",
    window_s: float = typer.Option(None, "--trace-duration", help="use this many seconds of the trace's arrivals"),
    ttft: TTFTOption = 1.0,
    tpot: TPOTOption = 0.05,
    percentile: float = typer.Option(
        99.0, help="the fleet meets the SLOs when this percentile of TTFT and of TPOT does"),
    warmup: float = typer.Option(0.0, help="seconds of arrivals left out of the statistics"),
    max_batch_tokens: int = typer.Option(4096, "--max-batch-tokens", help="C: tokens per batch"),
    max_running: int = typer.Option(256, "--max-running", help="R_max: running requests per worker"),
    run: RunArgs = shared("seed", RESULT),
) -> None:
    """Simulate N workers (iteration-level engine, Algorithm 1 presets) behind a router on a trace or Poisson stream.

    A simulation, no solver: no --solver, --threads or --time-limit; --seed draws the Poisson stream."""
    from planner.batching.scheduler import PRESETS

    if router not in ROUTERS:
        raise PlannerError(f"--router must be one of {', '.join(ROUTERS)}, got {router!r}")
    if scheduler.lower() not in PRESETS:
        raise PlannerError(f"--method must be one of {', '.join(PRESETS)}, got {scheduler!r}")
    if not 1 <= workers <= MAX_WORKERS:
        raise PlannerError(f"--workers must be between 1 and {MAX_WORKERS:,}, got {workers}")
    if (trace is None) == (rate is None):
        raise PlannerError("give exactly one of --trace or --rate")
    if trace is not None:
        if fmt_ not in TRACE_FORMATS:
            raise PlannerError(f"--trace-format must be one of {', '.join(TRACE_FORMATS)} (timestamped traces), got {fmt_!r}")
        if trace.is_dir():
            raise PlannerError(f"{trace}: is a directory, expected a trace file")
        if window_s is not None:
            check_positive("--trace-duration", window_s)
    else:
        check_positive("--rate", rate)
        check_positive("--duration", duration)
        if rate * duration > MAX_REQUESTS:
            raise PlannerError(f"--rate × --duration: about {rate * duration:.3g} requests; at most {MAX_REQUESTS:,}")
    check_positive("--ttft", ttft)
    check_positive("--tpot", tpot)
    if not 0 < percentile <= 100:
        raise PlannerError(f"--percentile must be in (0, 100], got {percentile}")
    if not warmup >= 0:
        raise PlannerError(f"--warmup must be ≥ 0, got {warmup}")
    for option, value in (("--max-batch-tokens", max_batch_tokens), ("--max-running", max_running)):
        if value < 1:
            raise PlannerError(f"{option} must be at least 1, got {value}")
    llm, gpu_spec, cost_path, cost = _resolve_cost(model, gpu, tensor_parallel, cost_model)

    from planner.core.types import WorkerConfig
    from planner.fleet import FleetRequests, WorkerSpec, simulate_fleet
    from planner.workloads.streams import find_distribution

    dist = find_distribution(workload)
    if trace is not None:
        requests = FleetRequests.from_trace(trace, fmt_, window_s=window_s, max_total_tokens=llm.max_context_tokens,
                                            predictor=dist)
    else:
        requests = FleetRequests.poisson(dist, rate=rate, duration_s=duration, seed=run.seed,
                                         max_total_tokens=llm.max_context_tokens, name=workload)
    source = f"{cost_path}" + (f" ({cost.provenance.split(' [')[0]})" if cost.provenance else "")
    build = WorkerSpec.from_batchtime if getattr(cost, "kind", "") == "batchtime" else WorkerSpec.from_aladdin
    spec = build(llm, WorkerConfig(gpu=gpu_spec, tensor_parallel=tensor_parallel), cost,
                 scheduler=scheduler.lower(), C=max_batch_tokens, R_max=max_running, source=str(cost_path))
    with run_progress(f"simulating {requests.n:,} requests on {workers} workers"):
        result = simulate_fleet(requests, spec, n_workers=workers, router=router, ttft_s=ttft, tpot_s=tpot)
    summary = result.summary(percentiles=(50, 90, 99) if percentile in (50, 90, 99) else (50, 90, 99, percentile),
                             warmup_s=warmup)
    meets = result.meets(percentile=percentile, warmup_s=warmup)
    from planner.costmodels.models import cost_model_caveats

    caveats = cost_model_caveats(cost)
    data = {
        "model": llm.name, "gpu": gpu_spec.name, "tensor_parallel": tensor_parallel, "cost_model_file": str(cost_path),
        "cost_model_kind": cost.kind, "cost_model_caveats": caveats,
        "cost_model_source": source, "workload": requests.source, "scheduler": spec.scheduler,
        "kv_tokens_per_worker": spec.M,
        "max_batch_tokens": max_batch_tokens, "max_running": max_running, "percentile": percentile,
        "meets_slos": meets, **summary, "simulation_seconds": result.wall_seconds,
    }

    def show() -> None:
        t = Table(title=f"Fleet simulation: {requests.n:,} requests, {workers} × {llm.name} on "
                        f"{tensor_parallel}x{gpu_spec.name} "
                        f"({workers * tensor_parallel} GPUs), router {router}, scheduler {spec.scheduler}",
                  show_header=False, title_justify="left")
        t.add_row("cost model", f"{source} ({cost.kind})")
        for line in caveats:
            t.add_row("cost-model caveat", line)
        t.add_row("workload", requests.source)
        t.add_row("KV per worker", f"{spec.M:,} tokens")
        for metric, label in (("ttft_s", "TTFT (s)"), ("tpot_s", "TPOT (s/token)"), ("e2e_s", "e2e (s)"),
                              ("queueing_s", "queueing (s)")):
            t.add_row(label, "  ".join(f"P{q:g} {fmt(summary[f'p{q:g}_{metric}'], 4)}" for q in (50, 90, 99)))
        t.add_row("SLO attainment", f"{summary['slo_attainment']:.4f} (TTFT ≤ {ttft:g} s and TPOT ≤ {tpot:g} s)")
        t.add_row(f"P{percentile:g} meets SLOs", "yes" if meets else "no")
        t.add_row("utilisation", f"mean {summary['mean_utilisation']:.3f}, max {summary['max_utilisation']:.3f}")
        t.add_row("preemptions", f"{summary['preemptions']:,}")
        t.add_row("throughput", f"{summary['throughput_rps']:.4g} req/s; mean in flight {summary['mean_in_flight']:.4g}")
        t.add_row("simulation wall time", f"{result.wall_seconds:.2f} s incl. loading the compiled kernel "
                                          f"({summary['iterations']:,} iterations)")
        out.print(t)

    run.emit(data, show=show)


def _resolve_cost(model: str, gpu: str, tensor_parallel: int, cost_model: Path | None):
    """(LLMSpec, GPUSpec, path, cost model): a batch-time file as given (its model, GPU and TP must be the
    run's), anything else through `resolve_serving` (Aladdin files only); one-line errors."""
    from planner.cli.placement import resolve_worker
    from planner.costmodels.batchtime import BatchTimeModel
    from planner.costmodels.files import load_cost_model

    if cost_model is None or cost_model.is_dir() or not cost_model.exists():
        return resolve_serving(model, gpu, tensor_parallel, cost_model)
    cost = load_cost_model(cost_model)
    if not isinstance(cost, BatchTimeModel):
        return resolve_serving(model, gpu, tensor_parallel, cost_model)
    llm, gpu_spec = resolve_worker(model, gpu, tensor_parallel)
    for what, fitted, asked in (("model", cost.model, llm.name), ("GPU", cost.gpu, gpu_spec.name)):
        if fitted.lower() != asked.lower():
            raise PlannerError(f"{cost_model}: batch-time model fitted for {what} {fitted}, not {asked}")
    if cost.tensor_parallel != tensor_parallel:
        raise PlannerError(f"{cost_model}: fitted for TP {cost.tensor_parallel}, not {tensor_parallel}")
    return llm, gpu_spec, cost_model, cost
