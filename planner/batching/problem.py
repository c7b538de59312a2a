"""Frozen, validated data of one batch-scheduling instance (FORMULATIONS.md §3.1, §3.3)."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveInt, model_validator

from planner.batching.costmodel import InferMaxCostModel, default_cost_model
from planner.errors import InfeasibleError


class Request(BaseModel):
    """One request: ``input_len`` prompt tokens, ``output_len`` tokens to generate, arrival (s)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    input_len: PositiveInt
    output_len: PositiveInt
    arrival: NonNegativeFloat = 0.0

    @property
    def kv_need(self) -> int:
        """KV tokens held at the last token: ``I + O − 1`` (the last token is never stored)."""
        return self.input_len + self.output_len - 1


class BatchingProblem(BaseModel):
    """Requests + batch limits C (tokens), P (prefill tokens), M (KV tokens), R_max (running requests).

    ``P`` defaults to ``C``; ``R_max`` to unlimited (the request count).  Request ids are unique.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "batching"
    requests: tuple[Request, ...] = Field(min_length=1)
    C: PositiveInt = 4096
    P: PositiveInt | None = None
    M: PositiveInt = 100_000
    R_max: PositiveInt | None = None
    cost: InferMaxCostModel = Field(default_factory=default_cost_model)

    @model_validator(mode="after")
    def _check(self) -> "BatchingProblem":
        if self.P is not None and self.P > self.C:
            raise ValueError(f"P={self.P} must not exceed C={self.C}")
        ids = [r.id for r in self.requests]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"duplicate request id {dup!r}")
        smallest = min(r.kv_need for r in self.requests)
        if self.M < smallest:
            raise ValueError(f"M={self.M} is smaller than every request's KV need (smallest I+O-1 = {smallest})")
        return self

    # Convenient array views -------------------------------------------------------------
    @property
    def prefill_limit(self) -> int:
        return self.P if self.P is not None else self.C

    @property
    def running_limit(self) -> int:
        return self.R_max if self.R_max is not None else len(self.requests)

    @property
    def n(self) -> int:
        return len(self.requests)

    @property
    def inputs(self) -> np.ndarray:
        return np.array([r.input_len for r in self.requests], dtype=np.int64)

    @property
    def outputs(self) -> np.ndarray:
        return np.array([r.output_len for r in self.requests], dtype=np.int64)

    @property
    def arrivals(self) -> np.ndarray:
        return np.array([r.arrival for r in self.requests], dtype=float)

    @property
    def online(self) -> bool:
        return bool(np.any(self.arrivals > 0))

    def check_feasible(self) -> None:
        """Raise `InfeasibleError` naming a request whose final KV (I+O−1) can never fit in M."""
        bad = [r for r in self.requests if r.kv_need > self.M]
        if bad:
            r = bad[0]
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise InfeasibleError(
                f"instance {self.name!r} is infeasible: request {r.id!r} needs {r.kv_need} KV tokens "
                f"(I+O-1 = {r.input_len}+{r.output_len}-1) but M = {self.M}{more}"
            )

    def with_limits(self, **changes) -> "BatchingProblem":
        """A copy with other limits (re-validated)."""
        data = self.model_dump()
        data.update({k: v for k, v in changes.items() if v is not None})
        return BatchingProblem.model_validate(data)


def make_problem(inputs, outputs, *, arrivals=None, name: str = "batching", cost: InferMaxCostModel | None = None,
                 **limits) -> BatchingProblem:
    """Build a problem from length lists (request ids r0, r1, …)."""
    arrivals = arrivals if arrivals is not None else [0.0] * len(inputs)
    reqs = tuple(Request(id=f"r{i}", input_len=int(a), output_len=int(b), arrival=float(t))
                 for i, (a, b, t) in enumerate(zip(inputs, outputs, arrivals)))
    kwargs = {"cost": cost} if cost is not None else {}
    return BatchingProblem(name=name, requests=reqs, **kwargs, **limits)
