"""Mélange's slice ILP against the exact mixed-fleet MILP (`planner.deployment.classes`), same inputs.

Mélange (arXiv 2404.14527; code https://github.com/tyler-griggs/melange-release, ``melange/solver.py``
at commit d46ab43855bcdbfed4740a42058d2e269374ea55) takes GPU types (``cost`` $/h, ``tputs[i][j]`` =
profiled max requests/s of one GPU for input bucket i, output bucket j), a ``workload_distribution``
(share of requests per bucket), a ``total_request_rate`` and a ``slice_factor``.  Its ILP, re-implemented
here line by line (`melange_slice_ilp`):

* slices: each bucket's rate ``share_ij·rate`` cut into ``slice_factor`` equal slices;
* ``x_{s,g} ∈ {0, 1}`` (slice s on GPU type g), ``y_g ∈ ℤ≥0`` (GPUs of type g);
* C1: ``Σ_g x_{s,g} = 1``; C2: ``Σ_s x_{s,g}·slice_s / tput_g(bucket(s)) ≤ y_g``;  min ``Σ_g cost_g·y_g``.

Mélange solves it with PuLP/CBC.  Here the same model is solved with HiGHS (through ``planner.solver``),
and — with ``--cbc`` (default; PuLP with its bundled CBC is a dependency of the project) — also exactly as
Mélange runs it (`melange_cbc`: Mélange's PuLP model, ``PULP_CBC_CMD(msg=0)``, plus a ``timeLimit``).
The exact model routes continuous rates instead of whole slices, so its optimum is ≤ Mélange's optimum
at every slice factor.

Cases: Mélange's shipped example (``instances/deployment/melange-example.yaml``, slice factors 1, 2, 4,
8), and generated 6 GPU types × 10 × 10 buckets at several total rates (`scaled_case`: a synthetic
throughput model, seeded; prices illustrative).

Usage:  python benchmarks/melange_compare.py [--quick] [--melange-time-limit 120] [--rates 1,4,16,64,256]
        [--slice-factors 1,4,16] [--cbc auto|yes|no]
        [--out FILE | --update-results]
(the table goes to stdout and to benchmarks/_runs/melange_compare.md unless --out / --update-results).
Timings depend on what else the machine runs: the machine line gives the load average.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from planner.deployment.classes import (  # noqa: E402
    ClassPlanProblem,
    Configuration,
    GPUType,
    RequestClass,
    solve_class_plan,
)
from planner.solver import ModelBuilder, SolveOptions, solve  # noqa: E402

#: Mélange's melange/config/example.json (commit d46ab43), verbatim.
MELANGE_EXAMPLE = {
    "gpu_info": {
        "A10G": {"cost": 1.01, "tputs": [[2, 1], [5, 2]]},
        "A100-80GB": {"cost": 3.67, "tputs": [[20, 20], [40, 20]]},
    },
    "workload_distribution": [[0.2, 0.1], [0.5, 0.2]],
    "total_request_rate": 30.0,
    "slice_factor": 1,
}


def melange_slice_ilp(config: dict, slice_factor: int | None = None, time_limit: float | None = None,
                      threads: int | None = 1) -> dict:
    """Mélange's ``MelangeSolver.run`` model (see the module docstring), solved by HiGHS.

    Returns ``{"counts": {gpu: n}, "cost", "status", "bound", "gap", "seconds", "binaries"}``; ``cost`` is
    recomputed from the counts as Mélange does (``Σ n·cost``).  A bucket a GPU has no throughput for
    (``tput`` ≤ 0, where Mélange would divide by zero) cannot go to that GPU."""
    sf = int(slice_factor if slice_factor is not None else config.get("slice_factor", 1))
    dist, rate = config["workload_distribution"], float(config["total_request_rate"])
    gpus = list(config["gpu_info"])
    slices, loads = [], []  # slice rate; per GPU the load (1/tput) of the slice's bucket
    for i, row in enumerate(dist):
        for j, share in enumerate(row):
            for _ in range(sf):
                slices.append(share * rate / sf)
                loads.append([1.0 / config["gpu_info"][g]["tputs"][i][j] if config["gpu_info"][g]["tputs"][i][j] > 0
                              else math.inf for g in gpus])
    S, G = len(slices), len(gpus)
    b = ModelBuilder("melange-slice-ilp", sense="min")
    y = b.add_variables("y", G, lower=0.0, integer=True, cost=np.array([config["gpu_info"][g]["cost"] for g in gpus]))
    ub = np.array([[0.0 if math.isinf(loads[s][g]) else 1.0 for g in range(G)] for s in range(S)])
    x = b.add_variables("x", (S, G), lower=0.0, upper=ub, integer=True)
    rows = np.repeat(np.arange(S), G)
    b.add_constraints("C1", S, rows, x.columns, np.ones(S * G), lower=1.0, upper=1.0)
    vals = np.array([slices[s] * (0.0 if math.isinf(loads[s][g]) else loads[s][g]) for s in range(S) for g in range(G)])
    c2_rows = np.concatenate([np.tile(np.arange(G), S), np.arange(G)])
    c2_cols = np.concatenate([x.columns, y.columns])
    b.add_constraints("C2", G, c2_rows, c2_cols, np.concatenate([vals, -np.ones(G)]), upper=0.0)
    model = b.build()
    t0 = time.perf_counter()
    out = solve(model, "highs", SolveOptions(time_limit=time_limit, threads=threads))
    seconds = time.perf_counter() - t0
    if out.x is None:
        return {"counts": None, "cost": None, "status": out.status.value, "bound": out.bound, "gap": None,
                "seconds": seconds, "binaries": S * G}
    counts = {g: int(round(v)) for g, v in zip(gpus, y.values(out.x))}
    cost = sum(n * config["gpu_info"][g]["cost"] for g, n in counts.items())
    return {"counts": counts, "cost": cost, "status": out.status.value, "bound": out.bound, "gap": out.gap,
            "seconds": seconds, "binaries": S * G}


def melange_cbc(config: dict, slice_factor: int | None = None, time_limit: float | None = None) -> dict:
    """Mélange's ``MelangeSolver.run`` as Mélange runs it: the PuLP model built the same way, solved by the
    CBC binary PuLP ships (``PULP_CBC_CMD(msg=0)``; ``timeLimit`` added so a run ends).  Same return keys as
    `melange_slice_ilp`; ``status`` is PuLP's ("Optimal" only when CBC proved it), ``bound``/``gap`` are
    not exposed by PuLP's CBC interface (None)."""
    import pulp

    sf = int(slice_factor if slice_factor is not None else config.get("slice_factor", 1))
    dist, rate = config["workload_distribution"], float(config["total_request_rate"])
    gpus = list(config["gpu_info"])
    slices, loads = [], []
    for i, row in enumerate(dist):
        for j, share in enumerate(row):
            for _ in range(sf):
                slices.append(share * rate / sf)
                loads.append([1.0 / config["gpu_info"][g]["tputs"][i][j] if config["gpu_info"][g]["tputs"][i][j] > 0
                              else None for g in gpus])
    S, G = len(slices), len(gpus)
    x = [[pulp.LpVariable(f"x_{s}_{g}", cat=pulp.LpInteger, lowBound=0, upBound=0 if loads[s][g] is None else 1)
          for g in range(G)] for s in range(S)]
    y = [pulp.LpVariable(f"y_{g}", cat=pulp.LpInteger, lowBound=0) for g in range(G)]
    problem = pulp.LpProblem("GpuAllocation", pulp.LpMinimize)
    problem += pulp.lpSum(y[g] * config["gpu_info"][gpus[g]]["cost"] for g in range(G))
    for s in range(S):
        problem += pulp.lpSum(x[s]) == 1
    for g in range(G):
        problem += pulp.lpSum(x[s][g] * loads[s][g] * slices[s] for s in range(S) if loads[s][g] is not None) <= y[g]
    t0 = time.perf_counter()
    problem.solve(pulp.PULP_CBC_CMD(msg=0, timeLimit=time_limit))
    seconds = time.perf_counter() - t0
    status = pulp.LpStatus[problem.status]
    if any(v.value() is None for v in y):
        return {"counts": None, "cost": None, "status": status, "bound": None, "gap": None, "seconds": seconds,
                "binaries": S * G}
    counts = {g: int(round(v.value())) for g, v in zip(gpus, y)}
    cost = sum(n * config["gpu_info"][g]["cost"] for g, n in counts.items())
    if status == "Optimal" and problem.sol_status != pulp.LpSolutionOptimal:
        status = "time limit, feasible"  # PuLP's status is "Optimal" for an incumbent CBC did not prove
    return {"counts": counts, "cost": cost, "status": status, "bound": None, "gap": None, "seconds": seconds,
            "binaries": S * G}


