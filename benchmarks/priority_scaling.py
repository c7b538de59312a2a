"""Priority family benchmark: exact vs exhaustive, exact at N = 30, SA wall time, SA gap.

    python benchmarks/priority_scaling.py            # full run (~14 min on 2 cores)
    python benchmarks/priority_scaling.py --quick    # reduced run (< 2 min)
    python benchmarks/priority_scaling.py --exact-large-only   # only the N = 30 exact table (~13 min)

Tables go to ``benchmarks/_runs/priority_scaling.md`` (``priority_exact_n30.md`` with
``--exact-large-only``; git-ignored), to the committed ``benchmarks/results/`` file with
``--update-results``, or to ``--out FILE``.

The exact method is the one `planner solve priority --method exact` runs (`solve.run_exact`):
warm start (`best_heuristic_plan`) then the subset DP at b_max = 1 and N ≤ 20, the branch-and-bound
otherwise (at b_max ≥ 2 with the Lagrangian bound of `planner/priority/lagrangian.py`, and the
count-split bound of `planner/priority/count_bound.py` for the reported bound when it stops); "incl. warm
start" times both.  At N = 30 the table also shows `--formulation hybrid` (branch-and-bound for a
quarter of the time, then the Dinkelbach MILP on HiGHS, `planner/priority/milp.py`) at b_max ≥ 2.  numba's JIT compile time is measured
separately (cold cache in a fresh process) and excluded from the per-call times.

Instances are `generate_priority_problem` (paper setting: Table 2 latency model, equal chat/code
mix, SLOs 30 s e2e / 10 s TTFT / 50 ms TPOT), with per-job SLO spread 0.5 (heterogeneous SLOs)
unless stated.  Times are wall-clock seconds on this machine while other jobs share the CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from machine_info import machine_line
from results_paths import add_output_options, output_path

from planner.priority.exhaustive import compositions, exhaustive_search
from planner.priority.generator import generate_priority_problem
from planner.priority.heuristics import HEURISTICS, shortest_predicted_first, simulated_annealing
from planner.priority.pipeline import best_heuristic_plan, prove_optimum, run_exact

def machine_description() -> str:
    return (f"Machine: {machine_line(('numpy', 'numba', 'highspy'))}. Exact methods: a numba subset DP (b_max = 1), "
            f"a branch-and-bound (compiled with numba at b_max ≥ 2, Python with compiled bounds at b_max = 1), and the "
            f"Dinkelbach MILP on HiGHS (the hybrid rows).")


def load_average() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def timed_exact(problem, repeats: int) -> tuple[float, float, object, str]:
    """(median warm-start seconds, median total seconds incl. warm start, outcome, method) over ``repeats`` runs."""
    warms, totals = [], []
    outcome = method = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        incumbent = best_heuristic_plan(problem, 0)
        t1 = time.perf_counter()
        outcome, method = prove_optimum(problem, incumbent)
        t2 = time.perf_counter()
        warms.append(t1 - t0)
        totals.append(t2 - t0)
    return statistics.median(warms), statistics.median(totals), outcome, method


JIT_PROBE = """
import time
from planner.priority.generator import generate_priority_problem
from planner.priority.heuristics import fcfs, shortest_predicted_first, simulated_annealing
from planner.priority.sequence_dp import solve_sequence_dp
problem = generate_priority_problem(40, 4, 1, slo_spread=0.5)
small = generate_priority_problem(6, 1, 1, slo_spread=0.5)
problem.tables, small.tables
assert shortest_predicted_first(problem).met < problem.size  # SA really anneals
t0 = time.perf_counter()
import planner.priority.compiled  # numba's import
t1 = time.perf_counter()
simulated_annealing(problem, 0)
t2 = time.perf_counter()
solve_sequence_dp(small, fcfs(small))
t3 = time.perf_counter()
simulated_annealing(problem, 1)
t4 = time.perf_counter()
print(f"{t1 - t0:.2f} {t2 - t1:.2f} {t3 - t2:.2f} {1000 * (t4 - t3):.2f}")
"""


def jit_times() -> list[str]:
    """First-call cost of the numba kernels in a fresh process: cold (empty cache: compile) and warm
    (numba's on-disk cache, what every later CLI call pays)."""
    rows = ["| numba cache | import numba + kernels module (s) | first SA call (s) | first subset-DP call (s) | "
            "second SA call (ms) |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for label in ("cold (compile)", "warm (cached)"):
            done = subprocess.run([sys.executable, "-c", JIT_PROBE], env=env, capture_output=True, text=True, check=True)
            import_s, sa_s, dp_s, again_ms = done.stdout.split()
            rows.append(f"| {label} | {import_s} | {sa_s} | {dp_s} | {again_ms} |")
            print(rows[-1], flush=True)
    return rows


def exact_vs_exhaustive(sizes: list[int], b_maxes: list[int], cap: float, seed: int, repeats: int) -> list[str]:
    rows = ["| N | b_max | exhaustive (s) | exact method | warm start (s) | exact incl. warm start (s) | "
            "speed-up incl. warm start | same G |",
            "|---|---|---|---|---|---|---|---|"]
    for b_max in b_maxes:
        for n in sizes:
            problem = generate_priority_problem(n, b_max, seed, slo_spread=0.5)
            problem.tables  # noqa: B018 - build the tables outside the timings
            warm, exact_s, outcome, method = timed_exact(problem, repeats)
            assert outcome.proven
            total_plans = sum(1 for _ in compositions(n, b_max)) * float(np.prod(np.arange(1, n + 1)))
            t0 = time.perf_counter()
            plan, finished, evaluated = exhaustive_search(problem, time_limit=cap)
            exh = time.perf_counter() - t0
            if finished:
                exh_text = f"{exh:.3f}"
                same = "yes" if abs(plan.g - outcome.plan.g) <= 1e-9 * outcome.plan.g else "NO"
                speed = f"{exh / exact_s:,.0f}×"
            else:
                estimate = exh * total_plans / max(evaluated, 1)
                exh_text = f"> {exh:.0f} (cut; est. {estimate:,.0f} from {evaluated:,} of {total_plans:,.0f} plans)"
                same = "n/a" if plan.g <= outcome.plan.g * (1 + 1e-9) else "NO"
                speed = f"≳ {estimate / exact_s:,.0f}× (est.)"
            rows.append(f"| {n} | {b_max} | {exh_text} | {method} | {warm:.5f} | {exact_s:.5f} | {speed} | {same} |")
            print(rows[-1], flush=True)
    return rows


def exact_vs_exhaustive_seeds(n: int, b_max: int, seeds: list[int], cap: float, repeats: int) -> list[str]:
    """The headline comparison over several instances (the paper's Table 1 point N = 10, b_max = 1)."""
    rows = ["| seed | exhaustive (s) | exact method | warm start (s) | exact incl. warm start (s) | "
            "speed-up incl. warm start | same G | load avg |",
            "|---|---|---|---|---|---|---|---|"]
    for seed in seeds:
        problem = generate_priority_problem(n, b_max, seed, slo_spread=0.5 if seed % 2 == 0 else 0.0)
        problem.tables  # noqa: B018
        warm, exact_s, outcome, method = timed_exact(problem, repeats)
        assert outcome.proven
        t0 = time.perf_counter()
        plan, finished, _ = exhaustive_search(problem, time_limit=cap)
        exh = time.perf_counter() - t0
        same = "yes" if finished and abs(plan.g - outcome.plan.g) <= 1e-9 * outcome.plan.g else ("n/a" if not finished else "NO")
        rows.append(f"| {seed} | {exh:.2f}{'' if finished else ' (cut)'} | {method} | {warm:.5f} | {exact_s:.5f} | "
                    f"{exh / exact_s:,.0f}× | {same} | {load_average():.2f} |")
        print(rows[-1], flush=True)
    return rows


def exact_large(n: int, b_maxes: list[int], seeds: list[int], limit: float, methods: list[str],
                tally: list[bool] | None = None) -> list[str]:
    """`run_exact` with each ``exact_method`` ("auto" is what `--method exact` runs: the subset DP or
    the branch-and-bound; "hybrid" = branch-and-bound then Dinkelbach MILP, for comparison at
    b_max ≥ 2).  HiGHS runs with 1 thread."""
    rows = ["| N | b_max | seed | --formulation | method that ran | status | G* or best G | upper bound | gap | "
            "nodes (B&B + MILP) / rounds (DP) | time (s) | load avg |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for b_max in b_maxes:
        for seed in seeds:
            problem = generate_priority_problem(n, b_max, seed, slo_spread=0.5)
            for exact_method in methods:
                if exact_method in ("bnb", "hybrid") and b_max == 1:  # auto runs the branch-and-bound there
                    continue
                t0 = time.perf_counter()
                result = run_exact(problem, time_limit=limit, exact_method=exact_method)
                took = time.perf_counter() - t0
                gap = result.gap
                if tally is not None and exact_method == "auto":
                    tally.append(result.status.value == "optimal" and took <= limit)
                rows.append(f"| {n} | {b_max} | {seed} | {exact_method} | {result.solver} | {result.status.value} | "
                            f"{result.objective:.6f} | {result.bound:.6f} | {100 * (gap or 0):.2f}% | "
                            f"{result.stats['nodes']:,} | {took:.1f} | {load_average():.2f} |")
                print(rows[-1], flush=True)
    return rows


def sa_timing(sizes: list[int], b_maxes: list[int], repeats: int) -> list[str]:
    """SA wall time per call (compiled Alg. 1, after the first call so JIT compile is excluded) on
    instances where SA really anneals (J_prio misses some SLO; otherwise Alg. 1 stops at once, as
    in the paper).  The time covers the whole call: start plans, draws, the compiled loop and
    re-scoring the result with `evaluate.py`."""
    rows = ["| N | b_max | instance seed | SA wall time per call, median (ms) | min (ms) | max (ms) | calls | load avg |",
            "|---|---|---|---|---|---|---|---|"]
    for n in sizes:
        for b_max in b_maxes:
            seed = 1
            problem = generate_priority_problem(n, b_max, seed, slo_spread=0.5)
            while shortest_predicted_first(problem).met == n and seed < 50:
                seed += 1
                problem = generate_priority_problem(n, b_max, seed, slo_spread=0.5)
            problem.tables  # noqa: B018
            simulated_annealing(problem, 0)  # JIT (or cache load) outside the timing
            times = []
            for r in range(repeats):
                t0 = time.perf_counter()
                simulated_annealing(problem, r)
                times.append(time.perf_counter() - t0)
            rows.append(f"| {n} | {b_max} | {seed} | {1000 * statistics.median(times):.2f} | {1000 * min(times):.2f} | "
                        f"{1000 * max(times):.2f} | {repeats} | {load_average():.2f} |")
            print(rows[-1], flush=True)
    return rows


def sa_gap(count: int, n: int, b_maxes: list[int]) -> list[str]:
    gaps: dict[str, list[float]] = {name: [] for name in HEURISTICS}
    optimal_hits = {name: 0 for name in HEURISTICS}
    for k in range(count):
        b_max = b_maxes[k % len(b_maxes)]
        problem = generate_priority_problem(n, b_max, 1000 + k, slo_spread=0.5 if k % 2 == 0 else 0.0)
        plans = {name: HEURISTICS[name](problem, 0) for name in HEURISTICS}
        outcome, _ = prove_optimum(problem, max(plans.values(), key=lambda p: p.g))
        assert outcome.proven
        for name, plan in plans.items():
            gap = (outcome.plan.g - plan.g) / outcome.plan.g if outcome.plan.g > 0 else 0.0
            gaps[name].append(gap)
            optimal_hits[name] += gap <= 1e-9
    rows = ["| method | instances | mean gap to optimum | worst gap | optimal on |", "|---|---|---|---|---|"]
    for name, values in gaps.items():
        rows.append(f"| {name} | {len(values)} | {100 * statistics.mean(values):.2f}% | {100 * max(values):.2f}% | "
                    f"{optimal_hits[name]} |")
    print("\n".join(rows), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_options(parser, "priority_scaling")  # priority_exact_n30.md with --exact-large-only
    parser.add_argument("--quick", action="store_true", help="reduced run (< 2 minutes)")
    parser.add_argument("--exact-large-only", action="store_true",
                        help="only the N = 30 exact table (b_max 1, 2, 4; seeds 0-2; auto and hybrid; ~13 min)")
    args = parser.parse_args()
    args.out = output_path(parser, args, "priority_exact_n30" if args.exact_large_only else "priority_scaling")
    started = time.perf_counter()
    if args.exact_large_only:
        lines = ["# Priority family: exact optimum at N = 30 (60 s limit, 1 thread)", "", machine_description(), "",
                 "Command: `python benchmarks/priority_scaling.py --exact-large-only`.", ""]
        lines += exact_large(30, [1, 2, 4], [0, 1, 2], 60.0, ["auto", "hybrid"])
        lines += ["", f"Total benchmark time: {time.perf_counter() - started:.0f} s.", ""]
        out = args.out
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(lines))
        print(f"wrote {out}", file=sys.stderr)
        return
    if args.quick:
        sizes, b_maxes, cap, gap_count, gap_n, large_n, large_seeds, large_limit, repeats, sa_repeats = \
            [4, 6, 8], [1, 2], 10.0, 12, 7, 25, [0], 20.0, 3, 10
    else:
        sizes, b_maxes, cap, gap_count, gap_n, large_n, large_seeds, large_limit, repeats, sa_repeats = \
            [4, 6, 8, 10], [1, 2, 4], 120.0, 100, 10, 30, [0, 1, 2], 60.0, 5, 50
    lines = ["# Priority family (SLO-aware SA scheduler): scaling", "", machine_description(), "",
             f"Command: `python benchmarks/priority_scaling.py{' --quick' if args.quick else ''}`.  Instances: "
             "`generate_priority_problem` (Table 2 model, chat/code mix, SLO spread 0.5).  Exhaustive search is "
             f"cut at {cap:g} s; cut rows give an estimate extrapolated from the plans evaluated per second.", ""]
    lines += ["## numba JIT (excluded from the per-call times below)", ""]
    lines += jit_times()
    lines += ["", "## Exact vs exhaustive", "",
              "The exact method is what `--method exact` runs: warm start (best of SPF / EDF / FCFS; plus local search "
              "before the branch-and-bound), then the subset DP (b_max = 1, N ≤ 20) or the branch-and-bound.  "
              f"Exact times are medians of {repeats} runs and include the warm start; the speed-up divides the "
              "exhaustive time by that total.", ""]
    lines += exact_vs_exhaustive(sizes, b_maxes, cap, seed=3, repeats=repeats)
    headline_n = 8 if args.quick else 10
    lines += ["", f"### N = {headline_n}, b_max = 1 over several instances (even seeds: SLO spread 0.5; odd: the paper's "
              "constant SLOs)", ""]
    lines += exact_vs_exhaustive_seeds(headline_n, 1, [11, 12, 13] if args.quick else [11, 12, 13, 14, 15, 16], cap,
                                       repeats)
    lines += ["", f"## Exact optimum at N = {large_n} ({large_limit:g} s limit, `run_exact`, 1 thread)", "",
              "`--formulation auto` is what `--method exact` runs; `hybrid` (b_max ≥ 2) is the branch-and-bound for "
              "a quarter of the time then the Dinkelbach MILP, for comparison.  \"method that ran\" names what proved "
              "the row or gave its bound.", ""]
    large_methods = ["auto"] if args.quick else ["auto", "hybrid"]
    tally: list[bool] = []
    lines += exact_large(large_n, b_maxes, large_seeds, large_limit, large_methods, tally)
    if not args.quick:
        lines += ["", "More instances (seeds 3–5, `auto` only):", ""]
        lines += exact_large(large_n, b_maxes, [3, 4, 5], large_limit, ["auto"], tally)
    lines += ["", f"Target (exact optimum for N = {large_n} within {large_limit:g} s, `auto`, total wall time incl. "
              f"warm start): {sum(tally)} of {len(tally)} rows met."]
    lines += ["", "## SA wall time per call (compiled Alg. 1, paper defaults: 63 levels × 100 iterations = 6,300 "
              "iterations; inapplicable moves skip the evaluation)", ""]
    lines += sa_timing([10, 40], [1, 4], sa_repeats)
    lines += ["", f"## Gap to the exact optimum over {gap_count} random instances (N = {gap_n}, b_max cycling "
              f"{', '.join(map(str, b_maxes))}, half with SLO spread 0.5, half with the paper's constant SLOs)", ""]
    lines += sa_gap(gap_count, gap_n, b_maxes)
    lines += ["", f"Total benchmark time: {time.perf_counter() - started:.0f} s.", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
