"""Online mode of Aladdin's placement: replay a trace heartbeat by heartbeat (Alg. 1 + Alg. 2).

Timeline (Δ = ``heartbeat_s``; heartbeat k happens at ``h_k = k·Δ``):

* **Dispatch.**  A request arriving at ``a`` is *new* at heartbeat ``⌈a/Δ⌉``,
  i.e. it arrived in ``(h − Δ, h]``.  (``decode_only`` mode: at ``⌈(a + t_pre)/Δ⌉``,
  after its own Eq. 2 prefill on an unqueued prefill worker.)
* **Placement.**  At h, a `PlacementProblem` holds the new requests and every
  request still running, as ``OngoingState(worker, g, τ)`` with g decode
  tokens generated and τ seconds since its decode started.  The predicted
  output is ``predicted_output_tokens`` unless Alg. 2 re-predicted it.  New
  requests are placed with ``method`` (any name in `HEURISTICS`, or ``"mip"`` →
  `solve_placement`).  Two cases are handled outside the problem, so that one
  bad worker does not make the whole heartbeat infeasible:
  a worker whose ongoing requests alone already break M2 (decode/ATGT) or M5 (KV), as
  λ-weighted contexts grow or predictions are revised, is *closed*: it takes
  no new requests at this heartbeat.  A new request that no empty worker could
  serve (prefill alone > TTFT SLO, decode alone > ATGT SLO, KV peak alone >
  θ·M_kv) is *forced* onto a fresh worker of its own; it will miss an SLO.
  If the chosen method still fails (``InfeasibleError``, no MIP solution), the
  heartbeat falls back to ``best_fit`` (column ``fallback``).
* **Labels / release.**  Workers keep stable integer labels.  At each
  heartbeat, *before* placement, a worker with no running request is released
  (scale-in).  Workers opened by a plan get fresh labels from a counter;
  released labels are **never** reused.
* **Simulation of the window.**  Each worker runs, in order: one prefill batch
  of its new requests, starting at ``max(clock_j, h)``
  and taking ``t_pre = k1·Σ I + c1`` (Eq. 2; it stalls the decodes), then decode
  iterations of ``t_dec = k2·b + k3·Σ(I + g) + c2`` seconds (Eq. 3, b running
  requests, context *before* the iteration's token).  A request finishes after
  its real ``output_tokens`` iterations.  Every iteration that *starts* before
  ``h + Δ`` runs to completion, so a worker's clock may pass the next heartbeat.
  Nothing placed there starts before that clock: the remainder is carried over
  and no time is lost.  The
  state seen at ``h + Δ`` includes that in-flight iteration.  Between events
  (a finish, a re-prediction, the window end), iteration times form an
  arithmetic sequence and are summed with numpy.
* **KV.**  During an iteration a request holds ``kv(I + g) = a_kv·(I+g) + b_kv``
  bytes (Eq. 1), as M5 counts it.  The peak over each window is reported as a fraction
  of the physical ``M_kv = g·u·M_GPU − M_model``.  If the peak is above 1, that is
  an overflow event: it is recorded and the simulation goes on as if the memory
  were there (a real engine would preempt).

Per-request metrics (seconds):

* ``ttft_s = first_token_s − arrival_s`` with ``first_token_s`` = end of the
  prefill batch.  In colocated mode this is
  ``heartbeat_wait_s (h − a) + iteration_wait_s (max(clock_j, h) − h) + prefill_s``.
  ``ttft_clock="heartbeat"`` judges the TTFT SLO on ``first_token_s − h``
  instead: Aladdin's M3 bounds the prefill only, so waiting for the heartbeat
  can break the SLO of a long prompt whatever the placement.  In decode_only
  mode ``ttft_s = t_pre(I)``.
* ``decode_s = finish_s − decode_start_s`` (wall time from prefill end to the end of the last
  decode iteration, prefill stalls included, as M4 assumes), ``atgt_s =
  decode_s / output_tokens``.  ``slo_met`` = finished, TTFT met and ATGT met.

Alg. 2 (docs/formulations.md §1.5, [R]), only with ``rebalance=True``.  Each worker j
keeps ``E_j`` (reset when released).  On an early finish (o < ô): ``E_j += ô − o``,
j marked *over*.  When g reaches ô and the request is not finished:
``ô ← ⌈predictor.conditional_mean_output(I, g)⌉`` (``g + 1`` without a predictor;
at least g + 1, at most ``L_max − I`` unless that is below g + 1),
``E_j −= ô_new − ô_old``, j marked *under*.  After the placement at h, new
requests on workers marked only *under* (smallest E_j first) move to the first
worker marked only *over* (largest E_j first) where `WorkerLoad.fits` says
M2–M5 still hold (a worker marked both ways is neither).  Then all marks are
cleared.  With ``rebalance=False`` there is no re-prediction: a request past
its prediction counts as one remaining iteration (`PlacementArrays.remaining`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from planner.core.contract import RunOptions
from planner.core.types import LLMSpec, SLOSet, WorkerConfig, Workload
from planner.costmodels.models import AladdinCostModel
from planner.errors import InfeasibleError, PlannerError
from planner.placement.heuristics import CONSTRAINT_AWARE, HEURISTICS, best_fit
from planner.placement.problem import OngoingState, PlacementOptions, PlacementProblem
from planner.placement.solution import PlacementSolution
from planner.placement.pipeline import solve_placement
from planner.placement.state import WorkerLoad, ongoing_loads
from planner.placement.validator import validate_placement
from planner.workloads.lengths import LengthDistribution

_TOL = 1e-9


@dataclass(frozen=True)
class ReplayResult:
    """Outcome of `replay`: per-request, per-heartbeat and per-(heartbeat, worker) tables plus summary."""

    requests: pd.DataFrame
    heartbeats: pd.DataFrame
    workers: pd.DataFrame
    method: str
    heartbeat_s: float
    gpus_per_worker: int
    slo_attainment: float  # fraction of all requests meeting TTFT and ATGT
    p99_atgt_s: float  # over finished requests
    peak_workers: int
    mean_workers: float  # over recorded heartbeats
    kv_overflows: int  # (heartbeat, worker) windows whose KV peak exceeded M_kv
    repredictions: int
    moves: int
    placement_seconds: float  # wall time spent in placement (not deterministic; not in the tables)
    invalid_plans: int = 0  # heartbeats whose plan the independent validator rejected (should be 0)

    def to_dict(self, frames: bool = False) -> dict[str, Any]:
        keys = ("method", "heartbeat_s", "slo_attainment", "p99_atgt_s", "peak_workers", "mean_workers",
                "kv_overflows", "repredictions", "moves", "placement_seconds", "invalid_plans")
        out: dict[str, Any] = {k: getattr(self, k) for k in keys}
        out.update(requests=int(len(self.requests)), finished=int(self.requests["finished"].sum()),
                   peak_gpus=self.peak_workers * self.gpus_per_worker)
        if frames:
            for name in ("requests", "heartbeats", "workers"):
                df = getattr(self, name)
                out[f"{name}_table"] = df.astype(object).where(df.notna(), None).to_dict(orient="records")
        return out


class _Worker:
    __slots__ = ("label", "members", "pending", "clock", "error", "under", "over")

    def __init__(self, label: int, clock: float) -> None:
        self.label = label
        self.members = np.zeros(0, dtype=np.int64)  # running request indices
        self.pending: list[int] = []  # placed at this heartbeat, not started
        self.clock = clock  # end of the last prefill / iteration (s)
        self.error = 0.0  # Alg. 2 E_j (tokens)
        self.under = False
        self.over = False

    @property
    def load(self) -> int:
        return int(self.members.size) + len(self.pending)


class _Replay:
    def __init__(self, workload: Workload, model: LLMSpec, worker: WorkerConfig, cost: AladdinCostModel,
                 slos: SLOSet, options: PlacementOptions, heartbeat_s: float, method: str, rebalance: bool,
                 predictor: LengthDistribution | None, seed: int, time_limit: float | None,
                 ttft_clock: str, solver: str = "highs", threads: int | None = None) -> None:
        if heartbeat_s <= 0:
            raise PlannerError(f"heartbeat_s must be positive, got {heartbeat_s}")
        if method != "mip" and method not in HEURISTICS:
            raise PlannerError(f"unknown method {method!r} (known: mip, {', '.join(HEURISTICS)})")
        if ttft_clock not in ("arrival", "heartbeat"):
            raise PlannerError(f"ttft_clock must be 'arrival' or 'heartbeat', got {ttft_clock!r}")
        self.model, self.worker, self.cost, self.slos, self.options = model, worker, cost, slos, options
        self.dt, self.method, self.rebalance, self.predictor = heartbeat_s, method, rebalance, predictor
        self.seed, self.time_limit, self.ttft_clock = seed, time_limit, ttft_clock
        self.solver, self.threads = solver, threads
        self.colocated = options.mode == "colocated"
        self.m_kv = worker.kv_capacity_bytes(model)
        self.req = list(workload.requests)
        self.n = n = len(self.req)
        self.arrival = workload.arrival_s.astype(float)
        self.inp, self.out = workload.input_tokens.astype(np.int64), workload.output_tokens.astype(np.int64)
        self.pred0 = workload.predicted_output_tokens.astype(np.int64)
        self.pred, self.gen, self.repred = self.pred0.copy(), np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.label, self.hb = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        self.moved, self.forced = np.zeros(n, bool), np.zeros(n, bool)
        self.first_token, self.decode_start, self.finish, self.prefill_s, self.iter_wait = np.full((5, n), np.nan)
        self.own_prefill = np.array([cost.prefill_time(float(i)) for i in self.inp]) if n else np.zeros(0)
        ready = self.arrival if self.colocated else self.arrival + self.own_prefill
        self.dispatch = np.maximum(np.ceil(ready / heartbeat_s - 1e-12), 0).astype(np.int64)
        self.workers: dict[int, _Worker] = {}
        self.next_label = 0
        self.hb_rows: list[dict[str, Any]] = []
        self.w_rows: list[dict[str, Any]] = []
        self.placement_seconds = 0.0

    # ---- placement -------------------------------------------------------------
    def _open(self, clock: float) -> int:
        lab = self.next_label
        self.next_label += 1
        self.workers[lab] = _Worker(lab, clock)
        return lab

    def _problem(self, k: int, ongoing: list[int], new: list[int]) -> PlacementProblem:
        states = {
            self.req[i].request_id: OngoingState(
                worker=int(self.label[i]), generated_tokens=int(self.gen[i]),
                decode_s=max(self.workers[int(self.label[i])].clock - self.decode_start[i], 0.0),
            )
            for i in ongoing
        }
        return PlacementProblem(
            name=f"heartbeat-{k}", model=self.model, worker=self.worker, cost=self.cost, slos=self.slos,
            requests=tuple(self.req[i] for i in ongoing + new), ongoing=states, options=self.options,
        )

    def _solve(self, problem: PlacementProblem, k: int) -> tuple[np.ndarray, bool]:
        try:
            if self.method == "mip":
                res = solve_placement(problem, RunOptions(solver=self.solver, time_limit=self.time_limit,
                                                          threads=self.threads, seed=self.seed))
                if res.solution is None or res.validation is None or not res.validation.feasible:
                    raise InfeasibleError(res.message or "no feasible MIP solution")
                return res.solution.as_array(), False
            fn = HEURISTICS[self.method]
            sol = fn(problem) if self.method in CONSTRAINT_AWARE else fn(problem, seed=self.seed + k)
            return sol.as_array(), False
        except InfeasibleError:
            return best_fit(problem).as_array(), True

    def _place(self, k: int, h: float, new: list[int], row: dict[str, Any]) -> None:
        ongoing = [int(i) for w in self.workers.values() for i in w.members]
        problem = self._problem(k, ongoing, new)
        a = problem.arrays
        closed = {
            load.label for load in ongoing_loads(a)
            if a.decode_base_s + load.atgt_load > load.atgt_limit * (1 + _TOL)
            or load.kv.max() > a.kv_capacity * (1 + _TOL)
        }
        nw = a.new_indices
        bad = (a.decode_base_s + a.atgt_load[nw] > a.atgt_limit[nw] * (1 + _TOL)) | (
            a.kv_base[nw] + a.remaining[nw] - 1.0 > a.kv_capacity * (1 + _TOL))
        if a.colocated:
            bad |= a.prefill_base_s + a.prefill_load[nw] > a.ttft_limit[nw] * (1 + _TOL)
        forced = [new[p] for p in np.flatnonzero(bad)]
        if closed or forced:
            ongoing = [i for i in ongoing if int(self.label[i]) not in closed]
            new = [i for i in new if i not in set(forced)]
            problem = self._problem(k, ongoing, new) if new else None
        row.update(closed_workers=len(closed), forced=len(forced), fallback=False, moves=0, plan_valid=True)
        for i in forced:
            self.forced[i] = True
            self._assign(i, self._open(h))
        if problem is None:
            return
        assign, row["fallback"] = self._solve(problem, k)
        if self.rebalance:
            row["moves"] = self._rebalance(problem, assign, ongoing + new)
        # Every heartbeat's final plan (after Alg. 2 moves) passes the independent validator.
        plan = PlacementSolution.from_array(problem.arrays.request_ids, assign, self.method)
        row["plan_valid"] = bool(validate_placement(problem, plan).feasible)
        a = problem.arrays
        ongoing_labels = {int(x) for x in a.ongoing_labels}
        fresh = {lab: self._open(h) for lab in sorted(set(int(x) for x in assign) - ongoing_labels)}
        for p in a.new_indices:
            lab = int(assign[p])
            self._assign(new[p - len(ongoing)], lab if lab in ongoing_labels else fresh[lab])

    def _assign(self, i: int, lab: int) -> None:
        self.label[i] = lab
        self.workers[lab].pending.append(i)

    def _rebalance(self, problem: PlacementProblem, assign: np.ndarray, members: list[int]) -> int:
        """Alg. 2 moves of new requests from under- to over-estimated workers; edits ``assign``."""
        a = problem.arrays
        present = {int(x) for x in a.ongoing_labels}
        under = [l for l in present if self.workers[l].under and not self.workers[l].over]
        over = [l for l in present if self.workers[l].over and not self.workers[l].under]
        if not under or not over:
            return 0
        loads: dict[int, WorkerLoad] = {}
        for p, lab in enumerate(assign):
            loads.setdefault(int(lab), WorkerLoad(a, int(lab))).add(p)
        over.sort(key=lambda l: (-self.workers[l].error, l))
        moves = 0
        for u in sorted(under, key=lambda l: (self.workers[l].error, l)):
            for p in [p for p in loads[u].requests if a.is_new[p]]:
                target = next((o for o in over if loads[o].fits(p)), None)
                if target is not None:
                    loads[u].remove(p)
                    loads[target].add(p)
                    assign[p] = target
                    self.moved[members[p]] = True
                    moves += 1
        return moves

    # ---- simulation ------------------------------------------------------------
    def _repredict(self, i: int, w: _Worker) -> None:
        g, old = int(self.gen[i]), int(self.pred[i])
        if self.predictor is not None:
            new = math.ceil(self.predictor.conditional_mean_output(float(self.inp[i]), float(g)) - 1e-9)
        else:
            new = g + 1
        new = max(min(new, self.model.max_context_tokens - int(self.inp[i])), g + 1)
        self.pred[i] = new
        self.req[i] = self.req[i].model_copy(update={"predicted_output_tokens": int(new)})
        self.repred[i] += 1
        w.error -= new - old
        w.under = True

    def _advance(self, w: _Worker, h: float, end: float) -> tuple[float, int, int]:
        """Simulate worker ``w`` over the window [h, end): (KV peak bytes, finished, re-predictions)."""
        c = self.cost
        if w.pending:
            pend = np.array(sorted(w.pending, key=lambda i: (self.arrival[i], i)), dtype=np.int64)
            start = max(w.clock, h)
            self.iter_wait[pend] = start - h
            if self.colocated:
                dur = c.prefill_time(float(self.inp[pend].sum()))
                self.prefill_s[pend] = dur
                self.first_token[pend] = start + dur
                w.clock = start + dur
            else:
                self.prefill_s[pend] = self.own_prefill[pend]
                self.first_token[pend] = self.arrival[pend] + self.own_prefill[pend]
                w.clock = start
            self.decode_start[pend] = w.clock
            w.members = np.concatenate([w.members, pend])
            w.pending = []
        idx = w.members
        peak = float(c.kv_bytes_per_token * (self.inp[idx] + self.gen[idx]).sum() + idx.size * c.kv_bytes_base)
        finished = repredicted = 0
        while idx.size and w.clock < end:
            b = idx.size
            # iteration q (0-based) of this segment: t_q = c2 + k2·b + k3·(L + b·q)
            total = float((self.inp[idx] + self.gen[idx]).sum())
            n_event = int((self.out[idx] - self.gen[idx]).min())
            if self.rebalance:
                n_event = min(n_event, int((self.pred[idx] - self.gen[idx]).min()))
            t0 = c.decode_time(b, total)
            m = min(n_event, int((end - w.clock) / t0) + 1)
            ends = w.clock + np.cumsum(t0 + c.decode_s_per_context_token * b * np.arange(m))
            m = max(1, int(np.searchsorted(np.concatenate(([w.clock], ends[:-1])), end, side="left")))
            peak = max(peak, c.kv_bytes_per_token * (total + b * (m - 1)) + b * c.kv_bytes_base)
            w.clock = float(ends[m - 1])
            self.gen[idx] += m
            done = self.gen[idx] >= self.out[idx]
            if done.any():
                fin = idx[done]
                self.finish[fin] = w.clock
                finished += int(fin.size)
                if self.rebalance:
                    early = self.pred[fin] > self.out[fin]
                    if early.any():
                        w.error += float((self.pred[fin] - self.out[fin])[early].sum())
                        w.over = True
            if self.rebalance:
                for i in idx[(self.gen[idx] >= self.pred[idx]) & ~done]:
                    self._repredict(int(i), w)
                    repredicted += 1
            idx = idx[~done]
        w.members = idx
        return peak, finished, repredicted

    # ---- main loop -------------------------------------------------------------
    def run(self, max_heartbeats: int | None) -> ReplayResult:
        order = np.lexsort((np.arange(self.n), self.arrival, self.dispatch))
        ptr, count = 0, 0
        k = int(self.dispatch[order[0]]) if self.n else 0
        while ptr < self.n or any(w.load for w in self.workers.values()):
            if max_heartbeats is not None and count >= max_heartbeats:
                break
            h = k * self.dt
            released = [lab for lab, w in self.workers.items() if not w.load]
            for lab in released:
                del self.workers[lab]
            stop = ptr
            while stop < self.n and self.dispatch[order[stop]] <= k:
                stop += 1
            new = [int(i) for i in order[ptr:stop]]
            ptr = stop
            before = self.next_label
            row: dict[str, Any] = {"heartbeat": k, "time_s": h, "new_requests": len(new),
                                   "closed_workers": 0, "forced": 0, "fallback": False, "moves": 0}
            if new:
                self.hb[new] = k
                t0 = time.perf_counter()
                self._place(k, h, new, row)
                self.placement_seconds += time.perf_counter() - t0
            marks = {lab: ["", "under", "over", "both"][w.under + 2 * w.over] for lab, w in self.workers.items()}
            for w in self.workers.values():
                w.under = w.over = False
            row.update(opened=self.next_label - before, released=len(released),
                       active_workers=sum(1 for w in self.workers.values() if w.load),
                       running_requests=sum(w.load for w in self.workers.values()))
            fin = rep = over = 0
            peak_frac = 0.0
            for lab in sorted(self.workers):
                w = self.workers[lab]
                running, fresh = w.load, len(w.pending)
                peak, f, r = self._advance(w, h, h + self.dt)
                fin, rep, frac = fin + f, rep + r, peak / self.m_kv
                over += frac > 1 + _TOL
                peak_frac = max(peak_frac, frac)
                self.w_rows.append({"heartbeat": k, "worker": lab, "running": running, "new": fresh,
                                    "kv_peak_fraction": frac, "kv_overflow": bool(frac > 1 + _TOL),
                                    "error_tokens": w.error, "mark": marks.get(lab, "")})
            row.update(finished=fin, repredictions=rep, kv_overflow_workers=over, kv_peak_fraction=peak_frac)
            self.hb_rows.append(row)
            k += 1
            count += 1
        return self._result()

    def _result(self) -> ReplayResult:
        done = ~np.isnan(self.finish)
        hb_time = np.where(self.hb >= 0, self.hb * self.dt, np.nan)
        ttft = self.first_token - self.arrival
        judged = ttft if (self.ttft_clock == "arrival" or not self.colocated) else self.first_token - hb_time
        decode = self.finish - self.decode_start
        atgt = decode / self.out
        t_slo = np.array([self.slos[r.slo_class].ttft_s or np.inf for r in self.req], dtype=float)
        a_slo = np.array([self.slos[r.slo_class].atgt_s or np.inf for r in self.req], dtype=float)
        ttft_met = done & (judged <= t_slo * (1 + _TOL))
        atgt_met = done & (atgt <= a_slo * (1 + _TOL))
        requests = pd.DataFrame({
            "request_id": [r.request_id for r in self.req], "arrival_s": self.arrival,
            "input_tokens": self.inp, "output_tokens": self.out, "predicted_output_tokens": self.pred0,
            "final_prediction": self.pred, "repredictions": self.repred, "heartbeat": self.hb,
            "dispatch_s": hb_time, "worker": self.label, "moved": self.moved, "forced": self.forced,
            "heartbeat_wait_s": hb_time - self.arrival, "iteration_wait_s": self.iter_wait,
            "prefill_s": self.prefill_s, "first_token_s": self.first_token, "ttft_s": ttft,
            "decode_start_s": self.decode_start, "finish_s": self.finish, "decode_s": decode, "atgt_s": atgt,
            "finished": done, "ttft_met": ttft_met, "atgt_met": atgt_met, "slo_met": ttft_met & atgt_met,
        })
        heartbeats = pd.DataFrame(self.hb_rows, columns=[
            "heartbeat", "time_s", "new_requests", "running_requests", "active_workers", "opened", "released",
            "closed_workers", "forced", "fallback", "moves", "finished", "repredictions",
            "kv_overflow_workers", "kv_peak_fraction"])
        workers = pd.DataFrame(self.w_rows, columns=[
            "heartbeat", "worker", "running", "new", "kv_peak_fraction", "kv_overflow", "error_tokens", "mark"])
        return ReplayResult(
            requests=requests, heartbeats=heartbeats, workers=workers, method=self.method, heartbeat_s=self.dt,
            gpus_per_worker=self.worker.tensor_parallel,
            slo_attainment=float(requests["slo_met"].mean()) if self.n else 1.0,
            p99_atgt_s=float(np.percentile(atgt[done], 99)) if done.any() else float("nan"),
            peak_workers=int(heartbeats["active_workers"].max()) if len(heartbeats) else 0,
            mean_workers=float(heartbeats["active_workers"].mean()) if len(heartbeats) else 0.0,
            kv_overflows=int(workers["kv_overflow"].sum()), repredictions=int(self.repred.sum()),
            moves=int(heartbeats["moves"].sum()) if len(heartbeats) else 0,
            placement_seconds=self.placement_seconds,
            invalid_plans=int((~heartbeats["plan_valid"].astype(bool)).sum()) if "plan_valid" in heartbeats else 0,
        )


def replay(
    workload: Workload,
    *,
    model: LLMSpec,
    worker: WorkerConfig,
    cost: AladdinCostModel,
    slos: SLOSet,
    options: PlacementOptions = PlacementOptions(),
    heartbeat_s: float = 1.0,
    method: str = "best_fit",
    rebalance: bool = True,
    predictor: LengthDistribution | None = None,
    seed: int = 0,
    max_heartbeats: int | None = None,
    time_limit: float | None = 10.0,
    ttft_clock: Literal["arrival", "heartbeat"] = "arrival",
    solver: str = "highs",
    threads: int | None = None,
) -> ReplayResult:
    """Replay ``workload`` through Aladdin's online scheduler (module docstring has the semantics).

    ``time_limit`` (s) bounds each heartbeat's MIP when ``method="mip"``, solved by ``solver`` with
    ``threads``.
    ``seed`` drives the randomised baselines (``seed + heartbeat``) and the
    MIP.  The replay is deterministic given its inputs (``method="mip"``
    only when no heartbeat hits its time limit).  With
    ``max_heartbeats`` the replay stops early; unfinished requests have
    ``finished=False`` and count as SLO misses.
    """
    return _Replay(workload, model, worker, cost, slos, options, heartbeat_s, method, rebalance, predictor, seed,
                   time_limit, ttft_clock, solver, threads).run(max_heartbeats)
