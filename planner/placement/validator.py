"""Independent validator of placements: shares no code with the formulation or the heuristics.

It reads the raw problem fields (requests, ongoing states, cost-model
coefficients, SLOs, knobs) and recomputes, for every worker of a placement:

* the decode iteration time at the λ-weighted contexts against the tightest
  ATGT SLO on the worker (M2);
* the prefill batch time of its new requests against their tightest TTFT SLO
  (M3) and against the slack of its ongoing requests (M4), colocated mode only;
* the KV bytes at **every** future iteration 1 … max remaining (not only at the
  breakpoints the formulation uses), against θ·(g·u·M_GPU − M_model) (M5);

plus assignment completeness, no migration of ongoing requests and the
optional worker cap.  The objective is the number of distinct workers used.
"""

from __future__ import annotations

import numpy as np

from planner.core.result import ValidationReport, Violation
from planner.placement.problem import PlacementProblem
from planner.placement.solution import PlacementSolution

#: Relative tolerance on every capacity comparison (the MIP solves with 1e-8 feasibility tolerance).
REL_TOL = 1e-7


def validate_placement(problem: PlacementProblem, solution: PlacementSolution) -> ValidationReport:
    violations: list[Violation] = []
    reqs = problem.requests
    ids = [r.request_id for r in reqs]
    if list(solution.request_ids) != ids:
        violations.append(
            Violation("assignment", "solution", len(solution.request_ids), len(ids),
                      "the solution does not list exactly the problem's requests in order")
        )
        return ValidationReport(False, float("nan"), tuple(violations))
    workers = np.asarray(solution.assignment, dtype=np.int64)
    if (workers < 0).any():
        k = int(np.flatnonzero(workers < 0)[0])
        violations.append(Violation("assignment", f"request {ids[k]}", float(workers[k]), 0.0,
                                    f"request {ids[k]} is not assigned to any worker"))
        return ValidationReport(False, float("nan"), tuple(violations))

    cost = problem.cost
    opts = problem.options
    lam = opts.strictness
    colocated = opts.mode == "colocated"
    kv_capacity_bytes = opts.kv_headroom * (
        problem.worker.tensor_parallel * problem.worker.memory_utilization * problem.worker.gpu.memory_gb * 1e9
        - problem.model.num_parameters * problem.model.dtype_bytes
    )

    for k, r in enumerate(reqs):
        state = problem.ongoing.get(r.request_id)
        if state is not None and state.worker != workers[k]:
            violations.append(Violation("no_migration", f"request {r.request_id}", float(workers[k]), float(state.worker),
                                        f"ongoing request {r.request_id} moved from worker {state.worker} to {workers[k]}"))

    used = sorted(set(int(w) for w in workers))
    members_of: dict[int, list[int]] = {w: [] for w in used}  # one pass: O(N), not O(workers × N)
    for k, w in enumerate(workers.tolist()):
        members_of[w].append(k)
    per_worker: list[dict] = []
    if opts.max_workers is not None and len(used) > opts.max_workers:
        violations.append(Violation("max_workers", "plan", len(used), opts.max_workers,
                                    f"plan uses {len(used)} workers, more than max_workers={opts.max_workers}"))

    for w in used:
        members = members_of[w]
        new = [k for k in members if reqs[k].request_id not in problem.ongoing]
        ongoing = [k for k in members if reqs[k].request_id in problem.ongoing]

        def generated(k: int) -> int:
            s = problem.ongoing.get(reqs[k].request_id)
            return 0 if s is None else s.generated_tokens

        # (M2) decode iteration at λ-weighted contexts
        weighted_context = sum(
            reqs[k].input_tokens + generated(k) + lam * max(reqs[k].predicted_output_tokens - generated(k), 0)
            for k in members
        )
        iteration = (
            cost.decode_s_per_request * len(members)
            + cost.decode_s_per_context_token * weighted_context
            + cost.decode_base_s
        )
        atgt = min(problem.slos.classes[reqs[k].slo_class].atgt_s for k in members)
        if iteration > atgt * (1 + REL_TOL):
            violations.append(Violation("decode_slo", f"worker {w}", iteration, atgt,
                                        f"worker {w}: decode iteration {iteration:.5f} s exceeds ATGT SLO {atgt:.5f} s"))

        if colocated and new:
            prefill = cost.prefill_s_per_token * sum(reqs[k].input_tokens for k in new) + cost.prefill_base_s
            ttft = min(problem.slos.classes[reqs[k].slo_class].ttft_s for k in new)
            if prefill > ttft * (1 + REL_TOL):
                violations.append(Violation("ttft", f"worker {w}", prefill, ttft,
                                            f"worker {w}: prefill batch {prefill:.4f} s exceeds TTFT SLO {ttft:.4f} s"))
            if ongoing:
                slack = min(
                    problem.slos.classes[reqs[k].slo_class].atgt_s * problem.ongoing[reqs[k].request_id].generated_tokens
                    - problem.ongoing[reqs[k].request_id].decode_s
                    for k in ongoing
                )
                if prefill > slack + REL_TOL * max(abs(slack), 1.0):
                    violations.append(Violation("prefill_preemption", f"worker {w}", prefill, slack,
                                                f"worker {w}: prefill {prefill:.4f} s exceeds its ongoing requests' "
                                                f"ATGT slack {slack:.4f} s"))

        # (M5) KV at every future iteration t = 1 … max remaining
        remaining = np.array([max(reqs[k].predicted_output_tokens - generated(k), 1) for k in members])
        start_tokens = np.array([reqs[k].input_tokens + generated(k) for k in members], dtype=float)
        horizon = int(remaining.max())
        t = np.arange(1, horizon + 1)
        live = t[None, :] <= remaining[:, None]
        kv = ((cost.kv_bytes_per_token * (start_tokens[:, None] + t[None, :] - 1) + cost.kv_bytes_base) * live).sum(axis=0)
        worst = int(np.argmax(kv))
        per_worker.append(
            {
                "worker": w,
                "requests": len(members),
                "new": len(new),
                "decode_iteration_s": iteration,
                "atgt_slo_s": atgt,
                "prefill_s": (cost.prefill_s_per_token * sum(reqs[k].input_tokens for k in new) + cost.prefill_base_s)
                if (colocated and new) else None,
                "kv_peak_fraction": float(kv[worst] / kv_capacity_bytes),
                "kv_peak_iteration": worst + 1,
            }
        )
        if kv[worst] > kv_capacity_bytes * (1 + REL_TOL):
            violations.append(Violation("kv_capacity", f"worker {w}, iteration {worst + 1}", float(kv[worst]), kv_capacity_bytes,
                                        f"worker {w}: KV {kv[worst] / 1e9:.3f} GB at iteration {worst + 1} exceeds "
                                        f"{kv_capacity_bytes / 1e9:.3f} GB"))

    return ValidationReport(not violations, float(len(used)), tuple(violations), {"per_worker": per_worker})
