"""`planner simulate replay` (online heartbeat loop, Alg. 1 + Alg. 2) and `planner plan scaling` (Eq. 7)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from planner.cli.common import (AladdinFileOption, GPUOption, KVHeadroomOption, ModelOption, ModeOption,
                                ReportOption, StrictnessOption, TPOTOption, TraceFormatOption, TTFTOption,
                                WorkerTPOption, check_out, cost_model_caveats, out, print_cost_caveats, run_progress,
                                write_files)
from planner.cli.options import RESULT, RunArgs, run_command, shared
from planner.cli.placement import check_positive, make_options, make_slos, resolve_serving
from planner.errors import PlannerError

if TYPE_CHECKING:
    from planner.core.types import Workload

#: ``planner.placement.heuristics.HEURISTICS`` and the MIP, spelled out so that building the CLI does not
#: import the placement package (tests/cli/test_cli.py checks the two lists agree).
METHODS = ("best_fit", "first_fit_decreasing", "jsq", "power_of_two", "round_robin", "mip")
#: ``planner.workloads.lengths.TRACE_FORMATS`` (same check).
TRACE_FORMATS = ("sharegpt", "azure", "mooncake")
#: Upper bounds on a replay's size: simulated requests (rate × duration) and heartbeats (duration / heartbeat).
MAX_REQUESTS = 1_000_000
MAX_HEARTBEATS = 1_000_000


def _check_size(rate: float | None, duration: float, heartbeat: float, rate_option: str = "--rate") -> None:
    """Positive finite --rate / --duration / --heartbeat and a bounded replay, each one line naming the option."""
    if rate is not None:
        check_positive(rate_option, rate)
    check_positive("--duration", duration)
    check_positive("--heartbeat", heartbeat)
    if rate is not None and rate * duration > MAX_REQUESTS:
        raise PlannerError(f"{rate_option} × --duration: {rate:g} req/s over {duration:g} s is about "
                           f"{rate * duration:.3g} requests; at most {MAX_REQUESTS:,} can be simulated")
    if duration / heartbeat > MAX_HEARTBEATS:
        raise PlannerError(f"--duration / --heartbeat: {duration:g} s at {heartbeat:g} s per heartbeat is "
                           f"{duration / heartbeat:.3g} heartbeats; at most {MAX_HEARTBEATS:,} can be simulated")


#: The tables `planner simulate replay --report DIR` writes: DIR/<name>.csv each.
OUT_TABLES = ("requests", "heartbeats")


def _report_paths(folder: Path | None) -> list[Path]:
    """The report files of ``--report DIR``; one line when DIR exists as a file."""
    if folder is None:
        return []
    from planner.core.outputs import check_output_dir  # noqa: PLC0415

    check_output_dir(folder, "--report")
    return [folder / f"{name}.csv" for name in OUT_TABLES]


def _check_out_paths(paths: list[Path], force: bool) -> None:
    """Every output is writable before anything is written (never one table of two); no overwrite without --force."""
    for path in paths:
        check_out(path, force, "--report")


def _write_all(files: list[tuple[Path, str]], force: bool) -> None:
    """Write every file or none (`planner.core.outputs.write_files`: private temporary files, then all
    are put in place; on a failure or Ctrl-C the temporary files and any table this call created are removed)."""
    write_files(files, force, "--report")


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise PlannerError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")


def _trace_workload(path: Path, fmt: str, seconds: float | None, dist, max_total: int) -> Workload:
    import numpy as np

    from planner.core.types import PlannedRequest, Workload
    from planner.workloads.lengths import read_trace_lengths

    inputs, outputs, arrivals = read_trace_lengths(path, fmt)
    if arrivals is None:
        raise PlannerError(f"{path}: the {fmt} format has no timestamps; use --rate for a Poisson stream instead")
    keep = (inputs + outputs <= max_total) & (inputs >= 1) & (outputs >= 1)
    if seconds is not None:
        keep &= arrivals < seconds
    if not keep.any():
        raise PlannerError(f"{path}: no request of the trace fits the model's context within the time window")
    predicted = np.minimum(dist.predict_output(inputs[keep]), np.maximum(max_total - inputs[keep], 1))
    return Workload(requests=tuple(
        PlannedRequest(request_id=f"t{k:06d}", arrival_s=float(a), input_tokens=int(i), output_tokens=int(o),
                predicted_output_tokens=int(p))
        for k, (a, i, o, p) in enumerate(zip(arrivals[keep], inputs[keep], outputs[keep], predicted))
    ))


@run_command
def replay_cmd(
    model: ModelOption = "Llama-2-70B",
    gpu: GPUOption = "A100-80GB-SXM",
    tensor_parallel: WorkerTPOption = 2,
    cost_model: AladdinFileOption = None,
    trace: Path = typer.Option(None, help="replay a real trace with timestamps (Azure 2023 CSV, Mooncake JSONL)"),
    fmt: TraceFormatOption = "azure",
    rate: float = typer.Option(None, help="instead of a trace: Poisson arrivals at this rate (req/s)"),
    workload: str = typer.Option("sharegpt", help="length distribution (lengths of Poisson requests; output predictor)"),
    duration: float = typer.Option(120.0, help="seconds of arrivals to replay"),
    heartbeat: float = typer.Option(1.0, help="scheduling heartbeat (s)"),
    method: str = typer.Option("best_fit", help=f"placement per heartbeat: {', '.join(METHODS)}"),
    rebalance: bool = typer.Option(True, help="Alg. 2 prediction-error rebalancing"),
    ttft: TTFTOption = 1.6,
    atgt: TPOTOption = 0.075,
    mode: ModeOption = "colocated",
    strictness: StrictnessOption = 0.5,
    kv_headroom: KVHeadroomOption = 1.0,
    run: RunArgs = shared("seed json out"),
    report: ReportOption = None,
    _rest: RunArgs = shared("force solver time_limit threads"),
) -> None:
    """Replay a request stream under Aladdin's online heuristic (heartbeat placement + Alg. 2) and measure SLOs.

    This is the paper's online policy, timed by Eqs. 2-3 per heartbeat; the fleet answer of `planner capacity`
    comes from `planner simulate fleet` (iteration-level engine per worker behind a router).

    --report DIR writes requests.csv (one row per request) and heartbeats.csv (one row per heartbeat).
    --solver, --time-limit and --threads apply to each heartbeat's MIP of --method mip."""
    from planner.core.types import WorkerConfig
    from planner.placement.online import replay
    from planner.workloads.streams import find_distribution, poisson_workload

    _check_method(method)
    if (trace is None) == (rate is None):
        raise PlannerError("give exactly one of --trace or --rate")
    _check_size(rate, duration, heartbeat)
    if trace is not None and trace.is_dir():
        raise PlannerError(f"{trace}: is a directory, expected a trace file")
    out_paths = _report_paths(report)
    _check_out_paths(out_paths, run.force)  # before the replay: a refusal costs nothing and writes nothing
    llm, gpu_spec, _, cost = resolve_serving(model, gpu, tensor_parallel, cost_model)
    slos = make_slos(ttft, atgt, cost)
    dist = find_distribution(workload)
    if trace is not None:
        requests = _trace_workload(trace, fmt, duration, dist, llm.max_context_tokens)
    else:
        requests = poisson_workload(dist, rate=rate, duration_s=duration, seed=run.seed,
                                    max_total_tokens=llm.max_context_tokens)
    with run_progress(f"replaying {len(requests)} requests"):
        result = replay(
            requests, model=llm, worker=WorkerConfig(gpu=gpu_spec, tensor_parallel=tensor_parallel), cost=cost,
            slos=slos, options=make_options(mode, strictness, kv_headroom), heartbeat_s=heartbeat,
            method=method, rebalance=rebalance, predictor=dist, seed=run.seed, time_limit=run.time_limit,
            solver=run.solver, threads=run.threads,
        )
    if out_paths:
        frames = {"requests": result.requests, "heartbeats": result.heartbeats}
        _write_all([(path, frames[name].to_csv(index=False)) for path, name in zip(out_paths, OUT_TABLES)], run.force)
    summary = result.to_dict()
    caveats = cost_model_caveats(cost)

    def show() -> None:
        t = Table(title=f"Replay under {ALADDIN_ONLINE}: {len(requests)} requests, {llm.name} on "
                        f"{tensor_parallel}x{gpu_spec.name}, {method}",
                  show_header=False, title_justify="left")
        for key in ("slo_attainment", "p99_atgt_s", "peak_workers", "mean_workers", "kv_overflows", "repredictions",
                    "moves"):
            t.add_row(key, f"{summary[key]:.4g}" if isinstance(summary[key], float) else str(summary[key]))
        t.add_row("peak GPUs", str(result.peak_workers * tensor_parallel))
        out.print(t)
        print_cost_caveats(cost)

    run.emit({**summary, "cost_model_caveats": caveats}, show=show)


