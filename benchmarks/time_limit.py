"""Does ``--time-limit`` hold for the whole call, always carry a bound, and repeat?

For each family this script builds a large instance in a temporary directory (nothing is written into
the repository), runs the CLI command as a subprocess — what a user runs — with ``--time-limit T --json``
twice, and records per run:

* the wall time of the whole process, its CPU time (user + system: on a shared machine the wall time
  also holds the time spent waiting for a core), and its overrun over the limit minus the process
  start-up: the imports of the CLI and of the family's modules (``python -c 'import planner.cli.main,
  planner.<family>...'``, the least of three, measured separately; numba's caches are warmed by one
  untimed run of each command before the timed runs, so the start-up is imports only — loading the
  compiled kernels from numba's cache stays inside the limit);
* the result's bound (``bound``; for a cost plan whose load does not fit, the bound on the largest
  servable load scale, ``stats.max_load_scale_bound``), and its source;
* whether the two runs' plans (``solution``) are identical, and whether the result itself says the
  plan may not repeat (``stats.wall_cut`` / ``stats.wall_cut``: the wall-clock guard, not the
  nominal budget, stopped a phase).

Instances (generated, deterministic):

* placement: ``planner generate placement`` (ShareGPT, 2,000 new + 1,000 ongoing requests);
* batching: B = 16 requests, I, O uniform in [1, 64] (seed 0), M = 0.6 × Σ(I + O − 1);
* priority: ``planner generate priority --jobs 30 --b-max 4``;
* queueing: 2,000 groups (QLM's three SLO classes, three models) on 16 instances (8 A100x4 + 8 H100x4);
* deployment: a cost plan of 6 GPU types × 4 TP degrees × 60 models (``instances/deployment/generate.py``);
* routing: 2,000 and 5,000 ShareGPT requests on 8 instances (``instances/deployment/generate.py``).

``planner capacity`` (its ``--time-limit`` is per point of a sweep) is not run.

Usage:  python benchmarks/time_limit.py [--limits 3] [--repeats 2] [--only routing,deployment] [--out FILE]

The markdown table goes to stdout; ``--out`` also writes it to FILE (nothing is written otherwise).
Timings depend on what else the machine runs: the machine line gives the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from machine_info import machine_line
from results_paths import add_output_options, output_path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
#: Seconds a run may take beyond the limit before the script stops waiting for it.
HANG_GUARD = 120.0


@dataclass(frozen=True)
class Case:
    name: str
    family: str
    args: tuple[str, ...]  # the planner command, without --time-limit / --json


#: The modules a family's command imports (its start-up beyond `planner.cli.main`).
FAMILY_IMPORTS = {
    "placement": "planner.placement.pipeline, planner.placement.instance",
    "batching": "planner.batching.pipeline, planner.batching.instance",
    "priority": "planner.priority.pipeline, planner.priority.instance",
    "queueing": "planner.queueing.pipeline, planner.queueing.instance, planner.queueing.evaluator",
    "deployment": "planner.deployment.cost_solve, planner.deployment.instance",
    "routing": "planner.deployment.routing_solve, planner.deployment.instance",
}


def planner(*args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "planner", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


def _placement(tmp: Path) -> Path:
    out = tmp / "placement.yaml"
    planner("generate", "placement", str(out), "--workload", "sharegpt", "--requests", "2000", "--ongoing", "1000",
            "--seed", "0", "--force").check_returncode()
    return out


def _batching(tmp: Path) -> Path:
    from planner.batching.instance import save_batching_instance
    from planner.batching.problem import make_problem

    rng = np.random.default_rng(0)
    inputs, outputs = rng.integers(1, 65, 16), rng.integers(1, 65, 16)
    memory = max(int((inputs + outputs - 1).max()), int(0.6 * (inputs + outputs - 1).sum()))
    out = tmp / "batching-b16.yaml"
    save_batching_instance(make_problem(inputs, outputs, M=memory, name="b16"), out, cost_model="infermax-7b")
    return out


def _priority(tmp: Path) -> Path:
    out = tmp / "priority-n30-b4.yaml"
    planner("generate", "priority", str(out), "--jobs", "30", "--b-max", "4", "--seed", "0",
            "--force").check_returncode()
    return out


def _queueing(tmp: Path, groups: int = 2000, a100: int = 8, h100: int = 8) -> Path:
    """QLM-style groups (the generator of `instances/queueing/make_instances.py`), one arriving per second."""
    rng = np.random.default_rng(0)
    models = ("Llama-2-7B", "CodeLlama-34B", "Llama-2-70B")
    classes = {"interactive": 20.0, "batch-1": 60.0, "batch-2": 3600.0}
    rows = []
    for i in range(groups):
        cls = list(classes)[int(rng.choice(3, p=(0.1, 0.2, 0.7)))]
        mean_out = int(rng.integers(100, 400))
        rows.append({"name": f"g{i:04d}", "model": models[int(rng.integers(3))], "slo_class": cls,
                     "num_requests": int(rng.integers(2, 17)), "mean_input_tokens": int(rng.integers(100, 800)),
                     "mean_output_tokens": mean_out, "std_output_tokens": round(mean_out / 3, 1),
                     "max_output_tokens": 2 * mean_out, "arrival_s": float(i)})
    fleet = [
        {"name": "a100x4", "gpu": "A100-80GB-SXM", "tensor_parallel": 4, "swap_time_s": 12.0, "count": a100,
         "loaded_models": [models[k % 3] for k in range(a100)]},
        {"name": "h100x4", "gpu": "H100-80GB-SXM", "tensor_parallel": 4, "swap_time_s": 8.0, "count": h100,
         "cost_per_instance": 2.0, "loaded_models": [models[(k + 1) % 3] for k in range(h100)]},
    ]
    data = {"family": "queueing", "name": f"bench-{groups}x{a100 + h100}", "slo_classes": classes,
            "objective": "penalty", "deadline": "start", "now_s": 0.0, "instance_types": fleet, "groups": rows}
    out = tmp / f"queueing-{groups}x{a100 + h100}.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False, width=140))
    return out


def _deployment(tmp: Path, kind: str, **sizes: int) -> Path:
    label = "-".join(f"{k}{v}" for k, v in sizes.items())
    out = tmp / f"{kind}-{label}.yaml"
    flags = [x for k, v in sizes.items() for x in (f"--{k}", str(v))]
    subprocess.run([PYTHON, str(REPO / "instances" / "deployment" / "generate.py"), kind, str(out), *flags,
                    "--seed", "0", "--force"], check=True, capture_output=True, cwd=REPO)
    return out


def build_cases(tmp: Path, only: set[str] | None) -> list[Case]:
    makers = {
        "placement": lambda: [Case("placement 2,000 + 1,000 ongoing", "placement",
                                   ("solve", "placement", str(_placement(tmp))))],
        "batching": lambda: [Case("batching B = 16", "batching", ("solve", "batching", str(_batching(tmp))))],
        "priority": lambda: [Case("priority N = 30, b_max = 4", "priority", ("solve", "priority", str(_priority(tmp))))],
        "queueing": lambda: [Case("queueing 2,000 × 16", "queueing", ("solve", "queueing", str(_queueing(tmp))))],
        "deployment": lambda: [Case("deployment 6 types × 60 models", "deployment",
                                    ("solve", "deployment", str(_deployment(tmp, "cost", types=6, models=60))))],
        "routing": lambda: [Case(f"routing {n:,} requests", "routing",
                                 ("solve", "routing", str(_deployment(tmp, "routing", requests=n))))
                            for n in (2000, 5000)],
    }
    cases: list[Case] = []
    for family, make in makers.items():
        if only is None or family in only:
            cases += make()
    return cases


def startup_seconds(family: str | None = None, repeats: int = 3) -> float:
    """The least wall time of a process that only imports the CLI (and the family's modules)."""
    imports = "import planner.cli.main, highspy" + (f", {FAMILY_IMPORTS[family]}" if family else "")
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([PYTHON, "-c", imports], check=True, cwd=REPO)
        best = min(best, time.perf_counter() - t0)
    return best


def warm_caches(cases: list[Case]) -> None:
    """One untimed run of each command at a short limit: numba compiles once per install and caches."""
    for case in cases:
        try:
            planner(*case.args, "--time-limit", "1", "--json", timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            pass


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(case: Case, limit: float) -> dict:
    cpu0, t0 = _child_cpu(), time.perf_counter()
    try:
        proc = planner(*case.args, "--time-limit", f"{limit:g}", "--json", timeout=limit + HANG_GUARD)
    except subprocess.TimeoutExpired:
        return {"wall": time.perf_counter() - t0, "cpu": 0.0, "error": f"no answer within {limit + HANG_GUARD:g} s"}
    wall, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"wall": wall, "cpu": cpu, "error": f"exit {proc.returncode}: {last[:120]}"}
    stats = data.get("stats") or {}
    bound, source = data.get("bound"), data.get("bound_source") or ""
    if bound is None and stats.get("max_load_scale_bound") is not None:
        bound, source = stats["max_load_scale_bound"], "max load scale ≤ (load does not fit)"
    return {
        "wall": wall, "cpu": cpu, "status": data.get("status"), "objective": data.get("objective"), "bound": bound,
        "bound_source": source, "solve_seconds": data.get("solve_seconds"),
        "plan": json.dumps(data.get("solution"), sort_keys=True),
        "may_not_repeat": bool(stats.get("wall_cut")),
    }


def fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", default="3", help="comma-separated time limits in seconds (default 3)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per case and limit (default 2)")
    parser.add_argument("--only", default="", help="comma-separated families (default: all)")
    add_output_options(parser, "time_limit")
    args = parser.parse_args()
    out_path = output_path(parser, args, "time_limit")
    limits = [float(x) for x in args.limits.split(",") if x]
    only = {x.strip() for x in args.only.split(",") if x.strip()} or None
    with tempfile.TemporaryDirectory(prefix="planner-time-limit-") as tmp:
        cases = build_cases(Path(tmp), only)
        warm_caches(cases)
        lines = [
            "# `--time-limit`: whole call, bound, repeatability",
            "",
            f"Machine: {machine_line()}.",
            (f"Each CLI command runs as a subprocess with `--time-limit T --json`, {args.repeats} times. `start-up` = "
             "the least of 3 wall times of a process importing the CLI and the family's modules, measured just "
             "before the case's runs; `overrun` = the larger wall − T − start-up of the runs (target ≤ 0.5 s); "
             "`cpu` = user + system seconds of the process. `same plan` compares the `solution` objects of the runs; "
             "`may not repeat` = the result itself says the wall clock, not the nominal budget, stopped a phase."),
            "",
            "| instance | T (s) | start-up (s) | wall (s) | cpu (s) | overrun (s) | status | objective | bound | bound from "
            "| same plan | may not repeat |",
            "|---|---:|---:|---:|---:|---:|---|---:|---:|---|---|---|",
        ]
        print("\n".join(lines), flush=True)
        tally = {"rows": 0, "errors": 0, "over": [], "differ": 0, "no_bound": 0, "flagged": 0}
        for case in cases:
            for limit in limits:
                startup = startup_seconds(case.family)
                runs = [run_once(case, limit) for _ in range(args.repeats)]
                errors = [r["error"] for r in runs if "error" in r]
                walls = ", ".join(f"{r['wall']:.2f}" for r in runs)
                cpus = ", ".join(f"{r['cpu']:.2f}" for r in runs)
                over = max(r["wall"] - limit - startup for r in runs)
                tally["rows"] += 1
                tally["over"].append(over)
                tally["errors"] += bool(errors)
                if not errors:
                    tally["differ"] += len({r["plan"] for r in runs}) > 1
                    tally["no_bound"] += any(r["bound"] is None for r in runs)
                    tally["flagged"] += any(r["may_not_repeat"] for r in runs)
                if errors:
                    row = f"| {case.name} | {limit:g} | {startup:.2f} | {walls} | {cpus} | {over:+.2f} | {errors[0]} | | | | | |"
                else:
                    same = "yes" if len({r["plan"] for r in runs}) == 1 else "NO"
                    statuses = "/".join(sorted({r["status"] for r in runs}))
                    bounds = ", ".join(fmt(r["bound"]) for r in runs)
                    objectives = ", ".join(fmt(r["objective"]) for r in runs)
                    sources = "; ".join(sorted({r["bound_source"] or "-" for r in runs}))
                    flagged = ", ".join("yes" if r["may_not_repeat"] else "no" for r in runs)
                    row = (f"| {case.name} | {limit:g} | {startup:.2f} | {walls} | {cpus} | {over:+.2f} | {statuses} | "
                           f"{objectives} | {bounds} | {sources} | {same} | {flagged} |")
                print(row, flush=True)
                lines.append(row)
        worst = max(tally["over"], default=0.0)
        lines += ["", (f"Summary: {tally['rows']} (instance, T) cases; largest overrun {worst:+.2f} s "
                       f"({'within' if worst <= 0.5 else 'BEYOND'} the 0.5 s margin); {tally['errors']} errors; "
                       f"{tally['no_bound']} without a bound; {tally['differ']} with different plans on repeated runs; "
                       f"{tally['flagged']} where a result said it may not repeat."),
                  "", f"Load average at the end {os.getloadavg()[0]:.2f}."]
        print("\n".join(lines[-3:]))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("\n".join(lines) + "\n")
    print(f"wrote {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
