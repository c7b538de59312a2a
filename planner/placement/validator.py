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
    """The placement's violations, in this order, and its objective (the number of distinct workers).

    A solution that does not list the problem's requests in order, or leaves one unassigned, is not
    checked further (objective NaN).  Otherwise: no migration (request order), the worker cap, then per
    worker in label order its decode SLO, TTFT, prefill preemption and KV capacity.
    """
    violations = _check_assignment(problem, solution)
    if violations:
        return ValidationReport(False, float("nan"), tuple(violations))
    workers = np.asarray(solution.assignment, dtype=np.int64)
    kv_capacity_bytes = _kv_capacity_bytes(problem)
    violations += _check_no_migration(problem, workers)
    used = sorted(set(int(w) for w in workers))
    members_of: dict[int, list[int]] = {w: [] for w in used}  # one pass: O(N), not O(workers × N)
    for k, w in enumerate(workers.tolist()):
        members_of[w].append(k)
    violations += _check_max_workers(problem, used)
    per_worker: list[dict] = []
    for w in used:
        found, detail = _check_worker(problem, w, members_of[w], kv_capacity_bytes)
        violations += found
        per_worker.append(detail)
    return ValidationReport(not violations, float(len(used)), tuple(violations), {"per_worker": per_worker})


def _check_assignment(problem: PlacementProblem, solution: PlacementSolution) -> list[Violation]:
    """``assignment``: the solution lists exactly the problem's requests in order, each on a worker ≥ 0
    (the first failure only)."""
    ids = [r.request_id for r in problem.requests]
    if list(solution.request_ids) != ids:
        return [Violation("assignment", "solution", len(solution.request_ids), len(ids),
                          "the solution does not list exactly the problem's requests in order")]
    workers = np.asarray(solution.assignment, dtype=np.int64)
    if (workers < 0).any():
        k = int(np.flatnonzero(workers < 0)[0])
        return [Violation("assignment", f"request {ids[k]}", float(workers[k]), 0.0,
                          f"request {ids[k]} is not assigned to any worker")]
    return []


def _kv_capacity_bytes(problem: PlacementProblem) -> float:
    """θ·(g·u·M_GPU − M_model): the KV bytes one worker may hold."""
    return problem.options.kv_headroom * (
        problem.worker.tensor_parallel * problem.worker.memory_utilization * problem.worker.gpu.memory_gb * 1e9
        - problem.model.num_parameters * problem.model.dtype_bytes
    )


def _check_no_migration(problem: PlacementProblem, workers: np.ndarray) -> list[Violation]:
    """``no_migration``: every ongoing request stays on the worker it runs on."""
    out: list[Violation] = []
    for k, r in enumerate(problem.requests):
        state = problem.ongoing.get(r.request_id)
        if state is not None and state.worker != workers[k]:
            out.append(Violation("no_migration", f"request {r.request_id}", float(workers[k]), float(state.worker),
                                 f"ongoing request {r.request_id} moved from worker {state.worker} to {workers[k]}"))
    return out


def _check_max_workers(problem: PlacementProblem, used: list[int]) -> list[Violation]:
    """``max_workers``: the plan uses at most the optional worker cap."""
    cap = problem.options.max_workers
    if cap is not None and len(used) > cap:
        return [Violation("max_workers", "plan", len(used), cap,
                          f"plan uses {len(used)} workers, more than max_workers={cap}")]
    return []


def _generated(problem: PlacementProblem, k: int) -> int:
    """Tokens request k has generated so far (0 for a new request)."""
    state = problem.ongoing.get(problem.requests[k].request_id)
    return 0 if state is None else state.generated_tokens


def _check_worker(problem: PlacementProblem, w: int, members: list[int],
                  kv_capacity_bytes: float) -> tuple[list[Violation], dict]:
    """The per-worker constraints of worker ``w`` holding requests ``members`` (M2–M5), and its details row."""
    reqs, cost = problem.requests, problem.cost
    new = [k for k in members if reqs[k].request_id not in problem.ongoing]
    ongoing = [k for k in members if reqs[k].request_id in problem.ongoing]
    iteration, atgt = _decode_iteration(problem, members)
    out = _check_decode_slo(w, iteration, atgt)
    prefill = None
    if problem.options.mode == "colocated" and new:
        prefill = cost.prefill_s_per_token * sum(reqs[k].input_tokens for k in new) + cost.prefill_base_s
        out += _check_ttft(problem, w, new, prefill)
        if ongoing:
            out += _check_prefill_preemption(problem, w, ongoing, prefill)
    kv = _kv_per_iteration(problem, members)
    worst = int(np.argmax(kv))
    detail = {
        "worker": w,
        "requests": len(members),
        "new": len(new),
        "decode_iteration_s": iteration,
        "atgt_slo_s": atgt,
        "prefill_s": prefill,
        "kv_peak_fraction": float(kv[worst] / kv_capacity_bytes),
        "kv_peak_iteration": worst + 1,
    }
    return out + _check_kv_capacity(w, kv, worst, kv_capacity_bytes), detail


