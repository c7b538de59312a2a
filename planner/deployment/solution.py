"""Solutions of the deployment family: one type per problem, the same for the MILP and every heuristic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class CostPlanSolution:
    """``counts[k]`` instances of option k of the problem; ``load_scale`` = fraction of the requested rates served."""

    counts: tuple[int, ...]
    method: str
    load_scale: float = 1.0
    mode: str = "min_cost"  # or "max_load" (the requested load did not fit the inventory)
    labels: tuple[str, ...] = ()

    @classmethod
    def from_array(cls, counts: np.ndarray, method: str, labels: tuple[str, ...] = (), **kw: Any) -> "CostPlanSolution":
        return cls(tuple(int(round(c)) for c in counts), method, labels=labels, **kw)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "mode": self.mode,
            "load_scale": self.load_scale,
            "instances": [{"option": self.labels[k] if self.labels else k, "count": c}
                          for k, c in enumerate(self.counts) if c],
        }


@dataclass(frozen=True)
class RoutingSolution:
    """``assignment[r]`` is the index of the instance serving request r."""

    request_ids: tuple[str, ...]
    assignment: tuple[int, ...]
    method: str
    instance_names: tuple[str, ...] = ()

    @classmethod
    def from_array(cls, request_ids: tuple[str, ...], assignment: np.ndarray, method: str,
                   instance_names: tuple[str, ...] = ()) -> "RoutingSolution":
        return cls(tuple(request_ids), tuple(int(s) for s in assignment), method, instance_names)

    def as_array(self) -> np.ndarray:
        return np.asarray(self.assignment, dtype=np.int64)

    def to_dict(self) -> dict[str, Any]:
        names = self.instance_names or tuple(str(s) for s in range(max(self.assignment, default=-1) + 1))
        counts = {name: 0 for name in names}
        for s in self.assignment:
            counts[names[s]] += 1
        return {
            "method": self.method,
            "requests_per_instance": counts,
            "assignment": {r: names[s] for r, s in zip(self.request_ids, self.assignment)},
        }
