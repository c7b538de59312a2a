"""Incremental load of one worker, for heuristics and the formulation's eligibility filter.

`WorkerLoad` answers "does request i still fit here?" for every constraint
family of the placement MIP and keeps the KV footprint of the worker over all
future iterations as a dense array (tokens-equivalent per iteration), so a
check costs O(r_i).  The independent validator does not use this code.
"""

from __future__ import annotations

import math

import numpy as np

from planner.placement.problem import PlacementArrays

_REL_TOL = 1e-9


class WorkerLoad:
    def __init__(self, arrays: PlacementArrays, label: int) -> None:
        self.a = arrays
        self.label = int(label)
        self.requests: list[int] = []
        self.atgt_load = 0.0
        self.atgt_limit = math.inf
        self.prefill_load = 0.0
        self.ttft_limit = math.inf
        self.has_new = False
        self.preemption_slack = math.inf  # M4: set by ongoing requests
        self.context_sum = 0.0
        self.outstanding_decode = 0.0
        self.kv = np.zeros(int(arrays.remaining.max()) + 1)

    # ---- queries -------------------------------------------------------------
    @property
    def num_requests(self) -> int:
        return len(self.requests)

    def violated_family(self, i: int) -> str | None:
        """The first constraint family adding request ``i`` would violate, or None if it fits."""
        a = self.a
        limit = min(self.atgt_limit, a.atgt_limit[i])
        if a.decode_base_s + self.atgt_load + a.atgt_load[i] > limit * (1 + _REL_TOL):
            return "atgt"
        if a.colocated and a.is_new[i]:
            prefill = a.prefill_base_s + self.prefill_load + a.prefill_load[i]
            if prefill > min(self.ttft_limit, a.ttft_limit[i]) * (1 + _REL_TOL):
                return "ttft"
            if prefill > self.preemption_slack + _REL_TOL * abs(self.preemption_slack):
                return "prefill_preemption"
        r = int(a.remaining[i])
        need = self.kv[:r] + a.kv_base[i] + np.arange(r)
        if need.max() > a.kv_capacity * (1 + _REL_TOL):
            return "kv_capacity"
        return None

    def fits(self, i: int) -> bool:
        return self.violated_family(i) is None

    def capacity_norm(self, weight: float) -> float:
        """Aladdin's capacity_norm: L2 norm of (batch size, weight × context length)."""
        return math.hypot(self.num_requests, weight * self.context_sum)

    # ---- updates -------------------------------------------------------------
    def add(self, i: int) -> None:
        a = self.a
        self.requests.append(i)
        self.atgt_load += a.atgt_load[i]
        self.atgt_limit = min(self.atgt_limit, a.atgt_limit[i])
        self.context_sum += a.context[i]
        self.outstanding_decode += a.remaining[i]
        if a.is_new[i]:
            self.has_new = True
            self.prefill_load += a.prefill_load[i]
            self.ttft_limit = min(self.ttft_limit, a.ttft_limit[i])
        elif a.colocated:
            k = int(np.searchsorted(a.ongoing_labels, self.label))
            self.preemption_slack = float(a.preemption_slack[k])
        r = int(a.remaining[i])
        self.kv[:r] += a.kv_base[i] + np.arange(r)

    def remove(self, i: int) -> None:
        """Undo `add` for a new request (used by rebalancing)."""
        a = self.a
        self.requests.remove(i)
        self.atgt_load -= a.atgt_load[i]
        self.context_sum -= a.context[i]
        self.outstanding_decode -= a.remaining[i]
        r = int(a.remaining[i])
        self.kv[:r] -= a.kv_base[i] + np.arange(r)
        self.atgt_limit = min((a.atgt_limit[k] for k in self.requests), default=math.inf)
        news = [k for k in self.requests if a.is_new[k]]
        self.has_new = bool(news)
        self.prefill_load = float(sum(a.prefill_load[k] for k in news))
        self.ttft_limit = min((a.ttft_limit[k] for k in news), default=math.inf)


def ongoing_loads(arrays: PlacementArrays) -> list[WorkerLoad]:
    """One `WorkerLoad` per ongoing worker (in label order), holding its ongoing requests."""
    loads = [WorkerLoad(arrays, lab) for lab in arrays.ongoing_labels]
    index = {int(lab): k for k, lab in enumerate(arrays.ongoing_labels)}
    for i in np.flatnonzero(~arrays.is_new):
        loads[index[int(arrays.ongoing_worker[i])]].add(int(i))
    return loads


def first_new_label(arrays: PlacementArrays) -> int:
    return int(arrays.ongoing_labels.max()) + 1 if arrays.ongoing_labels.size else 0