#: What `replay` / `scaling` worker counts are, and what the fleet column beside them is.
ALADDIN_ONLINE = ("Aladdin's online heuristic (heartbeat re-placement by predicted decode load, Eq. 2-3 timing, "
                  "peak active workers after warm-up)")
FLEET_ANSWER = ("fewest workers whose simulated fleet (planner.fleet: vLLM engine, JSQ router) meets P99 TTFT and "
                "P99 TPOT on the same stream, as planner capacity computes it")


def _fleet_beside(rates, *, dist, llm, worker, cost, ttft, atgt, duration, warmup, seed, kv_headroom) -> dict:
    """Per rate: the fleet answer and the certified bound on the same Poisson stream the replay used."""
    from planner.capacity.bound import instance_bound
    from planner.fleet import FleetRequests, WorkerSpec, fewest_workers
    from planner.workloads.streams import poisson_workload

    spec = WorkerSpec.from_aladdin(llm, worker, cost, kv_headroom=kv_headroom)
    found = {}
    for rate in rates:
        wl = poisson_workload(dist, rate=float(rate), duration_s=duration, seed=seed,
                              max_total_tokens=llm.max_context_tokens)
        requests = FleetRequests.from_workload(wl)
        keep = requests.arrival_s >= warmup
        bound = instance_bound(requests.arrival_s[keep], requests.input_tokens[keep], requests.output_tokens[keep],
                               cost, spec.M, ttft, atgt, alpha=0.99, criterion="percentile")
        if not bound.feasible or not keep.any():
            found[float(rate)] = dict.fromkeys(("fleet_workers", "fleet_gpus", "bound_gpus", "fleet_p99_ttft_s",
                                                "fleet_p99_tpot_s"))
            continue
        search = fewest_workers(requests, spec, ttft_s=ttft, tpot_s=atgt, start=max(1, bound.workers - 1),
                                warmup_s=warmup)
        found[float(rate)] = {"fleet_workers": search.workers, "fleet_gpus": search.workers * worker.tensor_parallel,
                              "bound_gpus": bound.workers * worker.tensor_parallel,
                              "fleet_p99_ttft_s": search.percentile_ttft[search.workers],
                              "fleet_p99_tpot_s": search.percentile_tpot[search.workers]}
    return found


