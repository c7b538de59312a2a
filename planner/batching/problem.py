"""Frozen, validated data of one batch-scheduling instance (docs/formulations.md §3.1, §3.3).

Sizes are capped so that bad input is one clear line instead of an out-of-memory simulation or an
integer overflow: a prompt or output is at most `MAX_REQUEST_TOKENS` (1,000,000) tokens, and C, P,
M and R_max are at most `MAX_LIMIT` (10^12).  Numbers must be finite and not booleans.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from planner.batching.costmodel import InferMaxCostModel, default_cost_model
from planner.core.types import Request
from planner.core.io import NotBool, check_unique, format_validation_error
from planner.errors import InfeasibleError, PlannerError

#: Largest batch limit (C, P, M, R_max) accepted: far above any GPU's KV cache, small enough that the
#: bounds stay in int64 and the MIP coefficients within what HiGHS accepts.
MAX_LIMIT = 10**12

Limit = Annotated[int, NotBool, Field(ge=1, le=MAX_LIMIT)]
LIMIT_NAMES = ("C", "P", "M", "R_max")


#: Request keys of earlier instance files and the field that replaced each (refused, never reinterpreted).
RENAMED_REQUEST_KEYS = {"id": "request_id", "input_len": "input_tokens", "output_len": "output_tokens",
                        "arrival": "arrival_s"}


class BatchingProblem(BaseModel):
    """Requests + batch limits C (tokens), P (prefill tokens), M (KV tokens), R_max (running requests).

    ``P`` defaults to ``C``; ``R_max`` to unlimited (the request count).  Request ids are unique.
    Each check is a field validator, so an error names its field (``requests``, ``P``, ``M``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "batching"
    requests: tuple[Request, ...] = Field(min_length=1)
    C: Limit = 4096
    P: Limit | None = None
    M: Limit = 100_000
    R_max: Limit | None = None
    cost: InferMaxCostModel = Field(default_factory=default_cost_model)

    @field_validator("requests")
    @classmethod
    def _unique_ids(cls, requests: tuple[Request, ...]) -> tuple[Request, ...]:
        """Unique ids; a `PlannedRequest` is held as its plain `Request` (InferMax plans with the true
        ``output_tokens``, so a prediction has no role here)."""
        check_unique([r.request_id for r in requests], "request id", "requests")
        return tuple(r.as_request() for r in requests)

    @field_validator("P")
    @classmethod
    def _p_within_c(cls, P: int | None, info: ValidationInfo) -> int | None:
        C = info.data.get("C")
        if P is not None and C is not None and P > C:
            raise ValueError(f"P={P} must not exceed C={C}")
        return P

    @field_validator("M")
    @classmethod
    def _m_holds_a_request(cls, M: int, info: ValidationInfo) -> int:
        requests = info.data.get("requests")
        if requests:
            smallest = min(r.kv_need for r in requests)
            if M < smallest:
                raise ValueError(f"M={M} is smaller than every request's KV need (smallest I+O-1 = {smallest})")
        return M

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
        return np.array([r.input_tokens for r in self.requests], dtype=np.int64)

    @property
    def outputs(self) -> np.ndarray:
        return np.array([r.output_tokens for r in self.requests], dtype=np.int64)

    @property
    def arrivals(self) -> np.ndarray:
        return np.array([r.arrival_s for r in self.requests], dtype=float)

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
                f"instance {self.name!r} is infeasible: request {r.request_id!r} needs {r.kv_need} KV tokens "
                f"(I+O-1 = {r.input_tokens}+{r.output_tokens}-1) but M = {self.M}{more}"
            )

    def with_limits(self, **changes) -> "BatchingProblem":
        """A copy with other limits (re-validated)."""
        data = self.model_dump()
        data.update({k: v for k, v in changes.items() if v is not None})
        try:
            return BatchingProblem.model_validate(data)
        except ValidationError as exc:
            field, problem = format_validation_error(exc)
            raise PlannerError(f"{field}: {problem}") from None


def make_problem(inputs, outputs, *, arrivals=None, name: str = "batching", cost: InferMaxCostModel | None = None,
                 **limits) -> BatchingProblem:
    """Build a problem from length lists (request ids r0, r1, …)."""
    arrivals = arrivals if arrivals is not None else [0.0] * len(inputs)
    reqs = tuple(Request(request_id=f"r{i}", input_tokens=int(a), output_tokens=int(b), arrival_s=float(t))
                 for i, (a, b, t) in enumerate(zip(inputs, outputs, arrivals)))
    kwargs = {"cost": cost} if cost is not None else {}
    return BatchingProblem(name=name, requests=reqs, **kwargs, **limits)
