"""Evaluation of a queue assignment behind one interface (`QueueEvaluator`).

`EstimatorEvaluator` plays the plan forward with the RWT estimator (the validator's replay of
start times, then ``completion = start + work + tail``) and reports SLO attainment per class
(share of requests whose group meets its SLO under the problem's deadline mode), model swaps,
queue drain time and output-token throughput.  `SimulatorEvaluator` implements the same
protocol with the batching family's iteration-level simulator (imported lazily).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from planner.queueing.problem import QueueAssignment, QueueingProblem


@dataclass(frozen=True)
class Evaluation:
    slo_attainment: dict[str, float]  # per SLO class: fraction of requests on time
    overall_attainment: float
    swaps: int
    drain_s: float
    throughput_tokens_per_s: float
    evaluator: str

    def to_dict(self) -> dict:
        return {"slo_attainment": self.slo_attainment, "overall_attainment": self.overall_attainment,
                "swaps": self.swaps, "drain_s": self.drain_s,
                "throughput_tokens_per_s": self.throughput_tokens_per_s, "evaluator": self.evaluator}


class QueueEvaluator(Protocol):
    name: str

    def evaluate(self, problem: QueueingProblem, plan: QueueAssignment) -> Evaluation: ...


class EstimatorEvaluator:
    """Plays the plan forward with the estimator's per-group times."""

    name = "estimator"

    def evaluate(self, problem: QueueingProblem, plan: QueueAssignment) -> Evaluation:
        on_time: dict[str, list[int]] = {}
        swaps, drain, tokens = 0, 0.0, 0.0
        for q, sequence in enumerate(plan.queues):
            queue = problem.queues[q]
            t = queue.type_index
            swap_s = problem.types[t].swap_time_s
            loaded, clock = queue.loaded_model, queue.busy_s
            for i in sequence:
                group = problem.groups[i]
                if group.model != loaded:
                    clock += swap_s
                    swaps += 1
                    loaded = group.model
                estimate = clock + (problem.work_s[t, i] + problem.tail_s[t, i] if problem.deadline == "completion" else 0.0)
                counts = on_time.setdefault(group.slo_class, [0, 0])
                counts[0] += group.num_requests if estimate <= group.slo_s + 1e-9 else 0
                counts[1] += group.num_requests
                drain = max(drain, clock + problem.work_s[t, i] + problem.tail_s[t, i])
                clock += problem.work_s[t, i]
                tokens += group.output_tokens
        attainment = {c: ok / total for c, (ok, total) in sorted(on_time.items())}
        total_ok = sum(v[0] for v in on_time.values())
        total = sum(v[1] for v in on_time.values())
        return Evaluation(attainment, total_ok / total if total else 1.0, swaps, float(drain),
                          float(tokens / drain) if drain > 0 else 0.0, self.name)


class SimulatorEvaluator:
    """Plays the plan through the batching family's iteration-level simulator (InferMax Alg. 1).

    Each queue is cut into runs of one model; each run is simulated from an empty instance (the
    model was just loaded) with every group's requests at its mean lengths, in queue order, all
    present at the run's start; a swap adds the instance type's swap time between runs.  A request
    meets its SLO when ``run offset + its simulated TTFT ≤ the group's SLO slack`` (QLM's SLOs are on
    TTFT).  The batch-time model is one `InferMaxCostModel` for every (model, instance type)
    (default: the batching family's default model), so this evaluator checks queueing effects
    (order, swaps, batching) rather than heterogeneity; give ``cost_models`` per (model, type name)
    to change that.  The batching package is imported lazily.
    """

    name = "simulator"

    def __init__(self, policy: str = "vllm", cost_models: dict | None = None, kv_tokens: int | None = None) -> None:
        self.policy = policy
        self.cost_models = dict(cost_models or {})
        self.kv_tokens = kv_tokens

    def _run(self, groups, cost, make_problem, simulate):
        inputs, outputs, owner = [], [], []
        for k, group in enumerate(groups):
            inputs += [max(1, round(group.mean_input_tokens))] * group.num_requests
            outputs += [max(1, round(group.mean_output_tokens))] * group.num_requests
            owner += [k] * group.num_requests
        limits = {"M": self.kv_tokens} if self.kv_tokens else {}
        kwargs = {"cost": cost} if cost is not None else {}
        sim = simulate(make_problem(inputs, outputs, name="queueing-run", **kwargs, **limits), self.policy)
        per = sim.schedule.per_request
        return per["ttft"], float(max(per["finish"])), owner

    def evaluate(self, problem: QueueingProblem, plan: QueueAssignment) -> Evaluation:
        from planner.batching.problem import make_problem
        from planner.batching.scheduler import simulate

        on_time: dict[str, list[int]] = {}
        swaps, drain, tokens = 0, 0.0, 0.0
        for q, sequence in enumerate(plan.queues):
            queue = problem.queues[q]
            typ = problem.types[queue.type_index]
            loaded, clock = queue.loaded_model, queue.busy_s
            runs: list[list[int]] = []
            for i in sequence:
                if runs and problem.groups[runs[-1][-1]].model == problem.groups[i].model:
                    runs[-1].append(i)
                else:
                    runs.append([i])
            for run in runs:
                model = problem.groups[run[0]].model
                if model != loaded:
                    clock += typ.swap_time_s
                    swaps += 1
                    loaded = model
                groups = [problem.groups[i] for i in run]
                ttft, makespan, owner = self._run(groups, self.cost_models.get((model, typ.name)), make_problem, simulate)
                for value, k in zip(ttft, owner):
                    group = groups[k]
                    counts = on_time.setdefault(group.slo_class, [0, 0])
                    counts[0] += int(clock + float(value) <= group.slo_s + 1e-9)
                    counts[1] += 1
                tokens += sum(g.num_requests * max(1, round(g.mean_output_tokens)) for g in groups)
                clock += makespan
            drain = max(drain, clock)
        attainment = {c: ok / total for c, (ok, total) in sorted(on_time.items())}
        total_ok = sum(v[0] for v in on_time.values())
        total = sum(v[1] for v in on_time.values())
        return Evaluation(attainment, total_ok / total if total else 1.0, swaps, float(drain),
                          float(tokens / drain) if drain > 0 else 0.0, self.name)


EVALUATORS = {"estimator": EstimatorEvaluator, "simulator": SimulatorEvaluator}