@run_command
def scaling_cmd(
    rates: list[float] = typer.Option([1.0, 2.0, 4.0], "--rate", help="arrival rate (req/s); repeat for several"),
    model: ModelOption = "Llama-2-70B",
    gpu: GPUOption = "A100-80GB-SXM",
    tensor_parallel: WorkerTPOption = 2,
    cost_model: AladdinFileOption = None,
    workload: str = typer.Option("sharegpt", help="length distribution of the Poisson streams"),
    duration: float = typer.Option(300.0, help="seconds of arrivals per rate"),
    warmup: float = typer.Option(60.0, help="seconds ignored before taking the peak worker count"),
    heartbeat: float = typer.Option(1.0, help="scheduling heartbeat (s)"),
    method: str = typer.Option("best_fit", help=f"placement per heartbeat: {', '.join(METHODS)}"),
    ttft: TTFTOption = 1.6,
    atgt: TPOTOption = 0.075,
    mode: ModeOption = "colocated",
    strictness: StrictnessOption = 0.5,
    kv_headroom: KVHeadroomOption = 1.0,
    run: RunArgs = shared("seed solver time_limit threads", RESULT),
) -> None:
    """Workers vs arrival rate under Aladdin's online heuristic (heartbeat re-placement) with the Eq. 7 fit, and beside it
    the fleet-simulation answer and certified bound of `planner capacity` on the same Poisson stream.

    --solver, --time-limit and --threads apply to each heartbeat's MIP of --method mip."""
    from planner.core.types import WorkerConfig
    from planner.placement.scaling import workers_vs_rate
    from planner.workloads.streams import find_distribution

    _check_method(method)
    rate_list = sorted(set(rates))
    for r in rate_list:
        if not (r > 0 and r < float("inf")):
            raise PlannerError(f"--rate must be a positive finite number, got {r}")
    _check_size(max(rate_list), duration, heartbeat, "--rate")
    if not warmup >= 0:
        raise PlannerError(f"--warmup must be a non-negative number, got {warmup}")
    if warmup >= duration:
        raise PlannerError(f"--warmup ({warmup}) must be shorter than --duration ({duration})")
    llm, gpu_spec, _, cost = resolve_serving(model, gpu, tensor_parallel, cost_model)
    slos = make_slos(ttft, atgt, cost)
    dist = find_distribution(workload)
    with run_progress(f"replaying {len(rate_list)} rates") as progress:
        fit = workers_vs_rate(
            rate_list, dist=dist, model=llm, worker=WorkerConfig(gpu=gpu_spec, tensor_parallel=tensor_parallel),
            cost=cost, slos=slos, options=make_options(mode, strictness, kv_headroom),
            heartbeat_s=heartbeat, duration_s=duration, warmup_s=warmup, seed=run.seed, method=method,
            time_limit=run.time_limit, solver=run.solver, threads=run.threads,
        )
        progress.phase("fleet simulation beside it")
        beside = _fleet_beside(rate_list, dist=dist, llm=llm, worker=WorkerConfig(gpu=gpu_spec, tensor_parallel=tensor_parallel),
                               cost=cost, ttft=ttft, atgt=atgt, duration=duration, warmup=warmup, seed=run.seed,
                               kv_headroom=kv_headroom)
    for column in ("fleet_workers", "fleet_gpus", "bound_gpus", "fleet_p99_ttft_s", "fleet_p99_tpot_s"):
        fit.table[column] = [beside[r][column] for r in fit.table.rate]
    payload = {**fit.to_dict(), "workers_are": ALADDIN_ONLINE, "fleet_workers_are": FLEET_ANSWER,
               "cost_model_caveats": cost_model_caveats(cost)}

    def show() -> None:
        t = Table(title=f"Workers vs arrival rate: {llm.name} on {tensor_parallel}x{gpu_spec.name} ({dist.name}); "
                        f"workers = {ALADDIN_ONLINE} ({method}); fleet = {FLEET_ANSWER}; bound = certified for any "
                        f"policy, under cost model {cost.model} / {cost.gpu} / TP {cost.tensor_parallel}",
                  title_justify="left")
        cols = [c for c in ("rate", "requests", "workers", "gpus", "mean_workers", "slo_attainment", "fleet_workers",
                            "fleet_gpus", "bound_gpus", "fleet_p99_ttft_s", "fleet_p99_tpot_s") if c in fit.table]
        for c in cols:
            t.add_column(c, justify="right")
        for _, row in fit.table.iterrows():
            t.add_row(*[f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in cols])
        out.print(t)
        print_cost_caveats(cost)
        if fit.k_w is None:
            out.print("Eq. 7: not fitted (it needs at least two distinct rates)")
        else:
            out.print(f"Eq. 7: N_w = ⌈{fit.k_w:.3f}·λ + {fit.c_w:.3f}⌉  (R² = {fit.r2:.3f})")

    run.emit(payload, show=show)
