"""Random priority instances in the paper's setting (§2.5).

An equal mix of chat jobs (TTFT + TPOT SLO; lengths from the ShareGPT distribution shipped under
``models/workloads/sharegpt.yaml``) and code jobs (e2e SLO; lengths from the Azure code trace,
``azure_code.yaml``, standing in for Python-Code-23k), shuffled, lengths < 2k tokens (the fitted
range of Table 2), predicted output = the sampled output.  Default SLOs are the paper's:
e2e 30 s, TTFT 10 s, TPOT 50 ms.  ``slo_spread`` > 0 multiplies each job's latency SLOs by a
factor drawn uniformly from [1 − spread, 1 + spread] (heterogeneous SLOs make the ordering
matter more; 0 reproduces the paper's constant SLOs).
"""

from __future__ import annotations

import numpy as np

from planner.costmodels.files import default_models_dir, load_cost_model
from planner.errors import PlannerError
from planner.priority.problem import PriorityProblem
from planner.workloads.streams import find_distribution

TABLE2_MODEL = "bilinear/qwen2.5-7b__v100-32gb-sxm2__tp2.yaml"
MAX_TOKENS = 2000


def generate_priority_problem(jobs: int, b_max: int, seed: int = 0, *, name: str | None = None,
                              slo_e2e_s: float = 30.0, slo_ttft_s: float = 10.0, slo_tpot_ms: float = 50.0,
                              slo_spread: float = 0.0, token_capacity: int | None = None,
                              chat_workload: str = "sharegpt", code_workload: str = "azure_code") -> PriorityProblem:
    if jobs < 1:
        raise PlannerError(f"jobs must be at least 1, got {jobs}")
    if not 0 <= slo_spread < 1:
        raise PlannerError(f"slo_spread must be in [0, 1), got {slo_spread}")
    rng = np.random.default_rng(seed)
    kinds = np.array(["chat", "e2e"] * ((jobs + 1) // 2))[:jobs]
    rng.shuffle(kinds)
    chat_in, chat_out = find_distribution(chat_workload).sample(jobs, rng, max_total_tokens=MAX_TOKENS)
    code_in, code_out = find_distribution(code_workload).sample(jobs, rng, max_total_tokens=MAX_TOKENS)
    factors = rng.uniform(1 - slo_spread, 1 + slo_spread, size=jobs) if slo_spread > 0 else np.ones(jobs)
    job_list = []
    for i, kind in enumerate(kinds):
        if kind == "chat":
            job_list.append({"name": f"j{i}", "kind": "chat", "input_tokens": int(chat_in[i]), "output_tokens": int(chat_out[i]),
                             "slo_ttft_ms": round(1000 * slo_ttft_s * factors[i], 3), "slo_tpot_ms": slo_tpot_ms, "arrival": i})
        else:
            job_list.append({"name": f"j{i}", "kind": "e2e", "input_tokens": int(code_in[i]), "output_tokens": int(code_out[i]),
                             "slo_e2e_ms": round(1000 * slo_e2e_s * factors[i], 3), "arrival": i})
    model = load_cost_model(default_models_dir() / TABLE2_MODEL)
    return PriorityProblem(name=name or f"random-n{jobs}-b{b_max}-s{seed}", jobs=tuple(job_list), b_max=b_max,
                           token_capacity=token_capacity, cost_model=model,
                           description=f"generated: seed {seed}, SLO spread {slo_spread}")
