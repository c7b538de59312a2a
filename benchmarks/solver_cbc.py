"""CBC (bundled with PuLP) against HiGHS on the models the families build for shipped instances.

For each instance the family's exact method runs once under HiGHS while every `LinearModel` it hands to
`planner.solver.solve` is recorded; each recorded model is then solved again by HiGHS and by CBC, alone,
with the same options (time limit, gap, node limit, warm start) and the per-model time limit below.
Per model the table gives its size, each solver's status, objective and seconds.  CBC's seconds include
writing the MPS file, starting the CBC process and reading its solution back; HiGHS's include handing
the matrix over in process.  The model build (the thin builder, shared by every solver) is timed once.
The end-to-end family run (load excluded; build, heuristics, solve and validation) is timed per solver.

Usage:  python benchmarks/solver_cbc.py [--time-limit 60] [--only placement,queueing] [--out FILE]

Timings depend on what else the machine runs: the machine line gives the load average at the start.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from machine_info import machine_line
from results_paths import add_output_options, output_path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: (family, instance): representative shipped instances whose exact method solves MILPs.
CASES = [
    ("placement", "instances/placement/sharegpt-70b-a100-n40.yaml"),
    ("placement", "instances/placement/azure-code-70b-h100-decode-n120.yaml"),
    ("queueing", "instances/queueing/trace-n60.yaml"),
    ("deployment", "instances/deployment/synthetic-6x4x10.yaml"),
    ("routing", "instances/routing/llama3-8b-v100-small.yaml"),
]


def _fmt(value, digits: int = 6) -> str:
    return "–" if value is None else f"{value:.{digits}g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per family run and per model solve")
    parser.add_argument("--only", default="", help="comma-separated families")
    add_output_options(parser, "solver_cbc")
    args = parser.parse_args()

    import planner.solver as solver_layer
    from planner.harness import RunOptions, available_families

    families = available_families()
    only = {f.strip() for f in args.only.split(",") if f.strip()}
    recorded: list = []
    original = solver_layer.solve

    def recording(model, solver="highs", options=None):
        recorded.append((model, options))
        return original(model, solver, options)

    lines = [f"Machine: {machine_line(('highspy', 'pulp', 'numpy'))}", "",
             f"Time limit {args.time_limit:g} s per family run and per model solve.", "",
             "| instance | model (cols / int / rows / nnz) | HiGHS | CBC | HiGHS s | CBC s |",
             "|---|---|---|---|---:|---:|"]
    end_to_end = ["", "| instance | solver | status | objective | bound | seconds (build+solve+validate) |",
                  "|---|---|---|---|---|---:|"]
    for family, path in CASES:
        if only and family not in only:
            continue
        harness = families[family]
        problem = harness.load(REPO / path)
        for name in ("highs", "cbc"):
            recorded.clear()
            for module in list(sys.modules.values()):  # every `from planner.solver import solve` in the families
                if str(getattr(module, "__name__", "")).startswith("planner.") and \
                        getattr(module, "solve", None) is original:
                    module.solve = recording
            try:
                start = time.perf_counter()
                result = harness.run(problem, harness.exact_method, RunOptions(solver=name, time_limit=args.time_limit))
                seconds = time.perf_counter() - start
            finally:
                for module in list(sys.modules.values()):
                    if str(getattr(module, "__name__", "")).startswith("planner.") and \
                            getattr(module, "solve", None) is recording:
                        module.solve = original
            end_to_end.append(f"| {Path(path).stem} | {name} | {result.status.value} | {_fmt(result.objective)} | "
                              f"{_fmt(result.bound)} | {seconds:.2f} |")
            if name != "highs":
                continue
            for model, options in list(recorded):
                opts = dataclasses.replace(options or solver_layer.SolveOptions(), progress=None, verbose=False,
                                           time_limit=min(args.time_limit, (options.time_limit if options and
                                                                            options.time_limit else args.time_limit)))
                runs = {s: original(model, s, opts) for s in ("highs", "cbc")}
                size = f"{model.num_cols} / {model.num_integer} / {model.num_rows} / {model.num_nonzeros}"
                cells = [f"{runs[s].status.value} {_fmt(runs[s].objective)}" for s in ("highs", "cbc")]
                lines.append(f"| {Path(path).stem} | {size} | {cells[0]} | {cells[1]} | "
                             f"{runs['highs'].seconds:.3f} | {runs['cbc'].seconds:.3f} |")
                print(lines[-1], flush=True)
    text = "\n".join(lines + end_to_end) + "\n"
    print(text)
    target = output_path(parser, args, "solver_cbc")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


if __name__ == "__main__":
    main()
