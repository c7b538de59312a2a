"""Independent validator of priority plans: shares no code with the evaluator or the tables.

It re-reads the raw job data, recomputes every latency from the bilinear coefficients by the
*explicit* decode sum of Eq. 16 (``Σ_{k=1}^{l_o} τ_d(b, l_i + k)``, not the closed form the
tables use) or from the job's explicit ``exec_ms``/``prefill_ms`` table, replays the batches
one after the other (run-to-completion, Eq. 11), checks every SLO by its own definition
(Eqs. 7–9: e2e ≤ SLO; TTFT ≤ SLO and TPOT ≤ SLO) and recomputes n, t and G (req/s).

Structural checks: each instance's plan is a sequence of batches of sizes 1..b_max, the plans
together cover every job exactly once, and each batch's tokens fit ``token_capacity``.
"""

from __future__ import annotations

import numpy as np

from planner.core.result import ValidationReport, Violation
from planner.priority.problem import PriorityProblem, PrioritySchedule

_TOLERANCE_MS = 1e-7


def _latencies_ms(problem: PriorityProblem, job_index: int, batch_size: int) -> tuple[float, float]:
    """(t_exec, t_prefill) in ms of one job in a batch of ``batch_size``."""
    job = problem.jobs[job_index]
    if job.exec_ms is not None:
        prefill = job.prefill_ms[batch_size - 1] if job.prefill_ms is not None else 0.0
        return float(job.exec_ms[batch_size - 1]), float(prefill)
    model = problem.cost_model
    to_ms = 1000.0 if model.time_unit == "s" else 1.0
    p, d = model.prefill, model.decode
    b, li = float(batch_size), float(job.input_tokens)
    prefill = p.alpha * b * li + p.beta * b + p.gamma * li + p.delta
    context = li + np.arange(1, job.output_tokens + 1, dtype=float)  # accumulated lengths l_i + k
    decode = float(np.sum(d.alpha * b * context + d.beta * b + d.gamma * context + d.delta))
    return (prefill + decode) * to_ms, prefill * to_ms


def validate_schedule(problem: PriorityProblem, schedule: PrioritySchedule) -> ValidationReport:
    violations: list[Violation] = []
    seen: list[int] = []
    met = 0
    total = 0.0
    per_job: dict[str, dict] = {}
    for inst, plan in enumerate(schedule.plans):
        if sum(plan.batch_sizes) != len(plan.order):
            violations.append(Violation("batch_sizes", f"instance {inst}", sum(plan.batch_sizes), len(plan.order),
                                        f"instance {inst}: batch sizes sum to {sum(plan.batch_sizes)}, order has {len(plan.order)} jobs"))
            continue
        clock = 0.0
        start = 0
        for k, size in enumerate(plan.batch_sizes):
            members = plan.order[start:start + size]
            start += size
            if size > problem.b_max:
                violations.append(Violation("b_max", f"instance {inst}, batch {k}", size, problem.b_max,
                                            f"instance {inst} batch {k} has {size} jobs > b_max {problem.b_max}"))
                continue
            if any(not 0 <= j < problem.size for j in members):
                violations.append(Violation("job_index", f"instance {inst}, batch {k}", -1, problem.size,
                                            f"instance {inst} batch {k} names a job index outside 0..{problem.size - 1}"))
                continue
            tokens = sum(problem.jobs[j].input_tokens + problem.jobs[j].output_tokens for j in members)
            if problem.token_capacity is not None and tokens > problem.token_capacity:
                violations.append(Violation("token_capacity", f"instance {inst}, batch {k}", tokens, problem.token_capacity,
                                            f"instance {inst} batch {k} holds {tokens} tokens > capacity {problem.token_capacity}"))
            longest = 0.0
            for j in members:
                seen.append(j)
                job = problem.jobs[j]
                exec_ms, prefill_ms = _latencies_ms(problem, j, size)
                e2e = clock + exec_ms
                if job.kind == "e2e":
                    ok = e2e <= job.slo_e2e_ms + _TOLERANCE_MS
                else:
                    ttft = clock + prefill_ms
                    tpot = (exec_ms - prefill_ms) / job.output_tokens
                    ok = ttft <= job.slo_ttft_ms + _TOLERANCE_MS and tpot <= job.slo_tpot_ms + _TOLERANCE_MS
                met += int(ok)
                total += e2e
                longest = max(longest, exec_ms)
                per_job[job.name] = {"instance": inst, "batch": k, "wait_ms": clock, "e2e_ms": e2e, "slo_met": ok}
            clock += longest
    if sorted(seen) != list(range(problem.size)):
        missing = sorted(set(range(problem.size)) - set(seen))
        repeated = sorted({j for j in seen if seen.count(j) > 1})
        violations.append(Violation("cover", "plan", len(seen), problem.size,
                                    f"every job must be scheduled once (missing {missing}, repeated {repeated})"))
    g = 1000.0 * met / total if total > 0 else 0.0
    return ValidationReport(feasible=not violations, objective=g, violations=tuple(violations),
                            details={"slo_met": met, "total_latency_ms": total, "per_job": per_job})