def melange_problem(config: dict, name: str = "melange") -> ClassPlanProblem:
    """The same input as a `ClassPlanProblem`: bucket (i, j) = class ``in{i}-out{j}`` with rate
    ``share·total_rate``; one TP-1 configuration per GPU type with μ = tput (buckets with tput ≤ 0 left out)."""
    gpus = list(config["gpu_info"])
    dist, rate = config["workload_distribution"], float(config["total_request_rate"])
    classes, index = [], {}
    for i, row in enumerate(dist):
        for j, share in enumerate(row):
            index[(i, j)] = len(classes)
            classes.append(RequestClass(0, f"in{i}-out{j}", share * rate))
    configs = []
    for g, gname in enumerate(gpus):
        tputs = config["gpu_info"][gname]["tputs"]
        cap = tuple((index[(i, j)], float(tputs[i][j])) for i in range(len(dist)) for j in range(len(dist[0]))
                    if tputs[i][j] > 0)
        configs.append(Configuration(f"{gname}-tp1", 0, g, 1, cap))
    types = tuple(GPUType(gname, float(config["gpu_info"][gname]["cost"])) for gname in gpus)
    return ClassPlanProblem(name, (name,), types, tuple(classes), tuple(configs), "Mélange-format input")


# ---- the scaled case -------------------------------------------------------------------------------

