"""TP choices across a cluster (docs/formulations.md §5.3, exhaustive search subject to Eq. 2).

Every machine group (machines of one type; they share a choice, as in the paper) is evaluated for
every TP degree dividing its accelerator count: Eq. 1–2 memory check, then the machine throughput
from the chosen estimator (Alg. 1 static batching, or the continuous-batching estimate).  Cluster
throughput is additive over machines, ``Σ_groups count·TP_machine(t_group)``; the ranked table lists
every combination of feasible per-group degrees exactly once, best first (ties: smaller degrees first).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from planner.core.result import Result
from planner.deployment.memory import DegreeCheck, check_degrees
from planner.deployment.problem import ClusterProblem, MachineGroup, model_key
from planner.deployment.throughput import continuous_capacity, static_throughput
from planner.deployment.validator import validate_tp_plan
from planner.errors import InfeasibleError, PlannerError
from planner.solver import SolveStatus

#: Relative difference between the enumeration's and the validator's tokens/s reported as a disagreement.
OBJECTIVE_TOLERANCE = 1e-6

#: Above this many combinations the table is cut to the best `MAX_RANKED` rows (the best is still exact).
MAX_COMBINATIONS = 2_000_000
MAX_RANKED = 1000


@dataclass(frozen=True)
class DegreeEstimate:
    """One (machine group, TP degree): memory check and estimated machine throughput (tokens/s)."""

    group: str
    gpu: str
    tensor_parallel: int
    instances_per_machine: int
    kv_size_gb: float
    feasible: bool
    reason: str
    tokens_per_s_machine: float = 0.0
    tokens_per_s_instance: float = 0.0
    estimator: str = ""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class EnumerationSolution:
    """The ranked TP configurations of a cluster and the best one."""

    groups: tuple[str, ...]
    estimates: tuple[DegreeEstimate, ...]
    ranked: tuple[tuple[tuple[int, ...], float], ...]  # (degree per group, cluster tokens/s)
    combinations: int
    method: str = "enumeration"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def best(self) -> tuple[tuple[int, ...], float]:
        return self.ranked[0]

    def to_dict(self) -> dict:
        degrees, tput = self.best
        return {
            "kind": "tp_ranked",  # read back as its best row: `planner.deployment.solution.TPPlan.from_dict`
            "method": self.method,
            "best": {"degrees": dict(zip(self.groups, degrees)), "tokens_per_s": tput},
            "combinations": combinations_text(self.combinations, EXACT_JSON_COMBINATIONS),
            "ranked": [{"degrees": dict(zip(self.groups, d)), "tokens_per_s": t} for d, t in self.ranked],
            "estimates": [e.to_dict() for e in self.estimates],
            "notes": list(self.notes),
        }


def _estimate(problem: ClusterProblem, group: MachineGroup, check: DegreeCheck) -> DegreeEstimate:
    base = dict(group=group.name, gpu=group.gpu.name, tensor_parallel=check.tensor_parallel,
                instances_per_machine=check.instances, kv_size_gb=check.kv_size_gb, estimator=problem.estimator)
    if not check.feasible:
        return DegreeEstimate(**base, feasible=False, reason=check.reason)
    key = model_key(group.gpu.name, check.tensor_parallel)
    kv_token = problem.model.kv_bytes_per_token
    if problem.estimator == "static":
        cost = problem.hetero_models.get(key)
        if cost is None:
            return DegreeEstimate(**base, feasible=False, reason="no p1..p8 model (fit one: planner fit --kind hetero)")
        est = static_throughput(cost, kv_size=check.kv_size_bytes, kv_per_token=kv_token,
                                inputs=np.asarray(problem.sample_inputs), outputs=np.asarray(problem.sample_outputs),
                                gpus_per_machine=group.gpus_per_machine, max_batch=problem.memory.max_batch)
        return DegreeEstimate(**base, feasible=True, reason="", tokens_per_s_machine=est.tokens_per_s_machine,
                              tokens_per_s_instance=est.tokens_per_s_instance)
    aladdin = problem.aladdin_models.get(key)
    if aladdin is None:
        return DegreeEstimate(**base, feasible=False, reason="no Aladdin cost model (fit one: planner fit)")
    cap = continuous_capacity(aladdin, kv_size=check.kv_size_bytes, kv_per_token=kv_token,
                              mean_input=float(np.mean(problem.sample_inputs)),
                              mean_output=float(np.mean(problem.sample_outputs)),
                              ttft_s=problem.ttft_s, atgt_s=problem.atgt_s, max_batch=problem.memory.max_batch)
    if not cap.feasible:
        return DegreeEstimate(**base, feasible=False, reason=cap.reason)
    return DegreeEstimate(**base, feasible=True, reason="", tokens_per_s_machine=cap.tokens_per_s * check.instances,
                          tokens_per_s_instance=cap.tokens_per_s)


def degree_estimates(problem: ClusterProblem) -> dict[str, list[DegreeEstimate]]:
    """Per machine group, every candidate degree with its memory check and throughput."""
    table: dict[str, list[DegreeEstimate]] = {}
    cache: dict[tuple[str, int, int], DegreeEstimate] = {}
    for group in problem.machines:
        degrees = [group.tensor_parallel] if group.tensor_parallel else None
        checks = check_degrees(problem.model, group.gpu, group.gpus_per_machine, max_input=problem.max_input,
                               max_output=problem.max_output, memory_utilization=problem.memory.memory_utilization,
                               engine_overhead_gb=problem.memory.engine_overhead_gb, degrees=degrees)
        rows = []
        for check in checks:
            key = (group.gpu.name, group.gpus_per_machine, check.tensor_parallel)
            if key not in cache:  # machines of one type and size share their estimate
                cache[key] = _estimate(problem, group, check)
            rows.append(DegreeEstimate(**{**cache[key].__dict__, "group": group.name}))
        table[group.name] = rows
    return table


def combinations_text(combos: int, exact_below: int = 10**12) -> int | str:
    """The count itself, or ``about 10^N`` from ``exact_below`` on (str() and JSON of a 4,300+ digit int fail)."""
    return combos if combos < exact_below else f"about 10^{int(math.log10(combos))}"


#: JSON keeps the exact count up to here (Python refuses str() of ints with more than 4,300 digits).
EXACT_JSON_COMBINATIONS = 10**4000


def enumerate_cluster(problem: ClusterProblem) -> tuple[EnumerationSolution, float]:
    """Every combination of feasible per-group degrees, ranked by cluster tokens/s; (solution, seconds)."""
    start = time.perf_counter()
    table = degree_estimates(problem)
    names = [g.name for g in problem.machines]
    if len(set(names)) != len(names):
        raise PlannerError("machine group names must be unique")
    choices, values = [], []
    for group in problem.machines:
        feasible = [e for e in table[group.name] if e.feasible]
        if not feasible:
            reasons = "; ".join(f"t={e.tensor_parallel}: {e.reason}" for e in table[group.name])
            raise InfeasibleError(f"{problem.model.name} fits on no TP degree of machine group "
                                  f"{group.name!r} ({group.gpu.name}): {reasons}")
        choices.append([e.tensor_parallel for e in feasible])
        values.append(np.array([e.tokens_per_s_machine * group.count for e in feasible]))
    combos = math.prod(len(c) for c in choices)  # a Python int: numpy int64 overflows beyond ~60 independent groups
    notes = []
    if combos > MAX_COMBINATIONS:
        # Additive objective: the best combination is the per-group best; the table is not enumerated.
        best = tuple(c[int(np.argmax(v))] for c, v in zip(choices, values))
        ranked = ((best, float(sum(v.max() for v in values))),)
        count = combinations_text(combos)
        notes.append(f"{count} combinations: only the best (per-group maximum, exact by additivity) is listed")
    else:
        totals = values[0]
        for v in values[1:]:
            totals = np.add.outer(totals, v)
        totals = np.asarray(totals).ravel()
        # stable sort of −total: ties keep C order = lexicographically smaller degree indices first
        order = np.argsort(-totals, kind="stable")[:MAX_RANKED]
        shape = [len(c) for c in choices]
        ranked = tuple(
            (tuple(choices[g][i] for g, i in enumerate(np.unravel_index(int(k), shape))), float(totals[k]))
            for k in order
        )
        if combos > MAX_RANKED:
            notes.append(f"{combos} combinations; the table shows the best {MAX_RANKED}")
    estimates = tuple(e for g in names for e in table[g])
    return EnumerationSolution(tuple(names), estimates, ranked, combos, notes=tuple(notes)), time.perf_counter() - start


def enumeration_result(problem: ClusterProblem, solution: EnumerationSolution | None = None,
                       seconds: float = 0.0) -> Result[EnumerationSolution]:
    """The enumeration (run here unless ``solution`` is given) as a `Result`, with the independent
    validator's verdict on the best plan; a rejected plan is an ERROR, a recomputed tokens/s that differs
    by more than `OBJECTIVE_TOLERANCE` (relative) is named in the message; within it, the objective (and
    bound) is the validator's recomputation (the two sum the same terms in another order)."""
    if solution is None:
        solution, seconds = enumerate_cluster(problem)
    degrees, best = solution.best
    report = validate_tp_plan(problem, degrees)
    messages = list(solution.notes)
    status = SolveStatus.OPTIMAL
    if not report.feasible:
        status = SolveStatus.ERROR
        messages.append(f"validator rejects the best plan: {report.summary()}")
    elif not abs(report.objective - best) <= OBJECTIVE_TOLERANCE * max(abs(best), abs(report.objective)):
        messages.append(f"enumeration tokens/s {best:.9g} differs from the validator's {report.objective:.9g}")
    else:  # agreed: the validator's sum, so that a baseline with the same degrees scores exactly the same
        best = report.objective
    return Result(family="deployment-tp", method="enumeration", solver="enumeration", status=status, objective=best, bound=best, solve_seconds=seconds, solution=solution,
                  bound_source="exhaustive enumeration", message="; ".join(messages), validation=report,
                  stats={"combinations": combinations_text(solution.combinations, EXACT_JSON_COMBINATIONS),
                         "estimator": problem.estimator})
