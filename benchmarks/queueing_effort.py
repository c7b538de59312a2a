"""Calibrate the nominal-seconds constants of `planner.queueing.effort` on this machine.

The certified queueing pipeline decides its phases on nominal seconds (work counts × constants,
`planner.core.work.WorkClock`) so that a time-limited solve is repeatable.  This script measures, on
random instances (`planner.queueing.generator.random_problem`, groups × queues over the scaling
grid), the wall time of each kind of step next to its work counts, fits each constant by least
squares (through the origin), and prints for every kind of step the fitted constant, the shipped
constant and the spread of wall / nominal under the shipped constants (median, 90th percentile,
max).  Shipped constants are meant to sit at or above the 90th percentile, so that on the reference
machine the nominal clock runs ahead of the wall clock and the wall-clock guard never fires.

Each count is read by setting the constant of interest to 1 and the others to 0 for one call (the
effort functions read the module's constants when called), then restoring them.

Usage:  python benchmarks/queueing_effort.py [--groups 25,50,100,200,400] [--queues 2,4,8] [--seeds 0,1]
        [--out FILE | --update-results]   (default: benchmarks/_runs/queueing_effort.md, git-ignored)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from machine_info import machine_line
from results_paths import add_output_options, output_path
from scipy.optimize import nnls

from planner.core.work import WorkClock
from planner.queueing import effort
from planner.queueing.bounds import relaxation_data, swap_assignment_bound
from planner.queueing.certified import kept_cells
from planner.queueing.generator import random_problem
from planner.queueing.heuristics import HEURISTICS
from planner.queueing.lagrangian import solve_split_assignment, split_assignment_value
from planner.queueing.lagrangian_fixing import lagrangian_reduced_costs
from planner.queueing.local_search import improve_plan
from planner.queueing.reduced_slots import build_reduced_slots
from planner.queueing.validator import validate_assignment

REPO = Path(__file__).resolve().parents[1]
CONSTANTS = ("EVALUATION", "SCAN", "PROFILE", "SEARCH_SETUP_PER_GROUP", "REPLAY_PER_GROUP", "ASSIGNMENT_STEP", "MATRIX_CELL",
             "ASSIGNMENT_SETUP_PER_ROW", "FIXING_CELL", "FIXING_PER_GROUP", "MILP_BUILD_PER_CELL", "BASELINE_PER_GROUP",
             "BASELINE_PER_CELL")


def counted(constant: str, call):
    """(result, wall seconds, count) of ``call(clock)`` with only ``constant`` set (to 1)."""
    saved = {name: getattr(effort, name) for name in CONSTANTS}
    try:
        for name in CONSTANTS:
            setattr(effort, name, 1.0 if name == constant else 0.0)
        clock = WorkClock(None)
        t0 = time.perf_counter()
        result = call(clock)
        seconds = time.perf_counter() - t0
    finally:
        for name, value in saved.items():
            setattr(effort, name, value)
    return result, seconds, clock.spent


def shipped_nominal(call) -> tuple[object, float, float]:
    """(result, wall seconds, nominal seconds with the shipped constants) of ``call(clock)``."""
    clock = WorkClock(None)
    t0 = time.perf_counter()
    result = call(clock)
    return result, time.perf_counter() - t0, clock.spent


def measure(problem, samples: dict[str, list]) -> None:
    n, g = problem.num_groups, problem.num_queues
    t0 = time.perf_counter()
    starts = [HEURISTICS[name](problem) for name in HEURISTICS]
    for plan in starts:
        validate_assignment(problem, plan)
    samples["baselines"].append((time.perf_counter() - t0, [n, n * g], effort.baseline_seconds(g, n)))
    rng = np.random.default_rng(0)
    for start in starts:  # descents from the baselines and from random kicks of them (ILS-like, 4 passes)
        for passes in (100, 4):
            plan = start
            if passes == 4:
                sequences = [list(q) for q in start.queues]
                for _ in range(5):
                    a = int(rng.integers(g))
                    if sequences[a]:
                        group = sequences[a].pop(int(rng.integers(len(sequences[a]))))
                        b = int(rng.integers(g))
                        sequences[b].insert(int(rng.integers(len(sequences[b]) + 1)), group)
                plan = type(start).of(problem, sequences, "kick")
            def descend(c, plan=plan, passes=passes):
                return improve_plan(problem, plan, max_passes=passes, clock=c)
            counts = [counted(name, descend)[2] for name in ("EVALUATION", "SCAN", "PROFILE")]
            _, wall, nominal = shipped_nominal(descend)
            samples["descent"].append((wall, counts + [n], nominal))
    t0 = time.perf_counter()
    for plan in starts:
        validate_assignment(problem, plan)
    samples["validation"].append(((time.perf_counter() - t0) / len(starts), [n], effort.replay_seconds(n)))
    def bound_call(c):
        return swap_assignment_bound(problem, clock=c)
    counts = [counted(name, bound_call)[2] for name in ("ASSIGNMENT_STEP", "MATRIX_CELL", "ASSIGNMENT_SETUP_PER_ROW")]
    bound, wall, nominal = shipped_nominal(bound_call)
    samples["assignment"].append((wall, counts, nominal))
    data = relaxation_data(problem)
    if data is None or bound is None:
        return
    slack = data.slo - data.base.min(axis=0)
    tight = np.argsort(slack)[: max(n // 10, 1)]
    for level in (1, 2, 4):  # split assignments as in the deadline Lagrangian's rounds
        pieces_of = np.ones(n, dtype=np.int64)
        pieces_of[tight] += level
        def split_call(c, pieces_of=pieces_of):
            return split_assignment_value(data, pieces_of, clock=c, with_plan=True)
        counts = [counted(name, split_call)[2] for name in ("ASSIGNMENT_STEP", "MATRIX_CELL", "ASSIGNMENT_SETUP_PER_ROW")]
        _, wall, nominal = shipped_nominal(split_call)
        samples["assignment"].append((wall, counts, nominal))
        multipliers = pieces_of - 1
        def fixing_call(c, multipliers=multipliers):
            return lagrangian_reduced_costs(data, multipliers, n, clock=c)
        counts = [counted(name, fixing_call)[2] for name in ("FIXING_CELL", "FIXING_PER_GROUP")]
        # the split assignment inside it is charged as an assignment: subtract its time (each the
        # least of three runs, to keep timer noise out of the difference) and its nominal seconds
        runs = [shipped_nominal(fixing_call) for _ in range(3)]
        splits = [shipped_nominal(lambda c, pieces_of=pieces_of: solve_split_assignment(data, pieces_of, clock=c))
                  for _ in range(3)]
        wall = min(r[1] for r in runs) - min(r[1] for r in splits)
        if wall > 0.0:
            samples["fixing"].append((wall, counts, runs[0][2] - splits[0][2]))
    best = min(starts, key=lambda p: validate_assignment(problem, p).objective)
    upper = validate_assignment(problem, best).objective
    cells = kept_cells(problem, bound, upper + 0.02 * abs(bound.value))
    if 0 < len(cells) <= 60_000:
        t0 = time.perf_counter()
        build_reduced_slots(problem, cells)
        samples["milp build"].append((time.perf_counter() - t0, [len(cells)], effort.milp_build_seconds(len(cells))))


def fit(rows: list) -> np.ndarray:
    """Non-negative constants minimising the squared *relative* error Σ (nominal / wall − 1)²."""
    wall = np.array([r[0] for r in rows])
    features = np.array([r[1] for r in rows], dtype=float) / np.maximum(wall, 1e-9)[:, None]
    coefficients, _ = nnls(features, np.ones(len(rows)))
    return coefficients


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default="25,50,100,200,400")
    parser.add_argument("--queues", default="2,4,8")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--raw", action="store_true", help="also list every sample")
    add_output_options(parser, "queueing_effort")
    args = parser.parse_args()
    out_path = output_path(parser, args, "queueing_effort")
    warm = random_problem(12, 2, seed=0)  # numba: compile / load the cache outside the measurements
    measure(warm, {k: [] for k in ("baselines", "descent", "validation", "assignment", "fixing", "milp build")})
    samples: dict[str, list] = {k: [] for k in ("baselines", "descent", "validation", "assignment", "fixing", "milp build")}
    for n in (int(x) for x in args.groups.split(",")):
        for g in (int(x) for x in args.queues.split(",")):
            for seed in (int(x) for x in args.seeds.split(",")):
                measure(random_problem(n, g, seed=seed), samples)
    names = {"baselines": ("BASELINE_PER_GROUP", "BASELINE_PER_CELL"),
             "descent": ("EVALUATION", "SCAN", "PROFILE", "SEARCH_SETUP_PER_GROUP"),
             "validation": ("REPLAY_PER_GROUP",), "assignment": ("ASSIGNMENT_STEP", "MATRIX_CELL", "ASSIGNMENT_SETUP_PER_ROW"),
             "fixing": ("FIXING_CELL", "FIXING_PER_GROUP"), "milp build": ("MILP_BUILD_PER_CELL",)}
    lines = ["# Queueing effort calibration (nominal seconds of `planner.queueing.effort`)", "",
             f"Machine: {machine_line()}.", "",
             (f"Instances: random_problem over groups {args.groups} × queues {args.queues}, seeds {args.seeds}.  "
              "`wall / nominal` uses the shipped constants: ≤ 1 means the nominal clock runs ahead of the wall clock."), "",
             ("| step | samples | fitted constants | shipped constants | wall / nominal: median | p90 | max | "
              "wall / fitted: range | total wall s |"),
             "|---|---:|---|---|---:|---:|---:|---|---:|"]
    for kind, rows in samples.items():
        if not rows:
            continue
        fitted = fit(rows)
        ratio = np.array([r[0] / r[2] for r in rows if r[2] > 0])
        fitted_ratio = np.array([r[0] / max(float(np.dot(fitted, r[1])), 1e-12) for r in rows])
        shipped = ", ".join(f"{name} = {getattr(effort, name):.3g}" for name in names[kind])
        fitted_text = ", ".join(f"{name} = {value:.3g}" for name, value in zip(names[kind], fitted))
        lines.append(f"| {kind} | {len(rows)} | {fitted_text} | {shipped} | {np.median(ratio):.2f} | "
                     f"{np.percentile(ratio, 90):.2f} | {ratio.max():.2f} | {fitted_ratio.min():.2f}–{fitted_ratio.max():.2f} | "
                     f"{sum(r[0] for r in rows):.2f} |")
    if args.raw:
        lines += ["", "Raw samples (wall s, counts, nominal s):", ""]
        lines += [f"- {kind}: {wall:.5f} {counts} {nominal:.5f}" for kind, rows in samples.items()
                  for wall, counts, nominal in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(text)


if __name__ == "__main__":
    main()
