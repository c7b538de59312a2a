"""Problem data of the SLO-aware priority scheduler (docs/formulations.md §2.1–2.3).

A `PriorityProblem` is a set of jobs waiting on one inference instance.  A plan is a priority
order (a permutation) cut into contiguous batches of sizes ``1 ≤ b_k ≤ b_max`` (and, when a
``token_capacity`` is given, ``Σ_{i∈k}(l_i + l_o,i) ≤ token_capacity``, Eq. 20 [R]).

Latencies come either from the bilinear model of Eqs. 14–16 (``cost_model``, e.g. the paper's
Table 2 shipped as ``models/bilinear/qwen2.5-7b__v100-32gb-sxm2__tp2.yaml``) or, for hand-made
toy instances such as Figs. 3–4 of the paper, from an explicit per-job table ``exec_ms`` /
``prefill_ms`` indexed by batch size.  Everything is in milliseconds; G is reported in
requests per second (G = 1000·n / t_ms).

`LatencyTables` (``problem.tables``) precomputes, per job i and batch size b, the execution time
``exec_ms[i, b-1]`` (Eq. 17) and the *slack* ``slack_ms[i, b-1]``: the latest batch start time at
which job i still meets its SLO when run in a batch of size b (``t_SLO-e2e − t_exec`` for e2e jobs,
``t_SLO-TTFT − t_prefill`` for chat jobs, −∞ when the TPOT SLO fails at that size, Eq. 7/9).
Every method (evaluator, SA, exhaustive, exact) reads these tables; the validator does not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from planner.core.io import MAX_REQUEST_TOKENS, NotBool
from planner.core.types import Frozen
from planner.costmodels.models import BilinearCostModel

SUCCESS_TOLERANCE_MS = 1e-7
"""A job meets its SLO when ``wait ≤ slack + SUCCESS_TOLERANCE_MS`` (guards float round-off)."""

MAX_JOB_TOKENS = MAX_REQUEST_TOKENS
"""Upper limit on a job's input and output length: far beyond any model context, and it keeps the
validator's per-token arrays small (a typo such as 10**12 tokens is an error, not a MemoryError)."""


MAX_LATENCY_MS = 1e12
"""Largest entry of an explicit ``exec_ms`` / ``prefill_ms`` table (about 32 years): far above any real
latency, far below the float range, so that sums of latencies over many jobs stay finite (an infinite
latency made G = 0 and the TPOT of Eq. 19 NaN)."""


