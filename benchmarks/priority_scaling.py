"""Priority family benchmark: exact vs exhaustive, exact at N = 30, SA wall time, SA gap.

    python benchmarks/priority_scaling.py            # full run (~15–25 min on 2 shared cores)
    python benchmarks/priority_scaling.py --quick    # reduced run (< 2 min)

Instances are `generate_priority_problem` (paper setting: Table 2 latency model, equal chat/code
mix, SLOs 30 s e2e / 10 s TTFT / 50 ms TPOT), with per-job SLO spread 0.5 (heterogeneous SLOs)
unless stated.  Times are wall-clock seconds on this machine while other jobs share the CPU.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from planner.priority.exact import solve_exact
from planner.priority.exhaustive import compositions, exhaustive_search
from planner.priority.generator import generate_priority_problem
from planner.priority.heuristics import HEURISTICS, shortest_predicted_first, simulated_annealing
from planner.priority.solve import best_heuristic_plan, run_exact

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "priority_scaling.md"


def machine_line() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import highspy  # noqa: F401
        from importlib.metadata import version

        highs = version("highspy")
    except Exception:  # noqa: BLE001 - informative only
        highs = "n/a"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"Machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}, "
            f"highspy {highs} (not used: the exact method is a pure-Python branch-and-bound); "
            f"load average at start {load:.2f}.")


def exact_vs_exhaustive(sizes: list[int], b_maxes: list[int], cap: float, seed: int) -> list[str]:
    rows = ["| N | b_max | exhaustive (s) | exact B&B (s) | exact incl. warm start (s) | speed-up (B&B only) | same G |",
            "|---|---|---|---|---|---|---|"]
    for b_max in b_maxes:
        for n in sizes:
            problem = generate_priority_problem(n, b_max, seed, slo_spread=0.5)
            problem.tables  # noqa: B018 - build the tables outside the timings
            t0 = time.perf_counter()
            incumbent = best_heuristic_plan(problem, 0)
            warm = time.perf_counter() - t0
            outcome = solve_exact(problem, incumbent)
            total_plans = sum(1 for _ in compositions(n, b_max)) * float(np.prod(np.arange(1, n + 1)))
            t0 = time.perf_counter()
            plan, finished, evaluated = exhaustive_search(problem, time_limit=cap)
            exh = time.perf_counter() - t0
            if finished:
                exh_text = f"{exh:.3f}"
                same = "yes" if abs(plan.g - outcome.plan.g) <= 1e-9 * outcome.plan.g else "NO"
                speed = f"{exh / max(outcome.seconds, 1e-9):,.0f}×"
            else:
                estimate = exh * total_plans / max(evaluated, 1)
                exh_text = f"> {exh:.0f} (cut; est. {estimate:,.0f} from {evaluated:,} of {total_plans:,.0f} plans)"
                same = "n/a" if plan.g <= outcome.plan.g * (1 + 1e-9) else "NO"
                speed = f"≳ {estimate / max(outcome.seconds, 1e-9):,.0f}× (est.)"
            rows.append(f"| {n} | {b_max} | {exh_text} | {outcome.seconds:.4f} | {outcome.seconds + warm:.3f} | {speed} | {same} |")
            print(rows[-1], flush=True)
    return rows


def exact_vs_exhaustive_seeds(n: int, b_max: int, seeds: list[int], cap: float) -> list[str]:
    """The headline comparison over several instances (the paper's Table 1 point N = 10, b_max = 1)."""
    rows = ["| seed | exhaustive (s) | exact B&B (s) | exact incl. warm start (s) | speed-up B&B | speed-up incl. warm start | same G |",
            "|---|---|---|---|---|---|---|"]
    for seed in seeds:
        problem = generate_priority_problem(n, b_max, seed, slo_spread=0.5 if seed % 2 == 0 else 0.0)
        problem.tables  # noqa: B018
        t0 = time.perf_counter()
        incumbent = best_heuristic_plan(problem, 0)
        warm = time.perf_counter() - t0
        outcome = solve_exact(problem, incumbent)
        t0 = time.perf_counter()
        plan, finished, _ = exhaustive_search(problem, time_limit=cap)
        exh = time.perf_counter() - t0
        same = "yes" if finished and abs(plan.g - outcome.plan.g) <= 1e-9 * outcome.plan.g else ("n/a" if not finished else "NO")
        rows.append(f"| {seed} | {exh:.2f}{'' if finished else ' (cut)'} | {outcome.seconds:.4f} | {outcome.seconds + warm:.3f} | "
                    f"{exh / max(outcome.seconds, 1e-9):,.0f}× | {exh / (outcome.seconds + warm):,.0f}× | {same} |")
        print(rows[-1], flush=True)
    return rows


def exact_large(n: int, b_maxes: list[int], seeds: list[int], limit: float) -> list[str]:
    rows = [f"| N | b_max | seed | status | G* or best G | upper bound | gap | nodes | time (s) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for b_max in b_maxes:
        for seed in seeds:
            problem = generate_priority_problem(n, b_max, seed, slo_spread=0.5)
            t0 = time.perf_counter()
            result = run_exact(problem, time_limit=limit)
            took = time.perf_counter() - t0
            gap = result.gap
            rows.append(f"| {n} | {b_max} | {seed} | {result.status.value} | {result.objective:.6f} | {result.bound:.6f} | "
                        f"{100 * (gap or 0):.2f}% | {result.stats['nodes']:,} | {took:.1f} |")
            print(rows[-1], flush=True)
    return rows


def sa_timing(sizes: list[int], b_maxes: list[int], repeats: int) -> list[str]:
    """SA wall time on instances where SA really anneals (J_prio misses some SLO; otherwise
    Alg. 1 stops at once, as in the paper)."""
    rows = ["| N | b_max | instance seed | SA wall time per call, median (ms) | min (ms) | neighbour evaluations |",
            "|---|---|---|---|---|---|"]
    for n in sizes:
        for b_max in b_maxes:
            seed = 1
            problem = generate_priority_problem(n, b_max, seed, slo_spread=0.5)
            while shortest_predicted_first(problem).met == n and seed < 50:
                seed += 1
                problem = generate_priority_problem(n, b_max, seed, slo_spread=0.5)
            problem.tables  # noqa: B018
            times = []
            for r in range(repeats):
                t0 = time.perf_counter()
                simulated_annealing(problem, r)
                times.append(time.perf_counter() - t0)
            rows.append(f"| {n} | {b_max} | {seed} | {1000 * statistics.median(times):.1f} | {1000 * min(times):.1f} | "
                        "≤ 6 300 (63 levels × 100; inapplicable moves skip the evaluation) |")
            print(rows[-1], flush=True)
    return rows


def sa_gap(count: int, n: int, b_maxes: list[int]) -> list[str]:
    gaps: dict[str, list[float]] = {name: [] for name in HEURISTICS}
    optimal_hits = {name: 0 for name in HEURISTICS}
    for k in range(count):
        b_max = b_maxes[k % len(b_maxes)]
        problem = generate_priority_problem(n, b_max, 1000 + k, slo_spread=0.5 if k % 2 == 0 else 0.0)
        plans = {name: HEURISTICS[name](problem, 0) for name in HEURISTICS}
        outcome = solve_exact(problem, max(plans.values(), key=lambda p: p.g))
        assert outcome.proven
        for name, plan in plans.items():
            gap = (outcome.plan.g - plan.g) / outcome.plan.g if outcome.plan.g > 0 else 0.0
            gaps[name].append(gap)
            optimal_hits[name] += gap <= 1e-9
    rows = [f"| method | instances | mean gap to optimum | worst gap | optimal on |", "|---|---|---|---|---|"]
    for name, values in gaps.items():
        rows.append(f"| {name} | {len(values)} | {100 * statistics.mean(values):.2f}% | {100 * max(values):.2f}% | "
                    f"{optimal_hits[name]} |")
    print("\n".join(rows), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--quick", action="store_true", help="reduced run (< 2 minutes)")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.quick:
        sizes, b_maxes, cap, gap_count, gap_n, large_n, large_seeds, large_limit, repeats = \
            [4, 6, 8], [1, 2], 10.0, 12, 7, 20, [0], 20.0, 3
    else:
        sizes, b_maxes, cap, gap_count, gap_n, large_n, large_seeds, large_limit, repeats = \
            [4, 6, 8, 10], [1, 2, 4], 120.0, 100, 10, 30, [0, 1, 2], 60.0, 5
    lines = ["# Priority family (SLO-aware SA scheduler): scaling", "", machine_line(), "",
             f"Command: `python benchmarks/priority_scaling.py{' --quick' if args.quick else ''}`.  Instances: "
             "`generate_priority_problem` (Table 2 model, chat/code mix, SLO spread 0.5).  Exhaustive search is "
             f"cut at {cap:g} s; cut rows give an estimate extrapolated from the plans evaluated per second.", ""]
    lines += ["## Exact vs exhaustive", "", "The exact time is the branch-and-bound proving the optimum; the warm start "
              "(baselines + local search) is listed separately.", ""]
    lines += exact_vs_exhaustive(sizes, b_maxes, cap, seed=3)
    headline_n = 8 if args.quick else 10
    lines += ["", f"### N = {headline_n}, b_max = 1 over several instances (even seeds: SLO spread 0.5; odd: the paper's "
              "constant SLOs)", ""]
    lines += exact_vs_exhaustive_seeds(headline_n, 1, [11, 12, 13] if args.quick else [11, 12, 13, 14, 15, 16], cap)
    lines += ["", f"## Exact optimum at N = {large_n} ({large_limit:g} s limit)", ""]
    lines += exact_large(large_n, b_maxes, large_seeds, large_limit)
    lines += ["", "## SA wall time per call (Alg. 1, paper defaults: 63 levels × 100 iterations)", ""]
    lines += sa_timing([10, 40], [1, 4], repeats)
    lines += ["", f"## Gap to the exact optimum over {gap_count} random instances (N = {gap_n}, b_max cycling "
              f"{', '.join(map(str, b_maxes))}, half with SLO spread 0.5, half with the paper's constant SLOs)", ""]
    lines += sa_gap(gap_count, gap_n, b_maxes)
    lines += ["", f"Total benchmark time: {time.perf_counter() - started:.0f} s.", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
