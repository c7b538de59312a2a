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

    def fits_many(self, idx: np.ndarray) -> np.ndarray:
        """`fits` for each request of ``idx`` (the same decisions, vectorised over the requests).

        KV: ``max_t (kv[t] + kv_base_i + t)`` for t < r_i is first bounded through the prefix maximum of
        ``kv[t] + t`` (equal up to rounding); only requests within a relative 1e-12 of the limit are
        checked with `violated_family`'s own sum, so no decision depends on the rounding.
        """
        a = self.a
        idx = np.asarray(idx, dtype=np.int64)
        limit = np.minimum(self.atgt_limit, a.atgt_limit[idx])
        ok = a.decode_base_s + self.atgt_load + a.atgt_load[idx] <= limit * (1 + _REL_TOL)
        if a.colocated:
            new = a.is_new[idx]
            prefill = a.prefill_base_s + self.prefill_load + a.prefill_load[idx]
            good = prefill <= np.minimum(self.ttft_limit, a.ttft_limit[idx]) * (1 + _REL_TOL)
            good &= prefill <= self.preemption_slack + _REL_TOL * abs(self.preemption_slack)
            ok &= good | ~new
        r = a.remaining[idx].astype(np.int64)
        peak = np.maximum.accumulate(self.kv + np.arange(self.kv.size))
        approx = a.kv_base[idx] + peak[r - 1]
        cap = a.kv_capacity * (1 + _REL_TOL)
        unsure = ok & (np.abs(approx - cap) <= 1e-12 * max(abs(cap), 1.0))
        ok &= approx <= cap
        for k in np.flatnonzero(unsure):
            ok[k] = self.violated_family(int(idx[k])) is None
        return ok

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


class LoadTable:
    """The loads of many workers at once, for the greedy heuristics: the same arithmetic as `WorkerLoad`
    (so the same fit decisions, float for float), vectorised over the workers.

    Rows are workers in opening order: the ongoing workers (label order), then the opened ones.  The
    scalar families (ATGT, TTFT, prefill preemption) are checked for every row in one numpy pass; the
    KV family, which costs O(r_i) per worker, only for the rows that pass them, in the caller's order
    and in growing chunks, until the first fit.
    """

    def __init__(self, arrays: PlacementArrays, weight: float = 1.0) -> None:
        a = arrays
        self.a = a
        self.weight = float(weight)
        loads = ongoing_loads(a)
        n = len(loads)
        size = n + 8  # grows by half when full (`open`)
        self.n = n
        self.labels = np.zeros(size, dtype=np.int64)
        self.count = np.zeros(size, dtype=np.int64)
        self.atgt_load = np.zeros(size)
        self.atgt_limit = np.full(size, math.inf)
        self.prefill_load = np.zeros(size)
        self.ttft_limit = np.full(size, math.inf)
        self.slack = np.full(size, math.inf)
        self.context_sum = np.zeros(size)
        self.norm = np.zeros(size)
        self.kv = np.zeros((size, int(a.remaining.max()) + 1))
        for k, load in enumerate(loads):
            self.labels[k] = load.label
            self.count[k] = load.num_requests
            self.atgt_load[k] = load.atgt_load
            self.atgt_limit[k] = load.atgt_limit
            self.prefill_load[k] = load.prefill_load
            self.ttft_limit[k] = load.ttft_limit
            self.slack[k] = load.preemption_slack
            self.context_sum[k] = load.context_sum
            self.norm[k] = load.capacity_norm(self.weight)
            self.kv[k] = load.kv
        #: work done, for the effort accounting: rows checked on the scalar families, KV checks (numpy
        #: passes over a chunk of rows) and the KV cells they compared
        self.rows_checked = 0
        self.kv_checks = 0
        self.kv_cells = 0

    def open(self, label: int) -> int:
        """A new empty worker; its row."""
        if self.n == self.labels.size:
            grow = max(self.labels.size // 2, 8)
            for name in ("labels", "count", "atgt_load", "context_sum", "norm", "prefill_load"):
                setattr(self, name, np.concatenate([getattr(self, name), np.zeros(grow, getattr(self, name).dtype)]))
            for name in ("atgt_limit", "ttft_limit", "slack"):
                setattr(self, name, np.concatenate([getattr(self, name), np.full(grow, math.inf)]))
            self.kv = np.concatenate([self.kv, np.zeros((grow, self.kv.shape[1]))])
        row = self.n
        self.labels[row] = label
        self.n += 1
        return row

    def scalar_fits(self, i: int) -> np.ndarray:
        """Per row: request ``i`` meets the ATGT, TTFT and prefill-preemption families there (`WorkerLoad.violated_family`)."""
        a = self.a
        n = self.n
        self.rows_checked += n
        limit = np.minimum(self.atgt_limit[:n], a.atgt_limit[i])
        ok = a.decode_base_s + self.atgt_load[:n] + a.atgt_load[i] <= limit * (1 + _REL_TOL)
        if a.colocated and a.is_new[i]:
            prefill = a.prefill_base_s + self.prefill_load[:n] + a.prefill_load[i]
            ok &= prefill <= np.minimum(self.ttft_limit[:n], a.ttft_limit[i]) * (1 + _REL_TOL)
            slack = self.slack[:n]
            ok &= prefill <= slack + _REL_TOL * np.abs(slack)
        return ok

    def first_fit(self, i: int, rows: np.ndarray) -> int | None:
        """The first of ``rows`` (all passing `scalar_fits`) where request ``i``'s KV also fits, or None."""
        a = self.a
        r = int(a.remaining[i])
        ramp = np.arange(r)
        limit = a.kv_capacity * (1 + _REL_TOL)
        start, chunk = 0, 4
        while start < rows.size:
            part = rows[start : start + chunk]
            need = (self.kv[part, :r] + a.kv_base[i] + ramp).max(axis=1)  # `WorkerLoad.violated_family`'s sum
            self.kv_checks += 1
            self.kv_cells += part.size * r
            fit = np.flatnonzero(need <= limit)
            if fit.size:
                return int(part[fit[0]])
            start += chunk
            chunk *= 4
        return None

    def add(self, row: int, i: int) -> None:
        """`WorkerLoad.add` for a new request ``i`` on ``row``."""
        a = self.a
        self.count[row] += 1
        self.atgt_load[row] += a.atgt_load[i]
        self.atgt_limit[row] = min(self.atgt_limit[row], a.atgt_limit[i])
        self.context_sum[row] += a.context[i]
        self.prefill_load[row] += a.prefill_load[i]
        self.ttft_limit[row] = min(self.ttft_limit[row], a.ttft_limit[i])
        r = int(a.remaining[i])
        self.kv[row, :r] += a.kv_base[i] + np.arange(r)
        self.norm[row] = math.hypot(int(self.count[row]), self.weight * float(self.context_sum[row]))