class FieldError(ValueError):
    """A validation problem of one named field (relative to the model that raises it); the loader
    turns it into ``<file>: <field>: <problem>`` instead of echoing the whole input."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


Count = Annotated[PositiveInt, NotBool]
Tokens = Annotated[PositiveInt, NotBool]
Millis = Annotated[PositiveFloat, NotBool]

SLO_FIELDS = {"e2e": ("slo_e2e_ms",), "chat": ("slo_ttft_ms", "slo_tpot_ms")}
"""The SLOs each kind of job is judged by (Eq. 5); the others must not be given."""


class PriorityJob(Frozen):
    """One request: its SLO type (Eq. 5), lengths and SLOs (ms).  An SLO of ``.inf`` (YAML) is accepted on
    purpose: a best-effort job that can never miss it (it still counts as met in G)."""

    name: str = Field(min_length=1)
    kind: Literal["e2e", "chat"] = Field(description="e2e: end-to-end SLO (h=1, code); chat: TTFT+TPOT SLO (h=0)")
    input_tokens: Tokens
    output_tokens: Tokens = Field(description="predicted output length l_o")
    slo_e2e_ms: Millis | None = None
    slo_ttft_ms: Millis | None = None
    slo_tpot_ms: Millis | None = None
    arrival: Annotated[NonNegativeInt, NotBool] = Field(0, description="arrival rank (FCFS order); ties broken by position")
    exec_ms: tuple[Millis, ...] | None = Field(None, description="explicit t_exec by batch size 1.. (toy instances)")
    prefill_ms: tuple[Millis, ...] | None = Field(None, description="explicit t_prefill by batch size 1..")

    @field_validator("input_tokens", "output_tokens")
    @classmethod
    def _length_in_reach(cls, value: int) -> int:
        if value > MAX_JOB_TOKENS:
            raise ValueError(f"must be at most {MAX_JOB_TOKENS:,} tokens, got {value:,}")
        return value

    @field_validator("exec_ms", "prefill_ms")
    @classmethod
    def _finite_latencies(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
        for k, ms in enumerate(value or ()):
            if not (math.isfinite(ms) and ms <= MAX_LATENCY_MS):
                raise ValueError(f"entry {k} (batch size {k + 1}) must be a finite number of at most "
                                 f"{MAX_LATENCY_MS:g} ms, got {ms:g}")
        return value

    @model_validator(mode="after")
    def _slos_match_kind(self) -> "PriorityJob":
        this_job = "an e2e job" if self.kind == "e2e" else "a chat job"
        own = SLO_FIELDS[self.kind]
        foreign = [key for keys in SLO_FIELDS.values() for key in keys if key not in own]
        for key in own:
            if getattr(self, key) is None:
                raise FieldError(key, f"required for {this_job}")
        for key in foreign:
            if getattr(self, key) is not None:
                raise FieldError(key, f"does not apply to {this_job} (judged by {' and '.join(own)}); "
                                      "remove it or change kind")
        if self.prefill_ms is not None and self.exec_ms is None:
            raise FieldError("prefill_ms", "is given without exec_ms")
        if self.exec_ms is not None and self.prefill_ms is not None:
            if len(self.prefill_ms) != len(self.exec_ms):
                raise FieldError("prefill_ms", f"lists {len(self.prefill_ms)} batch sizes, exec_ms lists {len(self.exec_ms)}")
            if any(p > e for p, e in zip(self.prefill_ms, self.exec_ms)):
                raise FieldError("prefill_ms", "exceeds exec_ms at some batch size")
        if self.kind == "chat" and self.exec_ms is not None and self.prefill_ms is None:
            raise FieldError("prefill_ms", "required for a chat job with an explicit exec_ms table")
        return self

    @property
    def tokens(self) -> int:
        """KV tokens the job holds at its end: l_i + l_o (Eq. 20 memory accounting)."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class LatencyTables:
    """Per job × batch size arrays (ms) that every search method reads."""

    exec_ms: np.ndarray  # (N, b_max) t_exec(b, l_i, l_o), Eq. 17
    prefill_ms: np.ndarray  # (N, b_max) t_p(b, l_i), Eq. 14/18
    slack_ms: np.ndarray  # (N, b_max) latest batch start meeting the SLO; -inf if impossible at b
    tokens: np.ndarray  # (N,) l_i + l_o

    @property
    def jobs(self) -> int:
        return int(self.exec_ms.shape[0])


class PriorityProblem(Frozen):
    """Jobs queued on one instance, the maximum batch size and the latency model."""

    name: str = Field(min_length=1)
    description: str = ""
    jobs: tuple[PriorityJob, ...] = Field(min_length=1)
    b_max: Count = Field(description="stored as min(b_max, N): larger batches than jobs cannot occur")
    token_capacity: Count | None = Field(None, description="Eq. 20 token_num(M_inst); per batch")
    cost_model: BilinearCostModel | None = None

    @field_validator("b_max")
    @classmethod
    def _at_most_jobs(cls, value: int, info: ValidationInfo) -> int:
        # b_max > N allows nothing more than b_max = N; clamping keeps every (N × b_max) table small.
        jobs = info.data.get("jobs")
        return min(value, len(jobs)) if jobs else value

    @model_validator(mode="after")
    def _consistent(self) -> "PriorityProblem":
        seen: set[str] = set()
        for k, job in enumerate(self.jobs):
            if job.name in seen:
                raise FieldError(f"jobs[{k}].name", f"job name {job.name!r} appears twice")
            seen.add(job.name)
            if job.exec_ms is None and self.cost_model is None:
                raise FieldError("cost_model", f"required: job {job.name!r} has no exec_ms table")
            if job.exec_ms is not None and len(job.exec_ms) < self.b_max:
                raise FieldError(f"jobs[{k}].exec_ms",
                                 f"gives latencies for {len(job.exec_ms)} batch size(s), b_max is {self.b_max}")
            if self.token_capacity is not None and job.tokens > self.token_capacity:
                raise FieldError("token_capacity", f"{self.token_capacity} is less than the {job.tokens} tokens "
                                                   f"(input + output) of job {job.name!r}")
        return self

    @property
    def size(self) -> int:
        return len(self.jobs)

    @cached_property
    def tables(self) -> LatencyTables:
        """The latency tables of Eqs. 14–19 (computed once, on first use)."""
        return build_tables(self)

    def range_warnings(self) -> list[str]:
        """Lengths or batch sizes outside the fitted range of the latency model (one line each)."""
        if self.cost_model is None or self.cost_model.valid_range is None:
            return []
        vr = self.cost_model.valid_range
        lines = []
        if vr.max_batch_size is not None and self.b_max > vr.max_batch_size:
            lines.append(f"{self.name}: b_max {self.b_max} is above the latency model's fitted range "
                         f"(batch ≤ {vr.max_batch_size}); latencies are extrapolated")
        if vr.max_tokens_per_request is not None:
            for job in self.jobs:
                if job.tokens > vr.max_tokens_per_request:
                    lines.append(f"{self.name}: job {job.name!r} has {job.tokens} tokens (input+output), above the "
                                 f"latency model's fitted range (≤ {vr.max_tokens_per_request}); latency is extrapolated")
        return lines


