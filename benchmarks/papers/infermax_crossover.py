"""InferMax §3.4 ("Are evictions always evil?"): where evicting vLLM stops beating eviction-free vLLM.

Setting of the paper's §4.5 experiment: B = 4 requests, all with input I and output O = 4, KV budget
M = max(2I, I + O − 1) (two prefills fit, only one request can keep its KV to the last token),
C = 4096; I swept.  For each I both presets (`vllm`, `vllm-ef`) are simulated and their schedules
re-scored by the independent validator (`planner.batching.pipeline.run_scheduler`); the objective is
total latency.  The crossover is the first I of the sweep at which the eviction-free schedule is
no slower.  The paper states it for its CSP optimum and for vLLM: evictions for I < 128, none for
I ≥ 128 (its sweep is in powers of two).

``--cost-model`` picks the batch-time model: ``7b`` (the published §3.2 7B set, default), ``70b``,
or a model file, e.g. ``models/infermax/llama-2-7b__a100-80gb-sxm__tp1.yaml`` (the project's set, derived
from the batch-time model of the Vidur profiles the paper's own coefficients come from).  ``--set COEF=VALUE``
overrides one coefficient, to see which one moves the crossover (e.g. the derived set with the published b_o).

Usage:  python benchmarks/papers/infermax_crossover.py [--cost-model 7b|70b|FILE] [--inputs 1,2,4,...]
        [--set COEF=VALUE ...] [--out FILE | --update-results]
(stdout; the table also goes to benchmarks/_runs/papers_infermax_crossover_<cost model>.md unless --out /
--update-results, which writes the committed benchmarks/results/papers_infermax_crossover_<cost model>.md,
<cost model> = 7b, 70b or the model file's stem).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from results_paths import add_output_options, command_args, output_path  # noqa: E402

from planner.batching.costmodel import PUBLISHED, load_infermax_model  # noqa: E402
from planner.batching.problem import make_problem  # noqa: E402
from planner.batching.pipeline import run_scheduler  # noqa: E402

COEFFICIENTS = ("a_o", "b_o", "a_p", "b_p", "s_p", "a_d", "b_d", "s_d")
DEFAULT_INPUTS = "1,2,4,8,16,24,32,40,48,56,64,80,96,112,128,160,192,256,512,1024"


def resolve(cost_model: str):
    key = cost_model.lower().removeprefix("infermax-")
    if key in PUBLISHED:
        return PUBLISHED[key], f"published §3.2 set '{key}' ({PUBLISHED[key].provenance})"
    path = Path(cost_model)
    if not path.is_file():
        raise SystemExit(f"--cost-model: {cost_model!r} is neither a published set ({', '.join(PUBLISHED)}) "
                         "nor an existing file")
    model = load_infermax_model(path)
    return model, f"{path} ({model.provenance.splitlines()[0][:160]})"


def sweep(cost, inputs: list[int], output: int, count: int) -> tuple[list[str], int | None]:
    head = "| I | M | vLLM (evicting) s | vLLM-ef s | evictions | batches evict / ef | faster |"
    rows = [head, "|---|---|---|---|---|---|---|"]
    crossover = None
    for I in inputs:
        M = max(2 * I, I + output - 1)
        problem = make_problem([I] * count, [output] * count, M=M, C=4096, cost=cost)
        ev, ef = run_scheduler(problem, "vllm"), run_scheduler(problem, "vllm-ef")
        n_ev, n_ef = len(ev.solution.batches()), len(ef.solution.batches())
        faster = "evicting" if ev.objective < ef.objective else "eviction-free"
        if faster == "eviction-free" and crossover is None:
            crossover = I
        rows.append(f"| {I} | {M} | {ev.objective:.5f} | {ef.objective:.5f} | "
                    f"{int(ev.solution.metrics['evictions'])} | {n_ev} / {n_ef} | {faster} |")
    return rows, crossover



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost-model", default="7b", help="7b, 70b or an infermax model file (default 7b)")
    parser.add_argument("--inputs", default=DEFAULT_INPUTS, help="comma-separated input lengths I to sweep")
    parser.add_argument("--output-len", type=int, default=4, help="O (default 4, the paper's)")
    parser.add_argument("--requests", type=int, default=4, help="B (default 4, the paper's)")
    parser.add_argument("--set", action="append", metavar="COEF=VALUE",
                        help="override one coefficient (ms per layer), e.g. --set b_o=0.06486; repeatable")
    add_output_options(parser, "papers_infermax_crossover_<cost model>")
    args = parser.parse_args()
    try:
        inputs = sorted({int(x) for x in args.inputs.split(",")})
    except ValueError:
        parser.error(f"--inputs must be comma-separated integers, got {args.inputs!r}")
    if inputs[0] < 1 or args.output_len < 1 or args.requests < 1:
        parser.error("--inputs, --output-len and --requests must be positive")
    cost, label = resolve(args.cost_model)
    stem = "papers_infermax_crossover_" + Path(args.cost_model).stem.lower().removeprefix("infermax-")
    stem += "".join(f"_{item.replace('=', '-')}" for item in args.set or [])
    out = output_path(parser, args, stem)
    overrides = {}
    for item in args.set or []:
        key, _, value = item.partition("=")
        if key not in COEFFICIENTS:
            parser.error(f"--set {item!r}: the coefficient must be one of {', '.join(COEFFICIENTS)}")
        try:
            overrides[key] = float(value)
        except ValueError:
            parser.error(f"--set {item!r}: the value must be a number")
    if overrides:
        cost = cost.model_copy(update=overrides)
        label += f"; overridden: {', '.join(f'{k}={v:g}' for k, v in overrides.items())}"
    rows, crossover = sweep(cost, inputs, args.output_len, args.requests)
    before = [i for i in inputs if crossover is None or i < crossover]
    verdict = (f"crossover: evicting vLLM is faster up to I = {before[-1]}, eviction-free from I = {crossover}"
               if crossover is not None and before else
               f"crossover: eviction-free is no slower already at I = {crossover}" if crossover is not None else
               f"crossover: evicting vLLM is faster at every I swept (up to {inputs[-1]})")
    coef = (f"coefficients (ms per layer): a_o={cost.a_o:g} b_o={cost.b_o:g} a_p={cost.a_p:g} b_p={cost.b_p:g} "
            f"s_p={cost.s_p:g} a_d={cost.a_d:g} b_d={cost.b_d:g} s_d={cost.s_d:g}, {cost.n_layers} layers")
    lines = ["# InferMax §3.4: evicting vLLM vs eviction-free vLLM (total latency, validator-scored)", "",
             f"Command: `python benchmarks/papers/infermax_crossover.py{command_args()}`.  "
             f"B = {args.requests}, O = {args.output_len}, M = max(2I, I+O−1), C = 4096.", "",
             f"Cost model: {label}", "", coef, "", *rows, "", verdict, ""]
    print("\n".join(lines))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