#: (name, $/GPU-h, memory GB, memory bandwidth GB/s, dense fp16 TFLOP/s): public spec-sheet numbers;
#: prices ILLUSTRATIVE on-demand cloud list prices, not quotes.
SCALED_GPUS = [
    ("L4", 0.80, 24, 300, 121),
    ("A10G", 1.01, 24, 600, 125),
    ("L40S", 1.86, 48, 864, 362),
    ("A100-40GB", 3.00, 40, 1555, 312),
    ("A100-80GB", 3.67, 80, 2039, 312),
    ("H100-80GB", 6.98, 80, 3350, 989),
]
INPUT_EDGES = np.geomspace(16, 8192, 11)
OUTPUT_EDGES = np.geomspace(4, 2048, 11)


def scaled_case(total_rate: float, seed: int = 0, tpot_s: float = 0.1) -> dict:
    """6 GPU types × 10 input × 10 output buckets in Mélange's input format (synthetic, seeded).

    Throughput of one GPU for bucket (I, O) (geometric bucket midpoints), a 7B-parameter model (14 GB of
    weights, 0.5 MB of KV cache per token): batch ``B = min(256, KV memory / (0.5 MB·(I + O)))`` lowered
    until a decode iteration ``(14 GB + B·(I + O/2)·0.5 MB) / bandwidth`` meets ``tpot_s``; prefill
    ``2·7e9·I / (0.5·TFLOP/s)``; tput = ``B / (O·iteration + B·prefill)`` × a seeded factor in [0.9, 1.1].
    Shares: Dirichlet(0.5) over the 100 buckets."""
    rng = np.random.default_rng(seed)
    mids_in = np.sqrt(INPUT_EDGES[:-1] * INPUT_EDGES[1:])
    mids_out = np.sqrt(OUTPUT_EDGES[:-1] * OUTPUT_EDGES[1:])
    kv, weights = 0.5e6, 14e9
    info = {}
    for name, price, mem, bw, tf in SCALED_GPUS:
        tputs = []
        for inp in mids_in:
            row = []
            for outp in mids_out:
                b = min(256.0, math.floor((0.9 * mem * 1e9 - weights) / (kv * (inp + outp))))
                step = lambda batch: (weights + batch * (inp + outp / 2) * kv) / (bw * 1e9)  # noqa: E731
                while b > 1 and step(b) > tpot_s:
                    b -= 1
                prefill = 2 * 7e9 * inp / (0.5 * tf * 1e12)
                row.append(0.0 if b < 1 or step(b) > tpot_s else b / (outp * step(b) + b * prefill))
            tputs.append(row)
        noise = rng.uniform(0.9, 1.1, size=(10, 10))
        info[name] = {"cost": price, "tputs": (np.array(tputs) * noise).round(4).tolist()}
    shares = rng.dirichlet(np.full(100, 0.5)).reshape(10, 10)
    return {"gpu_info": info, "workload_distribution": shares.tolist(), "total_request_rate": total_rate,
            "slice_factor": 4}