def build_tables(problem: PriorityProblem) -> LatencyTables:
    """Eqs. 14–19 for every job and batch size 1..b_max."""
    n, bmax = problem.size, problem.b_max
    sizes = np.arange(1, bmax + 1, dtype=float)
    exec_ms = np.empty((n, bmax))
    prefill_ms = np.empty((n, bmax))
    for i, job in enumerate(problem.jobs):
        if job.exec_ms is not None:
            exec_ms[i] = job.exec_ms[:bmax]
            prefill_ms[i] = job.prefill_ms[:bmax] if job.prefill_ms is not None else 0.0
        else:
            model = problem.cost_model
            assert model is not None
            scale = model.seconds_per_unit * 1000.0  # model units -> ms
            p, d = model.prefill, model.decode
            li, lo = float(job.input_tokens), float(job.output_tokens)
            prefill = p.alpha * sizes * li + p.beta * sizes + p.gamma * li + p.delta  # Eq. 14
            slope = d.alpha * sizes + d.gamma
            decode = lo * (slope * li + d.beta * sizes + d.delta) + slope * lo * (lo + 1) / 2.0  # Eq. 16 closed form
            prefill_ms[i] = prefill * scale
            exec_ms[i] = (prefill + decode) * scale  # Eq. 17
    slack = np.empty((n, bmax))
    for i, job in enumerate(problem.jobs):
        if job.kind == "e2e":
            slack[i] = job.slo_e2e_ms - exec_ms[i]  # Eq. 7, h=1: wait + t_exec ≤ SLO
        else:
            tpot = (exec_ms[i] - prefill_ms[i]) / job.output_tokens  # Eq. 19
            ttft_slack = job.slo_ttft_ms - prefill_ms[i]  # Eq. 8: wait + t_prefill ≤ SLO
            slack[i] = np.where(tpot <= job.slo_tpot_ms + SUCCESS_TOLERANCE_MS, ttft_slack, -math.inf)
    tokens = np.array([job.tokens for job in problem.jobs], dtype=np.int64)
    for arr in (exec_ms, prefill_ms, slack):
        arr.setflags(write=False)
    return LatencyTables(exec_ms=exec_ms, prefill_ms=prefill_ms, slack_ms=slack, tokens=tokens)


class InstancePlan(Frozen):
    """The plan of one instance: a priority order of job indices cut into contiguous batches."""

    order: tuple[int, ...]
    batch_sizes: tuple[PositiveInt, ...]

    def batches(self) -> list[tuple[int, ...]]:
        out, start = [], 0
        for size in self.batch_sizes:
            out.append(self.order[start:start + size])
            start += size
        return out


