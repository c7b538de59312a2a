"""The placement Solution: which worker serves each request.  Same type for MIP and heuristics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class PlacementSolution:
    """``assignment[k]`` is the worker label of ``request_ids[k]``.

    Ongoing requests keep the labels of the workers they run on; workers
    opened by the plan get labels after the largest ongoing label.
    """

    request_ids: tuple[str, ...]
    assignment: tuple[int, ...]
    method: str
    gpus_per_worker: int = 1

    @classmethod
    def from_array(
        cls, request_ids: tuple[str, ...], assignment: np.ndarray, method: str, gpus_per_worker: int = 1
    ) -> "PlacementSolution":
        return cls(tuple(request_ids), tuple(int(w) for w in assignment), method, gpus_per_worker)

    @property
    def workers_used(self) -> int:
        return len(set(self.assignment))

    @property
    def gpus_used(self) -> int:
        return self.workers_used * self.gpus_per_worker

    def as_array(self) -> np.ndarray:
        return np.asarray(self.assignment, dtype=np.int64)

    def worker_of(self) -> dict[str, int]:
        return dict(zip(self.request_ids, self.assignment))

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "workers": self.workers_used,
            "gpus": self.gpus_used,
            "assignment": self.worker_of(),
        }