def multi_model_case(models: int, rate: float) -> ClassPlanProblem:
    """``models`` models, each `scaled_case` (seed = model index) at ``rate`` req/s, on TP 1, 2, 4
    (μ·t^0.9 per instance, t GPUs), sharing at most 8 H100-80GB and 16 A100-80GB GPUs (others unlimited)."""
    limits = {"H100-80GB": 8, "A100-80GB": 16}
    gpus = tuple(GPUType(name, price, limits.get(name), mem) for name, price, mem, _, _ in SCALED_GPUS)
    classes, configs, names = [], [], []
    for m in range(models):
        config = scaled_case(rate, seed=m)
        names.append(f"model{m}")
        first = len(classes)
        for i, row in enumerate(config["workload_distribution"]):
            for j, share in enumerate(row):
                classes.append(RequestClass(m, f"in{i}-out{j}", share * rate))
        for g, (gname, *_rest) in enumerate(SCALED_GPUS):
            tputs = np.array(config["gpu_info"][gname]["tputs"]).ravel()
            for tp in (1, 2, 4):
                cap = tuple((first + b, float(mu) * tp ** 0.9) for b, mu in enumerate(tputs) if mu > 0)
                configs.append(Configuration(f"{gname}-tp{tp}", m, g, tp, cap))
    return ClassPlanProblem(f"multi-{models}", tuple(names), gpus, tuple(classes), tuple(configs), "synthetic")


# ---- the table -------------------------------------------------------------------------------------

def _exact(problem: ClassPlanProblem, time_limit: float | None = None) -> dict:
    t0 = time.perf_counter()
    result = solve_class_plan(problem, threads=1, time_limit=time_limit)
    seconds = time.perf_counter() - t0
    counts = {}  # GPUs per type
    for c, n in enumerate(result.solution.counts if result.solution else ()):
        if n:
            conf = problem.configurations[c]
            name = problem.gpus[conf.gpu_index].name
            counts[name] = counts.get(name, 0) + n * conf.tensor_parallel
    return {"cost": result.objective, "bound": result.bound, "gap": result.gap, "status": result.status.value,
            "seconds": seconds, "counts": counts, "valid": bool(result.validation and result.validation.feasible)}


def _fmt_counts(counts: dict | None) -> str:
    return "-" if not counts else ", ".join(f"{n} {g}" for g, n in counts.items() if n)