class PrioritySchedule(Frozen):
    """The solution type of every priority method: one `InstancePlan` per instance (usually one)
    plus the metrics the evaluator computed for it."""

    plans: tuple[InstancePlan, ...]
    job_names: tuple[str, ...]
    met: int = Field(description="n: jobs meeting their SLO (Eq. 6)")
    total_latency_ms: float = Field(description="t: Σ end-to-end latencies (Eq. 3)")

    @property
    def g_per_s(self) -> float:
        return 1000.0 * self.met / self.total_latency_ms if self.total_latency_ms > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        n_jobs = len(self.job_names)
        return {
            "G_per_s": self.g_per_s,
            "slo_met": self.met,
            "jobs": n_jobs,
            "slo_attainment": self.met / n_jobs,
            "total_latency_ms": self.total_latency_ms,
            "mean_latency_ms": self.total_latency_ms / n_jobs,
            "instances": [
                {"priority_order": [self.job_names[i] for i in plan.order],
                 "batches": [[self.job_names[i] for i in batch] for batch in plan.batches()]}
                for plan in self.plans
            ],
        }

    @classmethod
    def from_dict(cls, problem: PriorityProblem, data: Mapping[str, Any]) -> "PrioritySchedule":
        """The plan ``data`` for ``problem``; one `InputError` line for a key missing or unknown, a job
        name not in the instance, an empty batch, a job placed twice or never, or a ``priority_order``
        other than the batches read left to right.  Batch sizes above ``b_max`` and batches over
        ``token_capacity`` are the validator's verdict, not reading errors.

        Plan format (``to_dict`` writes it; a hand-written plan of one instance needs only ``batches``)::

            {"batches": [["job1", "job2"], ["job3"]]}
            {"instances": [{"batches": [["job1", "job2"]]}, {"batches": [["job3"]]}]}

        Batches run one after the other on their instance, in the order listed; jobs are named as in
        the instance file.  ``priority_order`` of an instance, when given, must be its batches' jobs in
        order.  ``G_per_s``, ``slo_met``, ``jobs``, ``slo_attainment``, ``total_latency_ms`` and
        ``mean_latency_ms`` are results and are ignored on reading; ``met`` and ``total_latency_ms``
        of the schedule read are the independent validator's recomputation
        (`planner.priority.validator.validate_schedule`)."""
        from planner.core import plan_fields as pf  # noqa: PLC0415 (plan reading only)
        from planner.priority.validator import validate_schedule  # noqa: PLC0415 (the validator imports this module)

        results = ("G_per_s", "slo_met", "jobs", "slo_attainment", "total_latency_ms", "mean_latency_ms")
        data = pf.mapping(data, "", allowed=(*results, "instances", "batches"))
        if ("instances" in data) == ("batches" in data):
            pf.refuse("instances", "give either instances (a list of {batches: ...}) or batches (one instance), "
                                   "not both" if "batches" in data else "required key is missing")
        if "batches" in data:
            raw_instances: list[Any] = [{"batches": data["batches"]}]
            prefix = ""
        else:
            raw_instances = pf.items(data["instances"], "instances")
            if not raw_instances:
                pf.refuse("instances", "expected at least one instance")
            prefix = "instances"
        index = {job.name: k for k, job in enumerate(problem.jobs)}
        placed: dict[int, str] = {}
        plans: list[InstancePlan] = []
        for m, raw in enumerate(raw_instances):
            where = pf.join(prefix, m) if prefix else ""
            inst = pf.mapping(raw, where, allowed=("priority_order", "batches"), required=("batches",))
            order: list[int] = []
            sizes: list[int] = []
            for k, raw_batch in enumerate(pf.items(inst["batches"], pf.join(where, "batches"))):
                at = pf.join(pf.join(where, "batches"), k)
                members = pf.items(raw_batch, at)
                if not members:
                    pf.refuse(at, "empty batch (a batch runs at least one job)")
                for p, name in enumerate(members):
                    field = pf.join(at, p)
                    j = pf.lookup(name, index, field, "job")
                    if j in placed:
                        pf.refuse(field, f"job {name!r} is placed twice (also at {placed[j]})")
                    placed[j] = field
                    order.append(j)
                sizes.append(len(members))
            if "priority_order" in inst:
                field = pf.join(where, "priority_order")
                given = pf.items(inst["priority_order"], field)
                if given != [problem.jobs[j].name for j in order]:
                    pf.refuse(field, "is not the batches' jobs read left to right; remove it or make it match")
            plans.append(InstancePlan(order=tuple(order), batch_sizes=tuple(sizes)))
        missing = [job.name for k, job in enumerate(problem.jobs) if k not in placed]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            pf.refuse(prefix or "batches", f"job {missing[0]!r}{more} is in no batch (every job of the instance "
                                           "runs once)")
        names = tuple(job.name for job in problem.jobs)
        unscored = cls(plans=tuple(plans), job_names=names, met=0, total_latency_ms=0.0)
        report = validate_schedule(problem, unscored)
        return cls(plans=tuple(plans), job_names=names, met=int(report.details["slo_met"]),
                   total_latency_ms=float(report.details["total_latency_ms"]))
