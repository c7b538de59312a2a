"""`planner workload`: derive and inspect request-length distributions."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from planner.cli.common import ForceOption, JsonOption, TraceFormatOption, check_out, out, to_json
from planner.errors import PlannerError

app = typer.Typer(help="Request-length distributions derived from real traces.", no_args_is_help=True)


@app.command("derive")
def derive_cmd(
    trace: Path = typer.Argument(..., help="trace file (ShareGPT/arXiv processed CSV, Azure 2023 CSV, Mooncake JSONL)"),
    output: Path = typer.Argument(..., help="distribution YAML to write"),
    fmt: TraceFormatOption = "azure",
    name: str = typer.Option(..., help="distribution name"),
    source: str = typer.Option(None, help="provenance line stored in the file (default: the trace path)"),
    bins: int = typer.Option(24, help="log-spaced input-length bins"),
    force: ForceOption = False,
) -> None:
    """Summarise a trace as input-length bins with output quantiles (what the project ships instead of traces)."""
    from planner.workloads.lengths import derive_length_distribution, read_trace_lengths, save_length_distribution

    if output.exists() and not force:
        raise PlannerError(f"{output}: already exists; pass --force to overwrite it")
    check_out(output, force, "OUTPUT")
    if bins < 1:
        raise PlannerError(f"--bins must be at least 1, got {bins}")
    inputs, outputs, _ = read_trace_lengths(trace, fmt)
    dist = derive_length_distribution(inputs, outputs, name=name, source=source or str(trace), num_bins=bins)
    save_length_distribution(dist, output)
    out.print(f"wrote {output}: {len(dist.bins)} bins from {dist.num_samples} requests "
              f"(mean input {dist.mean_input:.0f}, mean output {dist.mean_output:.0f})")


@app.command("show")
def show_cmd(
    name: str = typer.Argument(None, help="distribution name or YAML path (omit to list the shipped ones)"),
    json_out: JsonOption = False,
) -> None:
    """List shipped distributions, or show one."""
    from planner.workloads.streams import available_distributions, find_distribution

    if name is None:
        names = available_distributions()
        if json_out:
            rows = []
            for n in names:
                d = find_distribution(n)
                rows.append({"name": n, "mean_input": d.mean_input, "mean_output": d.mean_output,
                             "samples": d.num_samples, "source": d.source})
            print(to_json({"distributions": rows}))
            return
        t = Table(title="Shipped length distributions (models/workloads/)", title_justify="left")
        for col in ("name", "mean input", "mean output", "samples", "source"):
            t.add_column(col)
        for n in names:
            d = find_distribution(n)
            t.add_row(n, f"{d.mean_input:.0f}", f"{d.mean_output:.0f}", str(d.num_samples), d.source.split(",")[0])
        out.print(t)
        return
    d = find_distribution(name)
    if json_out:
        print(to_json(d.model_dump()))
        return
    out.print(f"{d.name}: mean input {d.mean_input:.0f}, mean output {d.mean_output:.0f}, {d.num_samples} samples; {d.source}")