def _decode_iteration(problem: PlacementProblem, members: list[int]) -> tuple[float, float]:
    """(M2) the decode iteration time at the λ-weighted contexts of ``members``, and their tightest ATGT SLO."""
    reqs, cost, lam = problem.requests, problem.cost, problem.options.strictness
    weighted_context = sum(
        reqs[k].input_tokens + _generated(problem, k)
        + lam * max(reqs[k].predicted_output_tokens - _generated(problem, k), 0)
        for k in members
    )
    iteration = (
        cost.decode_s_per_request * len(members)
        + cost.decode_s_per_context_token * weighted_context
        + cost.decode_base_s
    )
    atgt = min(problem.slos.classes[reqs[k].slo_class].atgt_s for k in members)
    return iteration, atgt


def _check_decode_slo(w: int, iteration: float, atgt: float) -> list[Violation]:
    """``decode_slo`` (M2): the decode iteration meets the tightest ATGT SLO on the worker."""
    if iteration > atgt * (1 + REL_TOL):
        return [Violation("decode_slo", f"worker {w}", iteration, atgt,
                          f"worker {w}: decode iteration {iteration:.5f} s exceeds ATGT SLO {atgt:.5f} s")]
    return []


def _check_ttft(problem: PlacementProblem, w: int, new: list[int], prefill: float) -> list[Violation]:
    """``ttft`` (M3, colocated): the prefill batch of the new requests meets their tightest TTFT SLO."""
    ttft = min(problem.slos.classes[problem.requests[k].slo_class].ttft_s for k in new)
    if prefill > ttft * (1 + REL_TOL):
        return [Violation("ttft", f"worker {w}", prefill, ttft,
                          f"worker {w}: prefill batch {prefill:.4f} s exceeds TTFT SLO {ttft:.4f} s")]
    return []


def _check_prefill_preemption(problem: PlacementProblem, w: int, ongoing: list[int], prefill: float) -> list[Violation]:
    """``prefill_preemption`` (M4, colocated): the prefill fits in the ATGT slack of every ongoing request
    (``atgt·generated − decode time so far``)."""
    reqs = problem.requests
    slack = min(
        problem.slos.classes[reqs[k].slo_class].atgt_s * problem.ongoing[reqs[k].request_id].generated_tokens
        - problem.ongoing[reqs[k].request_id].decode_s
        for k in ongoing
    )
    if prefill > slack + REL_TOL * max(abs(slack), 1.0):
        return [Violation("prefill_preemption", f"worker {w}", prefill, slack,
                          f"worker {w}: prefill {prefill:.4f} s exceeds its ongoing requests' "
                          f"ATGT slack {slack:.4f} s")]
    return []


def _kv_per_iteration(problem: PlacementProblem, members: list[int]) -> np.ndarray:
    """(M5) the KV bytes held at every future iteration t = 1 … max remaining of ``members``."""
    reqs, cost = problem.requests, problem.cost
    remaining = np.array([max(reqs[k].predicted_output_tokens - _generated(problem, k), 1) for k in members])
    start_tokens = np.array([reqs[k].input_tokens + _generated(problem, k) for k in members], dtype=float)
    horizon = int(remaining.max())
    t = np.arange(1, horizon + 1)
    live = t[None, :] <= remaining[:, None]
    per_request = cost.kv_bytes_per_token * (start_tokens[:, None] + t[None, :] - 1) + cost.kv_bytes_base
    return (per_request * live).sum(axis=0)


def _check_kv_capacity(w: int, kv: np.ndarray, worst: int, kv_capacity_bytes: float) -> list[Violation]:
    """``kv_capacity`` (M5): the KV peak (iteration ``worst + 1``) fits in the worker's KV capacity."""
    if kv[worst] > kv_capacity_bytes * (1 + REL_TOL):
        return [Violation("kv_capacity", f"worker {w}, iteration {worst + 1}", float(kv[worst]), kv_capacity_bytes,
                          f"worker {w}: KV {kv[worst] / 1e9:.3f} GB at iteration {worst + 1} exceeds "
                          f"{kv_capacity_bytes / 1e9:.3f} GB")]
    return []