def _money(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _gap(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2g} %"


def main() -> None:
    from machine_info import machine_line
    from results_paths import add_output_options, output_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--melange-time-limit", type=float, default=120.0,
                        help="seconds for each Mélange slice ILP on the scaled case (default 120)")
    parser.add_argument("--rates", default="1,4,16,64,256", help="total request rates of the scaled case (req/s)")
    parser.add_argument("--multi-time-limit", type=float, default=120.0,
                        help="time limit (s) of the exact solve on the several-models cases (default 120)")
    parser.add_argument("--slice-factors", default="1,4,16", help="Mélange slice factors on the scaled case")
    parser.add_argument("--cbc", choices=("auto", "yes", "no"), default="auto",
                        help="also solve Mélange's model as Mélange does, PuLP + CBC; "
                             "auto (default): when PuLP is installed")
    parser.add_argument("--quick", action="store_true", help="one scaled rate, slice factors 1 and 4, Mélange limited to 10 s")
    add_output_options(parser, "melange_compare")
    args = parser.parse_args()
    try:
        import pulp  # noqa: F401
        have_pulp = True
    except ImportError:
        have_pulp = False
    if args.cbc == "yes" and not have_pulp:
        parser.exit(2, "melange_compare.py: --cbc yes needs PuLP: pip install pulp\n")
    args.cbc = have_pulp and args.cbc != "no"
    if not args.cbc:
        print("melange_compare.py: Mélange's own CBC path skipped (PuLP not installed or --cbc no)", file=sys.stderr)
    out_path = output_path(parser, args, "melange_compare")
    rates = [float(r) for r in args.rates.split(",") if r]
    limit = args.melange_time_limit
    factors = [int(f) for f in args.slice_factors.split(",") if f]
    if args.quick:
        rates, limit, factors = rates[:1], min(limit, 10.0), factors[:2]
    lines = ["# Mélange's slice ILP vs the exact mixed-fleet MILP", "", f"Machine: {machine_line()}.", "",
             "Mélange's model re-implemented from its `melange/solver.py` (commit d46ab43) and solved with HiGHS "
             "(1 thread) and, in the rows marked CBC, exactly as Mélange runs it (PuLP + its bundled CBC, "
             "`PULP_CBC_CMD(msg=0, timeLimit=…)`; CBC exposes no bound through PuLP); the exact model is `planner.deployment.classes` "
             "(`solve_class_plan`, 1 thread, no time limit). $/h under each case's prices and per-bucket throughputs.",
             "", "## Mélange's shipped example (2 GPU types, 2 × 2 buckets, 30 req/s)", "",
             "| model | slice factor | binaries | GPUs | $/h | status | bound | gap | seconds |",
             "|---|---:|---:|---|---:|---|---:|---:|---:|"]
    for sf in (1, 2, 4, 8):
        r = melange_slice_ilp(MELANGE_EXAMPLE, sf, time_limit=60.0)
        lines.append(f"| Mélange slice ILP | {sf} | {r['binaries']} | {_fmt_counts(r['counts'])} | {_money(r['cost'])} | "
                     f"{r['status']} | {_money(r['bound'])} | {_gap(r['gap'])} | {r['seconds']:.3f} |")
        if args.cbc:
            r = melange_cbc(MELANGE_EXAMPLE, sf, time_limit=60.0)
            lines.append(f"| Mélange slice ILP, CBC (as Mélange runs it) | {sf} | {r['binaries']} | "
                         f"{_fmt_counts(r['counts'])} | {_money(r['cost'])} | {r['status']} | - | - | {r['seconds']:.3f} |")
    from planner.deployment.instance import load_deployment_instance

    shipped = load_deployment_instance(REPO / "instances/deployment/melange-example.yaml")
    ex = _exact(shipped)
    lines.append(f"| exact (continuous routing) | - | - | {_fmt_counts(ex['counts'])} | {_money(ex['cost'])} | "
                 f"{ex['status']} | {_money(ex['bound'])} | {_gap(ex['gap'])} | {ex['seconds']:.3f} |")
    print("\n".join(lines), flush=True)
    lines += ["", "## Scaled: 6 GPU types × 10 × 10 buckets (synthetic throughputs, `scaled_case`, seed 0)", "",
              f"Mélange at slice factors {', '.join(map(str, factors))} ({', '.join(f'{600 * f:,}' for f in factors)} "
              f"binaries), time limit {limit:g} s each; `ratio` = $/h over the exact optimum.", "",
              "| total req/s | model | GPUs | $/h | status | bound | gap | seconds | ratio |",
              "|---:|---|---|---:|---|---:|---:|---:|---:|"]
    print("\n".join(lines[-7:]), flush=True)
    for rate in rates:
        config = scaled_case(rate)
        e = _exact(melange_problem(config, "scaled"))
        rows = []
        for sf in factors:
            m = melange_slice_ilp(config, sf, time_limit=limit)
            ratio = "-" if m["cost"] is None or not e["cost"] else f"{m['cost'] / e['cost']:.3f}"
            rows.append(f"| {rate:g} | Mélange slice ILP, factor {sf} | {_fmt_counts(m['counts'])} | {_money(m['cost'])} | "
                        f"{m['status']} | {_money(m['bound'])} | {_gap(m['gap'])} | {m['seconds']:.2f} | {ratio} |")
            if args.cbc:
                m = melange_cbc(config, sf, time_limit=limit)
                ratio = "-" if m["cost"] is None or not e["cost"] else f"{m['cost'] / e['cost']:.3f}"
                rows.append(f"| {rate:g} | Mélange slice ILP, factor {sf}, CBC | {_fmt_counts(m['counts'])} | "
                            f"{_money(m['cost'])} | {m['status']} | - | - | {m['seconds']:.2f} | {ratio} |")
        rows.append(f"| {rate:g} | exact (continuous routing) | {_fmt_counts(e['counts'])} | {_money(e['cost'])} | "
                    f"{e['status']} | {_money(e['bound'])} | {_gap(e['gap'])} | {e['seconds']:.3f} | 1 |")
        print("\n".join(rows), flush=True)
        lines += rows
    lines += ["", "## Beyond Mélange's model: several models, TP degrees, a shared inventory (exact only)", "",
              "Models m = 0..M−1, each with `scaled_case(rate, seed=m)`'s buckets and throughputs; TP degrees 1, 2, 4 "
              "(μ × t^0.9, price × t); at most 8 H100-80GB and 16 A100-80GB GPUs in all.  Mélange's model has one "
              "model, one GPU per instance and no inventory, so there is no slice ILP to compare. "
              f"`--time-limit` {args.multi_time_limit:g} s (nominal) for the exact solve.", "",
              "| models | req/s per model | classes | configurations | $/h | status | bound | gap | seconds | GPUs used |",
              "|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    print("\n".join(lines[-6:]), flush=True)
    for models in ([2] if args.quick else [2, 4, 8]):
        problem = multi_model_case(models, 64.0)
        e = _exact(problem, args.multi_time_limit)
        row = (f"| {models} | 64 | {len(problem.classes)} | {len(problem.configurations)} | {_money(e['cost'])} | "
               f"{e['status']} | {_money(e['bound'])} | {_gap(e['gap'])} | {e['seconds']:.3f} | {_fmt_counts(e['counts'])} |")
        print(row, flush=True)
        lines.append(row)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("\n".join(lines) + "\n")
    print(f"wrote {out_path}", file=sys.stderr)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
