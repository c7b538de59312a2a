"""The placement Solution: which worker serves each request.  Same type for MIP and heuristics.

Plan format (``to_dict`` writes it, `PlacementSolution.from_dict` reads it; a hand-written plan needs
only ``assignment``)::

    {"assignment": {"r1": 0, "r2": 0, "r3": 1}}

``assignment`` maps every request id of the instance to a worker label, a whole number
0 … `MAX_WORKER_LABEL`; requests with the same label share a worker, and an ongoing request keeps
the label of the worker it decodes on.  ``method`` (a name) is optional; ``workers`` and ``gpus``
are summaries the validator recomputes and are ignored on reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from planner.core import plan_fields as pf

if TYPE_CHECKING:
    from planner.placement.problem import PlacementProblem

#: Largest worker label a plan may use (labels need not be contiguous; the worker count is the
#: number of distinct labels).
MAX_WORKER_LABEL = 10**9


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

    @classmethod
    def from_dict(cls, problem: "PlacementProblem", data: Mapping[str, Any]) -> "PlacementSolution":
        """The plan ``data`` (the module's format) for ``problem``; one `InputError` line for a key
        missing or unknown, a request id not in the instance, a request without a worker, or a label
        that is not a whole number in 0 … `MAX_WORKER_LABEL`."""
        data = pf.mapping(data, "", allowed=("method", "workers", "gpus", "assignment"), required=("assignment",))
        method = pf.name(data["method"], "method") if "method" in data else "plan"
        given = pf.mapping(data["assignment"], "assignment")
        index = {r.request_id: k for k, r in enumerate(problem.requests)}
        workers: list[int | None] = [None] * len(index)
        for rid, label in given.items():
            field = pf.join("assignment", str(rid))
            workers[pf.lookup(rid, index, field, "request id")] = pf.whole(label, field, maximum=MAX_WORKER_LABEL)
        missing = [problem.requests[k].request_id for k, w in enumerate(workers) if w is None]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            pf.refuse("assignment", f"request {missing[0]!r}{more} has no worker (every request of the "
                                    "instance needs one)")
        return cls(tuple(index), tuple(int(w) for w in workers if w is not None), method,
                   problem.worker.tensor_parallel)
